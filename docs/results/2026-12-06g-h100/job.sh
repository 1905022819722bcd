# Issue 16: the last partial wave's query tiles split by rows (sm90 option tail_rows,
# docs/SM90_GEN2.md item 41; BENCHMARKS.md 2026-12-06 seventh run). Build on the CPU first:
#   python3 scripts/build_prebuilt.py --only sm90 --sm90-config '{"tail_rows": true}' --sm90-head-dims 128 64 --out .device/sm90_pair
#   tar -C .device -cf - sm90_pair | .device/zstd -q -19 -o .device/sm90_pair.tar.zst -f
# carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/sm90_pair.tar.zst"]
# `rows` ran the first build (each CTA's index decoded by integer division), `rows2` the second
# (fast divisors); `package` the package as committed, twice (`package/`, `package2/`).
set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
rows|rows2)
  .device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
  timeout 150 python3 docs/results/2026-12-06g-h100/tail.py check 2>&1 | grep -v "skipped inside" | tee $OUT/check.txt
  timeout 200 python3 -m wan_fp4.cli check --kernels sm90-cute --configs '[{"tail_rows": true}]' \
    --prebuilt-dir .device/sm90_pair > $OUT/check_device.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_device.txt; grep -E "^(FAIL|ERROR)" $OUT/check_device.txt | head -20
  timeout 200 python3 docs/results/2026-12-06g-h100/tail.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pairs.txt
  timeout 60 python3 docs/results/2026-12-06g-h100/tail.py cudnn 2>&1 | grep -v "skipped inside" | tee $OUT/cudnn.txt
  ;;
package)
  # the package as committed (tail_rows direct-p's default; its own objects and linked shims:
  # carry .device/shims.tar.zst instead of the pair): the device check, the bit check against the
  # plain kernel, the pairs at the shapes it splits and at one it leaves plain, cuDNN BF16 beside
  .device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
  timeout 200 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
  PACKAGE=1 timeout 100 python3 docs/results/2026-12-06g-h100/tail.py check 2>&1 | grep -v "skipped inside" | tee $OUT/check.txt
  PACKAGE=1 timeout 100 python3 docs/results/2026-12-06g-h100/tail.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pairs.txt
  PACKAGE=1 timeout 40 python3 docs/results/2026-12-06g-h100/tail.py cudnn 2>&1 | grep -v "skipped inside" | tee $OUT/cudnn.txt
  ;;
esac
date -u +%H:%M:%S
