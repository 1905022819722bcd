# 2026-12-05 (tenth run): the sm90 kernel as a programmatic dependent of the pre-pass's quantise
# launch (kernel option pdl), checked bit for bit against pdl off and paired, then the device check.
# On the CPU first:
#   python3 scripts/build_prebuilt.py --only sm90 --sm90-config '{"pdl": false}' --sm90-head-dims 64 128 --out .device/sm90_pair
#   tar -C .device -cf - sm90_pair | .device/zstd -q -19 -o .device/sm90_pair.tar.zst -f
# carrying [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst",
# ".device/sm90_pair.tar.zst"]:  bash docs/results/2026-12-05j-h100/job.sh pdl
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-05j-h100
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
.device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
pdl_short)
  LSE=0 MAX_S=2048 ROUNDS=5 timeout 200 python3 $D/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs_short.txt ;;
pdl_long)
  LSE=0 MIN_S=4096 ROUNDS=4 timeout 300 python3 $D/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs_long.txt ;;
alone)
  for m in fp8 direct-p; do timeout 200 python3 scripts/profile_sm90_device.py pairs --mode $m --configs "{}" "{\"pdl\": false}" --shapes 1x12x32760x128 1x40x32760x128 --rounds 4 --prebuilt-dir .device/sm90_pair 2>&1 | grep -v "skipped inside" | tee -a $OUT/pdl_alone.txt; done ;;
fp8_long)
  FP8_LONG=1 LSE=0 ROUNDS=4 timeout 400 python3 $D/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs_fp8.txt ;;
split_order)
  # the split kernel with and without pdl, the order alternated per round; then an A/A control in
  # the first runs' order (the package's kernel on both sides, OFF={})
  FP8_LONG=2 ORDER=alternate LSE=0 ROUNDS=6 timeout 300 python3 $D/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs_split_order.txt
  FP8_LONG=3 OFF={} LSE=0 ROUNDS=4 timeout 150 python3 $D/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs_aa.txt ;;
line)
  # the package as committed: the device check, then what a call at 1,024 and 4,096 tokens costs
  # beside cuDNN BF16 (profile_sm90_device.py floor)
  timeout 170 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check_line.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_line.txt; grep -E "^(FAIL|ERROR)" $OUT/check_line.txt | head -20
  timeout 300 python3 scripts/profile_sm90_device.py floor 2>&1 | grep -v "skipped inside" | tee $OUT/floor.txt ;;
trace)
  # the kernels' timestamps under torch.profiler in one graph replay, pdl and off, with and without the LSE
  timeout 200 python3 $D/pdl_trace.py 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_trace.txt ;;
final)
  timeout 170 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check_final.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_final.txt; grep -E "^(FAIL|ERROR)" $OUT/check_final.txt | head -20
  LSE=0 ROUNDS=4 timeout 360 python3 $D/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs_final.txt ;;
pdl)
  timeout 150 python3 $D/kernel_pdl.py check 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_check.txt
  timeout 260 python3 $D/kernel_pdl.py pairs 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs.txt
  timeout 160 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check.txt; grep -E "^(FAIL|ERROR)" $OUT/check.txt | head -20 ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
