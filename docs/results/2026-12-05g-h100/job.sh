# The seventh run of 2026-12-05 (H100s; BENCHMARKS.md, "seventh run"; docs/SM90_GEN2.md item 32).
# Each case was one device call, carrying [".device/py.tar.zst", ".device/install.sh", ".device/zstd",
# ".device/shims.tar.zst"] (`wg3` carries ".device/sm90_wg3" instead of the shims: built on the CPU with
#   python3 scripts/build_prebuilt.py --only sm90 --out .device/sm90_wg3 \
#     --sm90-config '{"n_wg": 3, "p_smem": true, "overlap": false, "fold": 2, "intra": false, "headroom": 0}' \
#     --sm90-config '{"headroom": 0}' --sm90-head-dims 128).
#   bash docs/results/2026-12-05g-h100/job.sh carveout|l2|evict|evict_calls|keep_pairs|check|floor|wg3|host
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
evict)
  # the quantise launch's loads evict-first and its codes evict-last, then with the statistics'
  # loads evict-last too, between two passes of the package
  timeout 100 python3 $D/l2_probe.py package 2>&1 | tee $OUT/evict.txt
  for v in codes_evict_last codes_and_stats_evict_last; do
    git apply $D/$v.diff || { echo "$v did not apply"; continue; }
    timeout 100 python3 $D/bytes_check.py $v 2>&1 | tee -a $OUT/evict.txt
    timeout 100 python3 $D/l2_probe.py $v 2>&1 | tee -a $OUT/evict.txt
    git checkout wan_fp4/kernels/prepare.py
  done
  timeout 100 python3 $D/l2_probe.py package-again 2>&1 | tee -a $OUT/evict.txt ;;
evict_calls)
  # the whole call at short and Wan lengths, the package and the codes evict-last, alternated twice
  for round in 1 2; do
    timeout 120 python3 $D/evict_calls.py package 2>&1 | tee -a $OUT/evict_calls.txt
    git apply $D/codes_evict_last.diff || exit 5
    timeout 120 python3 $D/evict_calls.py codes_evict_last 2>&1 | tee -a $OUT/evict_calls.txt
    git checkout wan_fp4/kernels/prepare.py
  done ;;
keep_pairs)
  # the committed rule against the same calls with it off, paired (the byte check first)
  timeout 100 python3 $D/bytes_check.py package 2>&1 | tee $OUT/keep_pairs.txt
  timeout 400 python3 $D/keep_pairs.py 2>&1 | tee -a $OUT/keep_pairs.txt ;;
check)
  # the device check of the pre-pass and both kernel families with the codes kept in L2
  timeout 500 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check.txt; grep -E "^(FAIL|ERROR)" $OUT/check.txt | head -20 ;;
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
