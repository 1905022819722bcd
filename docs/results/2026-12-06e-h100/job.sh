# 2026-12-06, fifth run: the short call with its inputs just written (fresh.py). Carry
# [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"].
#   bash docs/results/2026-12-06e-h100/job.sh fresh
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-06e-h100
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
fresh) timeout 300 python3 $D/fresh.py 2>&1 | grep -v "skipped inside" | tee $OUT/fresh.txt ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
