set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 docs/results/2026-12-04c-h200/prepass_l2.py .device/sm90_cur 2>&1 | tee $OUT/prepass_l2.txt
date -u +%H:%M:%S
