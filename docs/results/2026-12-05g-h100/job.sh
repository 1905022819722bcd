# The seventh run of 2026-12-05 (H100s; BENCHMARKS.md, "seventh run"; docs/SM90_GEN2.md item 32).
# Each case was one device call, carrying [".device/py.tar.zst", ".device/install.sh", ".device/zstd",
# ".device/shims.tar.zst"] (`wg3` carries ".device/sm90_wg3" instead of the shims: built on the CPU with
#   python3 scripts/build_prebuilt.py --only sm90 --out .device/sm90_wg3 \
#     --sm90-config '{"n_wg": 3, "p_smem": true, "overlap": false, "fold": 2, "intra": false, "headroom": 0}' \
#     --sm90-config '{"headroom": 0}' --sm90-head-dims 128).
#   bash docs/results/2026-12-05g-h100/job.sh carveout|l2|floor|wg3|host
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-05g-h100
[ "$1" = wg3 ] || { .device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4; }
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
carveout) timeout 400 python3 $D/carveout_probe.py 2>&1 | tee $OUT/carveout.txt ;;
l2)
  # the package, then the quantise launch taking heads last to first, then the package again
  timeout 200 python3 $D/l2_probe.py package 2>&1 | tee $OUT/l2.txt
  git apply $D/quant_heads_reversed.diff && timeout 200 python3 $D/l2_probe.py quant-heads-reversed 2>&1 | tee -a $OUT/l2.txt
  git checkout wan_fp4/kernels/prepare.py
  timeout 100 python3 $D/l2_probe.py package-again 2>&1 | tee -a $OUT/l2.txt ;;
floor) timeout 300 python3 scripts/profile_sm90_device.py floor 2>&1 | tee $OUT/floor.txt ;;
wg3)
  timeout 300 python3 scripts/profile_sm90_device.py short --prebuilt-dir .device/sm90_wg3 --configs '{"headroom": 0}' \
    '{"n_wg": 3, "p_smem": true, "overlap": false, "fold": 2, "intra": false, "headroom": 0}' \
    --lengths 1024 2048 4096 7680 2>&1 | grep -v "^fp8" | tee $OUT/short_wg3.txt ;;
host)
  # three calls on the day; one here
  timeout 300 python3 $D/host_split.py 2>&1 | tee $OUT/host_split.txt
  timeout 300 python3 $D/host_prof.py > $OUT/host_prof.txt 2>&1
  timeout 300 python3 $D/host_micro.py 2>&1 | tee $OUT/host_micro.txt
  timeout 300 python3 $D/host_trace.py 2>&1 | tee $OUT/host_trace.txt ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
