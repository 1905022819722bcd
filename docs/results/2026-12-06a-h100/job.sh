# 2026-12-06: the column statistics launch with its loads issued a tile ahead (prepare.STATS_AHEAD),
# paired against the plain loop and against two statistics programs per SM. Carry
# [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"]:
#   bash docs/results/2026-12-06a-h100/job.sh stats
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-06a-h100
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
stats)
  ROUNDS=3 timeout 280 python3 $D/stats_ahead.py 2>&1 | grep -v "skipped inside" | tee $OUT/stats_short.txt ;;
stats_min)
  SET=min ROUNDS=3 timeout 150 python3 $D/stats_ahead.py 2>&1 | grep -v "skipped inside" | tee $OUT/stats_min.txt ;;
stats_long)
  SET=long ROUNDS=2 timeout 250 python3 $D/stats_ahead.py 2>&1 | grep -v "skipped inside" | tee $OUT/stats_long.txt ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
