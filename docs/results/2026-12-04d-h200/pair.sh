set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 docs/results/2026-12-04d-h200/fp8_pair_rounds.py .device/sm90_ab 6 2>&1 | tee $OUT/fp8_pair_rounds.txt
date -u +%H:%M:%S
