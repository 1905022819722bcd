set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
date -u +%H:%M:%S
python3 docs/results/2026-12-04c-h200/one_launch.py .device/sm90 2>&1 | tee $OUT/one_launch.txt
date -u +%H:%M:%S
