# Issue 16: the first key tile's K scale loaded before the consumers' first waits (the kernel had
# issued it after QK(0)'s wait, so every CTA waited one round trip before its first softmax;
# docs/SM90_GEN2.md item 45, BENCHMARKS.md 2026-12-06 twelfth run). Prepare on the CPU:
#   python3 scripts/build_prebuilt.py --only sm90           (the package, every object changed)
#   (cd wan_fp4/kernels/prebuilt/sm90a && tar -cf - lib*.so | ../../../../.device/zstd -q -19 -o ../../../../.device/shims.tar.zst -f)
#   .device/sm90_old: the commit before's objects, the new manifest, shims linked on the CPU
#   (as in 2026-12-06h-h100/job.sh); tar -C .device -cf - sm90_old | .device/zstd -q -19 -o .device/sm90_old.tar.zst -f
# carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst", ".device/sm90_old.tar.zst"]
set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
.device/zstd -q -d -c .device/sm90_old.tar.zst | tar -C .device -xf - || exit 4
W=docs/results/2026-12-06h-h100/work.py  # old (.device/sm90_old) against new (the package), bits and pairs
timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
timeout 100 python3 $W check 2>&1 | grep -v "skipped inside" | tee $OUT/check_old_new.txt
ROUNDS=6 timeout 250 python3 $W pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pairs_old_new.txt
date -u +%H:%M:%S
