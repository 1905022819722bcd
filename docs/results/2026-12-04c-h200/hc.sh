set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 docs/results/2026-12-04c-h200/host_cross.py .device/sm90 2>&1 | tee $OUT/host_cross.txt
date -u +%H:%M:%S
