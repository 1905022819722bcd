# 2026-12-06: the pre-pass's loads issued earlier (prepass_loads.py: prepare.STATS_AHEAD and
# prepare.QUANT_ROWS_FIRST), paired against the plain launches; run with prepass_loads.diff applied to
# 1daed27 (BENCHMARKS.md, 2026-12-06; later commits have the rows first as the only path). Carry
# [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst"]:
#   bash docs/results/2026-12-06a-h100/job.sh short
set -o pipefail
export PYTHONUNBUFFERED=1
D=docs/results/2026-12-06a-h100
[ "$1" = stats_ncu ] || grep -q QUANT_ROWS_FIRST wan_fp4/kernels/prepare.py || { echo "apply $D/prepass_loads.diff first"; exit 2; }
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
short)
  ROUNDS=3 timeout 280 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/short.txt ;;
min)
  SET=min ROUNDS=3 timeout 150 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/min.txt ;;
rows)
  VARIANTS=plain,rows ROUNDS=3 timeout 200 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/rows_short.txt
  VARIANTS=plain,rows SET=long ROUNDS=2 timeout 200 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/rows_long.txt ;;
stats_ncu)
  # what bounds the statistics launch at 1,024 tokens (warm, as in a call): pipes, stalls, issue
  cat > /tmp/pre.py <<'PY'
import torch
from wan_fp4.kernels import prepare
from wan_fp4.kernels.sm90.layout import v_layout_args
q, k, v = (torch.randn(1, 1024, 40, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    prepare._prepare_triton(q, k, v, True, **v_layout_args("direct-p"))
torch.cuda.synchronize()
PY
  timeout 200 ncu --cache-control none --section WarpStateStats --section LaunchStats --section Occupancy \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section SourceCounters -k regex:'_column_stats_kernel' --launch-skip 2 -c 1 \
    -o $OUT/stats1024 python3 /tmp/pre.py > $OUT/ncu_stats1024.txt 2>&1; echo "ncu rc=$?"
  ncu --import $OUT/stats1024.ncu-rep --page details > $OUT/stats1024_details.txt 2>&1
  ncu --import $OUT/stats1024.ncu-rep --page source --print-source sass --csv > $OUT/stats1024_sass.csv 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc|No Eligible|Active Warps Per Scheduler|Eligible Warps" $OUT/stats1024_details.txt | head -20
  ;;
long)
  SET=long ROUNDS=2 timeout 250 python3 $D/prepass_loads.py 2>&1 | grep -v "skipped inside" | tee $OUT/long.txt ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
