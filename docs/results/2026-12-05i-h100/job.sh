# The ninth run of 2026-12-05 (H100; BENCHMARKS.md, "ninth run"): the pre-pass's later launches as
# programmatic dependents of the statistics launch (prepare.PDL_PREPASS), checked bit for bit and
# paired against the plain launches, then the device check. Each case one call, carrying
# [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"]:
#   bash docs/results/2026-12-05i-h100/job.sh pdl | vs_head | order
# On the day `pdl`, `vs_head` and `order` ran on a first version that also put every Q block first
# in the quantise launch's order (q_first_order.diff applied to the package as committed gives it
# back); `order` found the package's order (each head's Q, K and V blocks together) faster with PDL,
# and `final` then checked and paired the package as committed.
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-05i-h100
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
pdl|final)
  # bytes and range statistics against the torch path, then PDL on against off, then the check
  [ "$1" = pdl ] && { git apply $D/q_first_order.diff || exit 5; }
  timeout 150 python3 $D/pdl_check.py 2>&1 | tee $OUT/pdl_check_$1.txt
  timeout 240 python3 $D/pdl_pairs.py 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs_$1.txt
  timeout 170 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check_$1.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_$1.txt; grep -E "^(FAIL|ERROR)" $OUT/check_$1.txt | head -20 ;;
vs_head|order)
  # the whole call in alternating processes: vs_head, the Q-first version against the parent
  # commit's prepare.py (no PDL); order, the Q-first version against the package's order
  cp wan_fp4/kernels/prepare.py /tmp/prepare_package.py
  git apply $D/q_first_order.diff && cp wan_fp4/kernels/prepare.py /tmp/prepare_new.py || exit 5
  if [ "$1" = vs_head ]; then other=head; git show HEAD~1:wan_fp4/kernels/prepare.py > /tmp/prepare_head.py
  else other=package; fi
  for r in 1 2 3; do
    for variant in new $other; do
      cp /tmp/prepare_$variant.py wan_fp4/kernels/prepare.py
      timeout 90 python3 $D/call_times.py $variant 2>&1 | grep -v "skipped inside" | tee -a $OUT/$1.txt
    done
  done
  cp /tmp/prepare_package.py wan_fp4/kernels/prepare.py ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
