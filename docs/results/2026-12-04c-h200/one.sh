set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 -m wan_fp4.cli check --kernels triton,sm90-cute --prebuilt-dir .device/sm90 --json $OUT/check_one.json 2>&1 | tail -4 | tee $OUT/check_one.txt
date -u +%H:%M:%S
python3 docs/results/2026-12-04c-h200/one_launch.py 2>&1 | tee $OUT/one_launch.txt
date -u +%H:%M:%S
