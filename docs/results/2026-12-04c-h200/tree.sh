set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 -m wan_fp4.cli check --kernels sm90-cute --prebuilt-dir .device/sm90_tree --json $OUT/check_tree.json 2>&1 | tail -3 | tee $OUT/check_tree.txt
date -u +%H:%M:%S
python3 docs/results/2026-12-04c-h200/fp8_sum_ab.py 2>&1 | tee $OUT/fp8_sum_ab.txt
date -u +%H:%M:%S
