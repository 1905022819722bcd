set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py short --prebuilt-dir .device/sm90_short --configs '{"n_wg": 3, "p_smem": true, "overlap": false, "fold": 2, "intra": false, "headroom": 0}' '{"headroom": 0}' '{"cluster": 2}' 2>&1 | tee $OUT/short.txt
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py waves --prebuilt-dir .device/sm90_short --configs '{"n_wg": 3, "p_smem": true, "overlap": false, "fold": 2, "intra": false, "headroom": 0}' 2>&1 | tee $OUT/waves.txt
date -u +%H:%M:%S
