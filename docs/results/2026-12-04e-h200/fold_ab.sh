set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
BASE=$PYTHONPATH
date -u +%H:%M:%S
for r in 1 2; do
  PYTHONPATH=$PWD/.device/old:$BASE python3 .device/jobs/fold_ab.py old 2>&1 | grep -v Warning | tee -a $OUT/fold_ab.txt
  PYTHONPATH=$PWD:$BASE python3 .device/jobs/fold_ab.py new 2>&1 | grep -v Warning | tee -a $OUT/fold_ab.txt
  date -u +%H:%M:%S
done
