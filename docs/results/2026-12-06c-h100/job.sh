# 2026-12-06, third run: the pre-pass's launch shapes (variants.py). Carry [".device/py.tar.zst",
# ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"].
#   bash docs/results/2026-12-06c-h100/job.sh short|long|all   (the first call, before the change:
#     base = no register limit on either launch; short.txt, long.txt)
#   bash docs/results/2026-12-06c-h100/job.sh confirm   (after the change: base = TOTALS_MAXNREG 128
#     against the limit off; on a second H100, confirm_*.txt, and on the H200, h200/confirm_*.txt, which
#     that call's command moved into h200/ after the job)
#   bash docs/results/2026-12-06c-h100/job.sh floor   (on an H200, h200/floor.txt: the 1,024- and 4,096-token pieces with the
#     committed code, cuDNN BF16 in the same process: scripts/profile_sm90_device.py floor; floor.txt)
#   bash docs/results/2026-12-06c-h100/job.sh loads   (an H100; TOTALS_LOADS 32, alone and with FOLD_READS 65,536,
#     against the committed 16 and 16,384; loads_*.txt)
#   bash docs/results/2026-12-06c-h100/job.sh queued  (on the H200, files in h200/: next-h200/job.sh's keep_l2 and the pairs of its
#     pdl case, on the package's own kernels; keep_pairs.txt, pdl_pairs.txt)
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-06c-h100
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
short) SET=short timeout 500 python3 $D/variants.py 2>&1 | grep -v "skipped inside" | tee $OUT/short.txt ;;
long) SET=long ROUNDS=2 timeout 500 python3 $D/variants.py 2>&1 | grep -v "skipped inside" | tee $OUT/long.txt ;;
all) SET=short timeout 300 python3 $D/variants.py 2>&1 | grep -v "skipped inside" | tee $OUT/short.txt
     SET=long ROUNDS=2 timeout 250 python3 $D/variants.py 2>&1 | grep -v "skipped inside" | tee $OUT/long.txt ;;
confirm) VARIANTS=totals_off SET=short timeout 250 python3 $D/variants.py 2>&1 | grep -v "skipped inside" | tee $OUT/confirm_short.txt
     VARIANTS=totals_off SET=long ROUNDS=2 timeout 200 python3 $D/variants.py 2>&1 | grep -v "skipped inside" | tee $OUT/confirm_long.txt ;;
loads) VARIANTS=loads32,loads32_fold SET=short timeout 280 python3 $D/variants.py 2>&1 | grep -v "skipped inside" | tee $OUT/loads_short.txt
     VARIANTS=loads32,loads32_fold SET=long ROUNDS=2 timeout 250 python3 $D/variants.py 2>&1 | grep -v "skipped inside" | tee $OUT/loads_long.txt ;;
queued) timeout 250 python3 docs/results/2026-12-05g-h100/keep_pairs.py 2>&1 | grep -v "skipped inside" | tee $OUT/keep_pairs.txt
     timeout 240 python3 docs/results/2026-12-05i-h100/pdl_pairs.py 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs.txt ;;
floor) timeout 400 python3 scripts/profile_sm90_device.py floor 2>&1 | grep -v "skipped inside" | tee $OUT/floor.txt ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
