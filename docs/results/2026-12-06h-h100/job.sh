# Issue 16: split_tail and tail_rows decode each CTA's index with one function, split.cta_work, by
# the launch's multiply-shift divisors (BENCHMARKS.md 2026-12-06 eighth run); `lanes` (ninth run) and
# `epilogue` (tenth run) are probes whose diffs are in this folder. For `divisors`, prepare on the CPU:
#   python3 scripts/build_prebuilt.py --only sm90            (the package's new objects and shims)
#   (cd wan_fp4/kernels/prebuilt/sm90a && tar -cf - lib*.so | ../../../../.device/zstd -q -19 -o ../../../../.device/shims.tar.zst -f)
#   .device/sm90_old: the objects of the commit before (git show), the new manifest, shims linked
#   with wan_fp4.kernels.aot.link_shim; tar -C .device -cf - sm90_old | .device/zstd -q -19 -o .device/sm90_old.tar.zst -f
# carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst", ".device/sm90_old.tar.zst"]
set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
case "$1" in
lanes)
  # two CTAs of one consumer warp group per SM (ctas_per_sm 2), the first round's second CTA per
  # SM started stagger_ns later (a probe, not kept: lanes.diff). Build with lanes.diff applied:
  #   python3 scripts/build_prebuilt.py --only sm90 --sm90-config '{"ctas_per_sm": 2}' \
  #     --sm90-config '{"ctas_per_sm": 2, "stagger_ns": 2000}' --sm90-config '{"ctas_per_sm": 2, "stagger_ns": 4000}' \
  #     --sm90-config '{"ctas_per_sm": 2, "stagger_ns": 4000, "stagger_odd": true}' --sm90-head-dims 128 64 --out .device/sm90_pair
  #   tar -C .device -cf - sm90_pair | .device/zstd -q -19 -o .device/sm90_pair.tar.zst -f
  # carry .device/sm90_pair.tar.zst too
  .device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
  timeout 200 python3 -m wan_fp4.cli check --kernels sm90-cute \
    --configs '[{"ctas_per_sm": 2}, {"ctas_per_sm": 2, "stagger_ns": 4000}]' \
    --prebuilt-dir .device/sm90_pair > $OUT/check_lanes.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_lanes.txt; grep -E "^(FAIL|ERROR)" $OUT/check_lanes.txt | head -20
  timeout 300 python3 scripts/profile_sm90_device.py pairs --mode direct-p --rounds 4 --prebuilt-dir .device/sm90_pair \
    --configs '{"tail_rows": false}' '{"ctas_per_sm": 2}' '{"ctas_per_sm": 2, "stagger_ns": 2000}' \
    '{"ctas_per_sm": 2, "stagger_ns": 4000}' '{"ctas_per_sm": 2, "stagger_ns": 4000, "stagger_odd": true}' \
    --shapes 1x40x1024x128 1x40x1024x64 1x40x2048x128 1x40x4096x128 2x4x320x64 1x12x32760x128 2>&1 \
    | grep -v "skipped inside" | tee $OUT/pairs_lanes.txt | grep -v round
  ;;
epilogue)
  # the epilogue's share of a CTA's fixed cost: epilogue_probe 1 (no epilogue) and 2 (no global
  # stores) behind a runtime condition that never holds (a probe, never kept: epilogue_probe.diff;
  # BENCHMARKS.md tenth run).
  # Build with it applied: build_prebuilt.py --only sm90 --sm90-config '{"epilogue_probe": 1}'
  #   --sm90-config '{"epilogue_probe": 2}' --sm90-head-dims 128 64 --out .device/sm90_pair, and the tar
  .device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
  for d in 128 64; do
    timeout 150 python3 scripts/profile_sm90_device.py waves --shape 1x1x1x$d --prebuilt-dir .device/sm90_pair \
      --configs '{"epilogue_probe": 1}' '{"epilogue_probe": 2}' 2>&1 | grep -v "skipped inside" | tee -a $OUT/waves_epilogue.txt | grep "one CTA ="
  done
  timeout 150 python3 scripts/profile_sm90_device.py pairs --mode direct-p --rounds 3 --prebuilt-dir .device/sm90_pair \
    --configs '{"epilogue_probe": 1}' '{"epilogue_probe": 2}' --shapes 1x40x1024x128 1x40x1024x64 1x40x4096x128 2>&1 \
    | grep -v "skipped inside" | tee $OUT/pairs_epilogue.txt | grep median
  ;;
divisors)
  .device/zstd -q -d -c .device/sm90_old.tar.zst | tar -C .device -xf - || exit 4
  timeout 200 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
  timeout 150 python3 docs/results/2026-12-06h-h100/work.py check 2>&1 | grep -v "skipped inside" | tee $OUT/check.txt
  timeout 200 python3 docs/results/2026-12-06h-h100/work.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pairs.txt
  ;;
esac
date -u +%H:%M:%S
