# 2026-12-06, second run: the column statistics' programs. Carry [".device/py.tar.zst",
# ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"].
#   short, long, all: stats_warps.py, the sweep of runs 1-4. It set module constants of a working
#     state of prepare.py that was not kept (STATS_WARPS, STATS_ROWS, STATS_CHUNKS, _WARPS_PER_SM,
#     STATS_HEADS_FIRST in run 2, STATS_RUNTIME_CHUNK and STATS_AHEAD in run 3, STATS_MAXNREG in
#     run 4); it does not run on the package as committed. Its files are the record.
#   final: final.py, the committed change against prepare.py before it. Put the old module in place
#     on the CPU first (the device has no history):
#       git show abc6aa6:wan_fp4/kernels/prepare.py > wan_fp4/kernels/_prepare_before.py
#     bash docs/results/2026-12-06b-h100-h200/job.sh final
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-06b-h100-h200
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
short) SET=short timeout 400 python3 $D/stats_warps.py 2>&1 | grep -v "skipped inside" | tee $OUT/short.txt ;;
long) SET=long ROUNDS=2 timeout 400 python3 $D/stats_warps.py 2>&1 | grep -v "skipped inside" | tee $OUT/long.txt ;;
all) SET=short timeout 330 python3 $D/stats_warps.py 2>&1 | grep -v "skipped inside" | tee $OUT/short.txt
     SET=long ROUNDS=2 timeout 230 python3 $D/stats_warps.py 2>&1 | grep -v "skipped inside" | tee $OUT/long.txt ;;
final)
  [ -f wan_fp4/kernels/_prepare_before.py ] || { echo "put prepare.py of abc6aa6 in wan_fp4/kernels/_prepare_before.py first"; exit 2; }
  SET=short timeout 250 python3 $D/final.py 2>&1 | grep -v "skipped inside" | tee $OUT/final_short.txt
  SET=long ROUNDS=2 timeout 150 python3 $D/final.py 2>&1 | grep -v "skipped inside" | tee $OUT/final_long.txt ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
