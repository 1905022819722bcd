# 2026-12-06: the pre-pass's loads issued earlier (prepass_loads.py: prepare.STATS_AHEAD and
# prepare.QUANT_ROWS_FIRST), paired against the plain launches; run with prepass_loads.diff applied to
# 1daed27 (BENCHMARKS.md, 2026-12-06; later commits have the rows first as the only path). Carry
# [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"]:
#   bash docs/results/2026-12-06a-h100/job.sh short
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-06a-h100
grep -q QUANT_ROWS_FIRST wan_fp4/kernels/prepare.py || { echo "apply $D/prepass_loads.diff first"; exit 2; }
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
short)
  ROUNDS=3 timeout 280 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/short.txt ;;
min)
  SET=min ROUNDS=3 timeout 150 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/min.txt ;;
rows)
  VARIANTS=plain,rows ROUNDS=3 timeout 200 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/rows_short.txt
  VARIANTS=plain,rows SET=long ROUNDS=2 timeout 200 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/rows_long.txt ;;
long)
  SET=long ROUNDS=2 timeout 250 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/long.txt ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
