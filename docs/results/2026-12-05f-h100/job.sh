# The jobs of 2026-12-05's sixth run (H100s), cut from docs/results/next-h200/job.sh as it then
# stood: the one_launch, one_launch_variants and one_launch_check cases need the one-launch
# pre-pass of one_launch.diff applied (git apply docs/results/2026-12-05f-h100/one_launch.diff at
# 5e9aff4); short_ncu and stats_sweep run on the package as it is. The calls that ran the sm90
# kernels carried
# [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"] and first
# unpacked the shims: .device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf -
set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
one_launch|one_launch_variants|one_launch_check|short_ncu|stats_sweep)
  # the pre-pass in one launch (prepare._one_launch_kernel) with the package's prebuilt kernels
  # (unpack .device/shims.tar.zst into wan_fp4/kernels/prebuilt/sm90a first; carry it with the py bundle)
  P=""
  ;;&
one_launch)
  # its bytes against the torch path's, 30 calls a shape (a race would show as a call that
  # differs), under a time limit (a wait that never ended would hang here)
  timeout 120 python3 - <<'PY' 2>&1 | tee $OUT/one_launch_smoke.txt
import time, torch
from wan_fp4.eval.device_check import mismatch
from wan_fp4.kernels import prepare
from wan_fp4.kernels.sm90.layout import v_layout_args

names = ("q8", "k8", "v8t", "q_scale", "k_scale", "v_scale", "k_mean", "range_stats")
for mode, (b, sq, skv, h, d) in (("direct-p", (1, 1024, 1024, 40, 128)), ("direct-p", (1, 32760, 512, 12, 128)),
                                 ("fp8", (2, 1000, 777, 3, 64)), ("direct-p", (1, 1, 1, 3, 128)),
                                 ("fp8", (1, 2048, 2048, 40, 64)), ("direct-p", (3, 129, 2000, 5, 128))):
    g = torch.Generator(device="cuda").manual_seed(sq + skv)
    q = torch.randn(b, sq, h, d, device="cuda", generator=g).bfloat16()
    k = (torch.randn(b, skv, h, d, device="cuda", generator=g) + 2 * torch.randn(b, 1, h, d, device="cuda", generator=g)).bfloat16()
    v = torch.randn(b, skv, h, d, device="cuda", generator=g).bfloat16()
    layout = v_layout_args(mode)
    want = prepare.prepare_fp8(q, k, v, backend="torch", **layout)
    t0, bad = time.time(), []
    for i in range(30):
        got = prepare._prepare_one_launch(q, k, v, True, **layout)
        bad += [f"{n} (call {i})" for n in names if mismatch(getattr(got, n), getattr(want, n))]
    torch.cuda.synchronize()
    print(mode, (b, sq, skv, h, d), "30 calls == torch path:", "yes" if not bad else "NO " + ", ".join(bad[:8]),
          f"({time.time() - t0:.2f} s)", flush=True)
PY
  echo "smoke rc=$?"
  date -u +%H:%M:%S
  timeout 150 python3 scripts/profile_sm90_device.py floor $P 2>&1 | tee $OUT/floor.txt
  date -u +%H:%M:%S
  # where a short launch's CTAs spend their time: warp samples per SASS line of the kernel at 1,024 tokens
  timeout 150 ncu --section WarpStateStats --section SourceCounters --section LaunchStats --section SpeedOfLight \
    -k regex:'kernel_cutlass' -c 1 -o $OUT/k1024 python3 scripts/profile_sm90_device.py launch $P --shape 1x40x1024x128 \
    > $OUT/ncu_k1024.txt 2>&1; echo "ncu rc=$?"
  ncu --import $OUT/k1024.ncu-rep --page source --print-source sass --csv > $OUT/k1024_sass.csv 2>&1
  ncu --import $OUT/k1024.ncu-rep --page details > $OUT/k1024_details.txt 2>&1
  grep -E "Duration|Warp Cycles Per Issued|Achieved Occupancy" $OUT/k1024_details.txt | head
  ;;
one_launch_variants)
  timeout 200 python3 docs/results/2026-12-05f-h100/one_launch_variants.py 2>&1 | tee $OUT/one_launch_variants.txt
  ;;
short_ncu)
  # the kernel at 1,024 tokens with its operands left in L2 by the pre-pass just before (as in a
  # call), not flushed as ncu does by default; then the pre-pass's two launches, warm
  timeout 150 ncu --cache-control none --section WarpStateStats --section SourceCounters --section LaunchStats \
    --section Occupancy --section SpeedOfLight -k regex:'kernel_cutlass' -c 1 -o $OUT/k1024_warm \
    python3 scripts/profile_sm90_device.py launch $P --shape 1x40x1024x128 > $OUT/ncu_k1024_warm.txt 2>&1; echo "ncu rc=$?"
  ncu --import $OUT/k1024_warm.ncu-rep --page source --print-source sass --csv > $OUT/k1024_warm_sass.csv 2>&1
  ncu --import $OUT/k1024_warm.ncu-rep --page details > $OUT/k1024_warm_details.txt 2>&1
  grep -E "Duration|Warp Cycles Per Issued|Achieved Occupancy" $OUT/k1024_warm_details.txt | head
  cat > /tmp/pre.py <<'PY'
import torch
from wan_fp4.kernels import prepare
from wan_fp4.kernels.sm90.layout import v_layout_args
q, k, v = (torch.randn(1, 1024, 40, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    prepare._prepare_triton(q, k, v, True, **v_layout_args("direct-p"))
torch.cuda.synchronize()
PY
  timeout 150 ncu --cache-control none --section WarpStateStats --section LaunchStats --section Occupancy --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section SourceCounters -k regex:'_quant_kernel|_column_stats_kernel' --launch-skip 4 -c 2 \
    -o $OUT/pre1024 python3 /tmp/pre.py > $OUT/ncu_pre1024.txt 2>&1; echo "ncu rc=$?"
  ncu --import $OUT/pre1024.ncu-rep --page details > $OUT/pre1024_details.txt 2>&1
  grep -E "_kernel|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|DRAM Throughput|Local" $OUT/pre1024_details.txt | head -30
  ;;
stats_sweep)
  timeout 400 python3 docs/results/2026-12-05f-h100/stats_sweep.py 2>&1 | tee $OUT/stats_sweep.txt
  ;;
one_launch_check)
  timeout 280 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check.txt; grep -E "^(FAIL|ERROR)" $OUT/check.txt | head -20
  ;;
esac
date -u +%H:%M:%S
