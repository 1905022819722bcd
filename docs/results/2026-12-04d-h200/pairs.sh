set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py pairs --mode fp8 --prebuilt-dir .device/sm90_pairs --configs '{"cluster": 1, "sum_tree": false}' --rounds 5 2>&1 | tee $OUT/pairs_tool.txt
date -u +%H:%M:%S
