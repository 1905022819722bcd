# 2026-12-06, fourth run: an eager call's host time at short lengths (host.py). Carry
# [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"].
#   bash docs/results/2026-12-06d-h100/job.sh host    (host.txt)
#   bash docs/results/2026-12-06d-h100/job.sh trace   (trace.txt; a second call, another machine)
#   bash docs/results/2026-12-06d-h100/job.sh again   (again.txt: host.py with ORDER=again, a third call)
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-06d-h100
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
host) timeout 400 python3 $D/host.py 2>&1 | grep -v "skipped inside" | tee $OUT/${2:-host}.txt ;;
again) ORDER=again timeout 400 python3 $D/host.py 2>&1 | grep -v "skipped inside" | tee $OUT/again.txt ;;
trace) timeout 400 python3 $D/host_trace.py 2>&1 | grep -v "skipped inside" | tee $OUT/${2:-trace}.txt ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
