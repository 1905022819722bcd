set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py short --prebuilt-dir .device/sm90_fold --configs '{"fold": 2}' '{"fold": 1}' 2>&1 | tee $OUT/short_fold.txt
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py waves --prebuilt-dir .device/sm90_fold --configs '{"fold": 2}' 2>&1 | grep "one CTA =" | tee $OUT/waves_fold.txt
date -u +%H:%M:%S
