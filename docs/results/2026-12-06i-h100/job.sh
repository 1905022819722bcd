# Issue 16: the epilogue's output rows stored by TMA from a swizzled shared-memory tile (sm90 option
# tma_store, measured and not kept: `check` and `pairs` ran with tma_store.diff applied, which also
# holds sv_early's first form) and the V scales loaded under the last PV (sv_early, taken: `sve`,
# then `package` on the package as committed); docs/SM90_GEN2.md item 44, BENCHMARKS.md 2026-12-06
# eleventh run. Results: tma/, sve/, package/. Prepare on the CPU:
#   python3 scripts/build_prebuilt.py --only sm90     (the package; its manifest follows the sources)
#   (cd wan_fp4/kernels/prebuilt/sm90a && tar -cf - lib*.so | ../../../../.device/zstd -q -19 -o ../../../../.device/shims.tar.zst -f)
#   python3 scripts/build_prebuilt.py --only sm90 --sm90-config '{"tma_store": true}' \
#     --sm90-config '{"tma_store": true, "sv_early": true}' --sm90-head-dims 128 64 --out .device/sm90_tma
#   tar -C .device -cf - sm90_tma | .device/zstd -q -19 -o .device/sm90_tma.tar.zst -f
# carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst", ".device/sm90_tma.tar.zst"]
set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
if [ -f .device/sm90_tma.tar.zst ]; then .device/zstd -q -d -c .device/sm90_tma.tar.zst | tar -C .device -xf - || exit 4; fi
D=docs/results/2026-12-06i-h100/work.py
case "$1" in
check)
  timeout 100 python3 $D check 2>&1 | grep -v "skipped inside" | tee $OUT/check.txt
  date -u +%H:%M:%S
  timeout 200 python3 -m wan_fp4.cli check --kernels sm90-cute --configs '[{"tma_store": true}, {"tma_store": true, "sv_early": true}]' \
    --prebuilt-dir .device/sm90_tma > $OUT/check_device.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_device.txt; grep -E "^(FAIL|ERROR)" $OUT/check_device.txt | head -20
  date -u +%H:%M:%S
  for d in 128 64; do
    timeout 100 python3 scripts/profile_sm90_device.py waves --shape 1x1x1x$d --prebuilt-dir .device/sm90_tma \
      --configs '{"tma_store": true}' '{"tma_store": true, "sv_early": true}' 2>&1 | grep -v "skipped inside" | tee -a $OUT/waves.txt | grep "one CTA ="
  done
  ;;
pairs)
  timeout 300 python3 $D pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pairs.txt
  if grep -q H200 $OUT/gpu.txt; then
    # the queued H200 job: the package (tail_rows, split.cta_work) checked and paired on the H200
    # (its objects are the ones 2026-12-06g/h measured on H100s; only the manifest's hash moved)
    PACKAGE=1 timeout 80 python3 docs/results/2026-12-06g-h100/tail.py check 2>&1 | grep -v "skipped inside" | tee $OUT/tail_check.txt
    PACKAGE=1 timeout 100 python3 docs/results/2026-12-06g-h100/tail.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/tail_pairs.txt
  fi
  ;;
sve)
  # sv_early alone (the V scales loaded under the last PV, the threads' own stores):
  #   build_prebuilt.py --only sm90 --sm90-config '{"sv_early": true}' --sm90-head-dims 128 64 --out .device/sm90_sve,
  #   its tar; carry .device/sm90_sve.tar.zst
  .device/zstd -q -d -c .device/sm90_sve.tar.zst | tar -C .device -xf - || exit 4
  SET=sve timeout 100 python3 $D check 2>&1 | grep -v "skipped inside" | tee $OUT/check_sve.txt
  timeout 200 python3 -m wan_fp4.cli check --kernels sm90-cute --configs '[{"sv_early": true}]' \
    --prebuilt-dir .device/sm90_sve > $OUT/check_device_sve.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_device_sve.txt; grep -E "^(FAIL|ERROR)" $OUT/check_device_sve.txt | head -20
  SET=sve ROUNDS=6 timeout 250 python3 $D pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pairs_sve.txt
  ;;
package)
  # the package as committed, sv_early taken (direct-p, fp8 at D64) against the objects of the
  # commit before (.device/sm90_old: HEAD's objects, the new manifest, shims linked on the CPU:
  # see 2026-12-06h-h100/job.sh); carry .device/sm90_old.tar.zst
  .device/zstd -q -d -c .device/sm90_old.tar.zst | tar -C .device -xf - || exit 4
  timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
  timeout 100 python3 docs/results/2026-12-06h-h100/work.py check 2>&1 | grep -v "skipped inside" | tee $OUT/check_old_new.txt
  timeout 200 python3 docs/results/2026-12-06h-h100/work.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pairs_old_new.txt
  ;;
esac
date -u +%H:%M:%S
