# Issue 16, the 1,024-token call (BENCHMARKS.md, 2026-12-06 sixth run; docs/SM90_GEN2.md item 40).
# Every call landed on an NVIDIA H100 80GB HBM3; each case's files are in the folder named after it.
# carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd"] plus what a case names.
# - `nowait`: the kernel without griddepcontrol.wait (nowait.diff, option pdl_wait, never kept: it
#   may read codes the quantise launch is still writing; replayed on the same inputs they are the
#   last call's, the same bytes), paired with the default: the most a per-head wait could save.
#   Built on the CPU with nowait.diff applied:
#     python3 scripts/build_prebuilt.py --only sm90 --sm90-config '{"pdl_wait": false}' --sm90-head-dims 128 --out .device/sm90_pair
#     tar -C .device -cf - sm90_pair | .device/zstd -q -19 -o .device/sm90_pair.tar.zst -f
#   carry .device/sm90_pair.tar.zst.
# - `ready`, `ready2`, `final_a`/`final_b`, `gated`: the kernel waiting on its head's ready count
#   (option head_ready; head_ready.diff is its last version, measured in `gated` and not kept).
#   `ready` ran its first version (every launch per head, the quantise launch always counting);
#   `ready2` a runtime switch (per head only up to 4 waves) with the first poll issued before the
#   barriers' set-up; `final_*` the switch at compile time (a second kernel per config) with the
#   counting still always on; `gated` the counting asked for only by the launches that wait on it
#   (prepare_fp8's count_heads). `ready` and `ready2` built .device/sm90_pair with
#   --sm90-config '{"head_ready": false}' --sm90-head-dims 128 64 (carry its tar); `final_*` and
#   `gated` use the package's own objects with their linked shims (carry .device/shims.tar.zst).
#   `count_cost` and `gated` also need the package before: git show d0c5ceb:wan_fp4/kernels/prepare.py
#   > docs/results/2026-12-06f-h100/prepare_before.py (not kept here).
# - `lone`: a CTA whose second consumer warp group only releases the stages (lone_probe.diff,
#   option lone, never kept): one warp group's CTA time, by `waves`, and the kernel alone.
set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
case "$1" in
nowait)
  .device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
  OFF='{"pdl_wait": false}' LABEL=nowait ORDER=alternate LSE=0 ROUNDS=4 MAX_S=4096 timeout 400 \
    python3 docs/results/2026-12-05j-h100/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/nowait_pairs.txt
  ;;
ready)
  # head_ready: checked with fresh inputs each call, then paired against the grid-wide wait. Build:
  #   python3 scripts/build_prebuilt.py --only sm90 --sm90-config '{"head_ready": false}' --sm90-head-dims 128 64 --out .device/sm90_pair
  # and the tar as above; carry .device/sm90_pair.tar.zst
  .device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
  PREBUILT_DIR=.device/sm90_pair timeout 200 python3 docs/results/2026-12-06f-h100/ready.py check 2>&1 | grep -v "skipped inside" | tee $OUT/ready_check.txt
  OFF='{"head_ready": false}' LABEL=grid_wait ORDER=alternate LSE=0 ROUNDS=4 timeout 240 \
    python3 docs/results/2026-12-05j-h100/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/ready_pairs.txt
  PREBUILT_DIR=.device/sm90_pair timeout 60 python3 docs/results/2026-12-06f-h100/ready.py cudnn 2>&1 | grep -v "skipped inside" | tee $OUT/ready_cudnn.txt
  ;;
ready2)
  # after the first run: the first poll issued before the barriers' set-up, and the wait per head
  # only where the query tiles fill at most host.HEAD_READY_WAVES waves (a kernel argument);
  # the check with per head everywhere, then three ways paired
  .device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
  PREBUILT_DIR=.device/sm90_pair timeout 200 python3 docs/results/2026-12-06f-h100/ready.py check 2>&1 | grep -v "skipped inside" | tee $OUT/ready2_check.txt
  PREBUILT_DIR=.device/sm90_pair timeout 330 python3 docs/results/2026-12-06f-h100/ready.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/ready2_pairs.txt
  ;;
final_a|final_b)
  # the kernels as committed: the short launches' head_ready kernels chosen at compile time beside
  # the long launches' (byte for byte the earlier ones); the package's prebuilt folder with its
  # linked shims (carry .device/shims.tar.zst)
  .device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
  if [ "$1" = final_a ]; then
    timeout 300 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
    tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
    timeout 200 python3 docs/results/2026-12-06f-h100/ready.py check 2>&1 | grep -v "skipped inside" | tee $OUT/final_check.txt
  else
    timeout 330 python3 docs/results/2026-12-06f-h100/ready.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/final_pairs.txt
    timeout 90 python3 docs/results/2026-12-06f-h100/ready.py cudnn 2>&1 | grep -v "skipped inside" | tee $OUT/final_cudnn.txt
  fi
  ;;
count_cost)
  # the ready counts' cost on the pre-pass alone, against the package before them
  cp docs/results/2026-12-06f-h100/prepare_before.py wan_fp4/kernels/_prepare_before.py
  timeout 400 python3 docs/results/2026-12-06f-h100/count_cost.py 2>&1 | tee $OUT/count_cost.txt
  ;;
gated)
  # counting only where a short launch asks for it (count_heads): the pre-pass against the package
  # before, then the three ways of ready.py paired and cuDNN BF16 beside the call at 1,024 tokens
  cp docs/results/2026-12-06f-h100/prepare_before.py wan_fp4/kernels/_prepare_before.py
  .device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
  timeout 150 python3 docs/results/2026-12-06f-h100/ready.py check 2>&1 | grep -v "skipped inside" | tee $OUT/gated_check.txt
  COUNT=1 timeout 200 python3 docs/results/2026-12-06f-h100/count_cost.py 2>&1 | tee $OUT/gated_count_cost.txt
  timeout 250 python3 docs/results/2026-12-06f-h100/ready.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/gated_pairs.txt
  timeout 60 python3 docs/results/2026-12-06f-h100/ready.py cudnn 2>&1 | grep -v "skipped inside" | tee $OUT/gated_cudnn.txt
  ;;
lone)
  # PROBE (lone_probe.diff, option lone, never kept): one consumer warp group per CTA computes,
  # the other only releases the stages: a lone warp group's CTA time (waves) and the kernel alone
  # at 1,024 and 2,048 tokens (short), against the default, both from .device/sm90_pair
  .device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
  timeout 200 python3 scripts/profile_sm90_device.py waves --configs '{"lone": true}' --prebuilt-dir .device/sm90_pair 2>&1 | tee $OUT/lone_waves.txt
  timeout 120 python3 scripts/profile_sm90_device.py short --configs '{"lone": true}' --lengths 1024 2048 --prebuilt-dir .device/sm90_pair 2>&1 | grep direct-p | tee $OUT/lone_short.txt
  ;;
esac
