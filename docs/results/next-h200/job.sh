# The H200 jobs for issue 16, kept in the repo so a fresh checkout still has them. `split`, `bench`
# and `prepass` ran on 2026-12-05 (docs/results/2026-12-05-h200/); `peers_a`, `peers_b` and `sweep`,
# the one run with every peer on the kernels as they stand, the check first, ran the same day
# (docs/results/2026-12-05b-h200/). The short-head pre-pass's job ran on 2026-12-05 (its copy:
# docs/results/2026-12-05d-h200/) and the pre-pass is deleted; `padding`, prepare_fp8 at one token,
# ran the same day and is kept with its results (docs/results/2026-12-05e-h100/). The one-launch
# pre-pass's jobs (measured and not kept), the statistics launch's shape sweep and `short_ncu` ran
# the same day on H100s (docs/results/2026-12-05f-h100/, with those cases). The codes kept in L2
# (prepare.KEEP_CODES_IN_L2) were paired on H100s (docs/results/2026-12-05g-h100/), the pre-pass's
# programmatic dependent launches on an H100 (docs/results/2026-12-05i-h100/); `keep_l2` and `pdl`'s
# pairs ran on an H200 on 2026-12-06 (docs/results/2026-12-06c-h100/h200/; `pdl`'s check script
# calls prepare.stats_chunk, removed since, and was not run). `kernel_pdl` pairs the kernel as the
# quantise launch's programmatic dependent (H100s only, docs/results/2026-12-05j-h100/). Prepare on
# the CPU first:
#   ../shared/gpu/bundle.sh py && ../shared/gpu/bundle.sh dsl
#   scripts/pack_sage2_source.sh /path/to/SageAttention    (commit d1a57a5)
#   python3 scripts/build_prebuilt.py --only sm90 --out .device/sm90 --sm90-config '{"split_tail": true}' --sm90-head-dims 128 64
# FA4 needs the DSL bundle, which with the repo's files exceeds a call's 64 MiB: send it in three
# parts (split -b 20M -d -a 1 --numeric-suffixes=1 .device/dsl.tar.zst .device/dsl.part_0, then
# `bash docs/results/2026-12-04b-h200/dsl_part.sh N 3` for N = 1, 2, 3, carrying that part and
# .device/zstd), back to back, then `peers_a` and `peers_b` (the machine keeps /tmp for 30 s after
# a call while it is held). One device call each (under 10 minutes):
#   bash docs/results/next-h200/job.sh peers_a  carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/sm90", ".device/sage2src"]
#   bash docs/results/next-h200/job.sh peers_b  the same carry
#   bash docs/results/next-h200/job.sh sweep    carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/sm90"]
#   bash docs/results/next-h200/job.sh package (or package_split, or short: trace.py, each launch's start
#     and end in a replayed 1,024-token call; cold.py, what a cold L2 costs the kernel, its codes or its
#     instructions; short.py, the 1,024- and 2,048-token call beside cuDNN BF16 (the three scripts as
#     they ran on the H100, in docs/results/2026-12-06k-h100/); then the floor and the check as the
#     call's time allows (LEFT seconds); prepared 2026-12-06, not yet run on an H200)
#     carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd", "wan_fp4/kernels/prebuilt/sm90a"]
#     (`short` ran on H100s on 2026-12-06: docs/results/2026-12-06k-h100/ and 2026-12-06l-h100/)
#   bash docs/results/next-h200/job.sh quant_rule   the same carry (prepare.quant_launch paired, both modes,
#     D128 and D64; then the check; ran on an H100 on 2026-12-06: docs/results/2026-12-06l-h100/)
#   bash docs/results/next-h200/job.sh in_model   the same carry: the call replayed and after a launch
#     writing Q, K and V, beside cuDNN BF16 (ran on an H100 on 2026-12-06, docs/results/2026-12-06l-h100/)
#   bash docs/results/next-h200/job.sh graph_spans   the same carry: `wan-fp4 bench attention --graph-spans`
#     at 1,024 and 2,048 tokens (both modes, beside cuDNN BF16), then the in-model pieces (ran on an H100
#     on 2026-12-06, docs/results/2026-12-06l-h100/)
#   bash docs/results/next-h200/job.sh short_rule   the same carry: config.length_config as committed (fold 1 up to
#     1,024 tokens for direct-p at D128 and D64 and fp8 at D128) against the defaults and beside cuDNN BF16,
#     replayed and after the writer, then the check (its direct-p D128 cases ran on an H100 on 2026-12-07,
#     docs/results/2026-12-07-h100/; the other modes' cases added after that run)
#     (the folder carries its linked shims, which git ignores; without them no prebuilt kernel loads)
#   (`fold_modes`, fold 1 where the rule did not yet take it, ran on an H100 on 2026-12-07 and was taken;
#     its script and job are in docs/results/2026-12-07-h100/, and short_rule now times those modes)
# (`split`, `bench`, `d64`, `prepass` and `sweep` need only the py bundle and .device/sm90; `dsl`
# unpacks a whole dsl bundle where it fits.)
# Copy this script and $OUT's files to docs/results/<date>-h200/.
set -o pipefail
export PYTHONUNBUFFERED=1
case "$1" in
dsl) source .device/install.sh dsl || exit 4; ls -la /tmp/site/.dsl.done; exit 0 ;;
peers_a|peers_b) ls /tmp/site/.dsl.done || { echo "no dsl on this machine: run job.sh dsl first"; exit 3; }
  source .device/install.sh dsl py || exit 4 ;;
*) source .device/install.sh py || exit 4 ;;
esac
export PYTHONPATH=$PWD:$PYTHONPATH
P="--prebuilt-dir .device/sm90"
SPLIT='{"split_tail": true}'
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
split)
  # a first launch under a time limit (a merge that never came would hang here, not in the check)
  timeout 180 python3 - <<'PY' 2>&1 | tee $OUT/smoke_split.txt
import torch
from wan_fp4 import reference
from wan_fp4.eval.bench_attention import use_prebuilt_dir
from wan_fp4.eval.metrics import rel_l2
from wan_fp4.kernels import prepare, sm90
from wan_fp4.kernels.sm90.layout import v_layout_args
from wan_fp4.kernels.sm90.split import plan, row_segments

use_prebuilt_dir(".device/sm90")
for mode, (b, s, h, d) in (("direct-p", (2, 1000, 3, 128)), ("fp8", (2, 1000, 3, 128)), ("fp8", (1, 4097, 12, 128))):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ops = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
    outs = [sm90.launch(ops, mode, d, config=c, prebuilt=True)[0].clone() for c in ({}, {"split_tail": True})]
    torch.cuda.synchronize()
    cl = sm90.default_config(mode, d)["cluster"]
    ref = reference.attention(q, k, v, mode, segments=row_segments(b, h, s, s, cl, device="cuda"))
    print(mode, (b, s, h, d), plan(b, h, s, s, cl), "split vs its reference", f"{rel_l2(outs[1], ref):.3e}",
          "split vs plain", f"{rel_l2(outs[1], outs[0]):.3e}", "nan", int(outs[1].isnan().sum()), flush=True)
PY
  echo "smoke rc=$?"
  date -u +%H:%M:%S
  # correct first (every awkward shape; the plan splits most of them, with 1 to 11 segments)
  timeout 300 python3 -m wan_fp4.cli check --kernels sm90-cute --configs "[$SPLIT]" $P > $OUT/check_split.txt 2>&1
  echo "check rc=$?"; tail -1 $OUT/check_split.txt; grep -E "^(FAIL|ERROR)" $OUT/check_split.txt | head -20
  date -u +%H:%M:%S
  # the kernel alone, paired with the default in rounds: fp8's short target (H12 S32760 splits its
  # last 36 tiles in thirds; H40 S32760 is not split: the plain kernel, a control)
  for mode in fp8 direct-p; do
    timeout 150 python3 scripts/profile_sm90_device.py pairs --mode $mode --configs "$SPLIT" --rounds 6 $P 2>&1 | tee $OUT/pairs_split_$mode.txt | grep -E "rel L2|median"
    date -u +%H:%M:%S
  done
  # short lengths (1,024 tokens: the last 56 of 320 tiles in halves)
  timeout 100 python3 scripts/profile_sm90_device.py short --configs "$SPLIT" $P 2>&1 | tee $OUT/short_split.txt
  ;;
bench)
  # the split beside the defaults at the Wan shapes (and D64), with the peers the py bundle runs
  # (FA4 needs the DSL bundle, SageAttention 2 a build: not here), twice; then paired at S75600
  # and at D64
  # (fp8's D128 default splits since 2026-12-05: '{"split_tail": false}' is its plain kernel; a
  # config equal to a mode's default is not timed twice)
  for r in 1 2; do
    timeout 200 python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 \
      --modes direct-p fp8 --kernels sm90-cute --sm90-configs "$SPLIT" '{"split_tail": false}' --peers sdpa-cudnn cudnn-fp8-kernel \
      --rep-ms 800 $P --json $OUT/bench_split_$r.json 2>&1 | tee $OUT/bench_split_$r.txt | grep -v '^ *$' | tail -24
    date -u +%H:%M:%S
  done
  timeout 120 python3 scripts/profile_sm90_device.py pairs --mode fp8 --configs '{"split_tail": false}' --rounds 4 \
    --shapes 1x40x75600x128 1x12x32760x64 $P 2>&1 | tee $OUT/pairs_split75600_fp8.txt | grep -E "rel L2|median"
  timeout 120 python3 scripts/profile_sm90_device.py pairs --mode direct-p --configs "$SPLIT" --rounds 4 \
    --shapes 1x40x75600x128 1x12x32760x64 $P 2>&1 | tee $OUT/pairs_split75600_direct-p.txt | grep -E "rel L2|median"
  ;;
d64)
  timeout 150 python3 scripts/profile_sm90_device.py pairs --mode fp8 --configs "$SPLIT" --rounds 6 \
    --shapes 1x12x32760x64 1x40x32760x64 1x40x75600x64 $P 2>&1 | tee $OUT/pairs_split_fp8_d64.txt | grep -E "rel L2|median"
  ;;
prepass)
  python3 scripts/profile_sm90_device.py floor $P 2>&1 | tee $OUT/floor.txt
  date -u +%H:%M:%S
  python3 scripts/profile_sm90_device.py overlap --shapes 1x12x32760x128 1x40x32760x128 1x40x7680x128 $P 2>&1 | tee $OUT/overlap.txt
  date -u +%H:%M:%S
  python3 scripts/profile_sm90_device.py prepass $P 2>&1 | tee $OUT/prepass.txt
  ;;
peers_a)
  # SageAttention 2 builds on the CPU cores while the check runs on the GPU
  rm -rf /tmp/sage2 && cp -r .device/sage2src /tmp/sage2 && (cd /tmp/sage2 && TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=14 python3 setup.py build_ext --inplace > $OUT/sage2_build.log 2>&1; echo "sage2 build rc=$? at $(date -u +%H:%M:%S)" >> $OUT/sage2_build.log) &
  build=$!
  python3 -c "
import torch, triton, cudnn, flash_attn, cutlass
print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version(), 'cudnn-frontend', cudnn.__version__)
print('cutlass-dsl', getattr(cutlass, '__version__', '?'))" 2>&1 | tee $OUT/imports.txt
  timeout 300 python3 -m wan_fp4.cli check --kernels triton,sm90-cute $P > $OUT/check.txt 2>&1; echo "check rc=$?"; tail -1 $OUT/check.txt
  grep -E "^(FAIL|ERROR)" $OUT/check.txt | head -20
  date -u +%H:%M:%S
  wait $build; tail -1 $OUT/sage2_build.log
  export PYTHONPATH=/tmp/sage2:$PYTHONPATH
  timeout 240 python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 \
    --modes direct-p fp8 --kernels sm90-cute --peers fa4 sdpa-cudnn cudnn-fp8-kernel sage2 --rep-ms 800 $P \
    --json $OUT/bench.json 2>&1 | tee $OUT/bench.txt | grep -v '^ *$' | tail -26
  ;;
peers_b)
  export PYTHONPATH=/tmp/sage2:$PYTHONPATH
  ls /tmp/sage2/sageattention/*.so | head -3
  timeout 200 python3 -m wan_fp4.cli bench attention --length-sweep --modes direct-p fp8 --kernels sm90-cute \
    --peers fa4 sdpa-cudnn cudnn-fp8-kernel sage2 --breakdown --rep-ms 400 $P --json $OUT/sweep.json 2>&1 \
    | tee $OUT/sweep.txt | grep -v '^ *$' | tail -12
  date -u +%H:%M:%S
  timeout 60 python3 scripts/profile_sm90_device.py floor $P 2>&1 | tee $OUT/floor.txt
  date -u +%H:%M:%S
  timeout 120 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis -k regex:'kernel_cutlass|nvjet' -c 2 \
    python3 scripts/profile_sm90_device.py launch $P --shape 1x40x75600x128 > $OUT/ncu_75600.txt 2>&1; echo "ncu rc=$?"
  grep -E 'kernel_cutlass|nvjet|Duration|SM Frequency|Issue Slots Busy|Tensor|dominated' $OUT/ncu_75600.txt | head -20
  date -u +%H:%M:%S
  timeout 150 python3 scripts/profile_sm90_device.py pairs --mode fp8 --configs "$SPLIT" --rounds 6 \
    --shapes 1x12x32760x64 1x40x32760x64 1x40x75600x64 $P 2>&1 | tee $OUT/pairs_split_fp8_d64.txt | grep -E "rel L2|median"
  ;;
short_ncu)
  # the package's prebuilt kernels (unpack .device/shims.tar.zst into wan_fp4/kernels/prebuilt/sm90a
  # first; carry it with the py bundle): last run 2026-12-05, docs/results/2026-12-05f-h100/
  P=""
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
keep_l2)
  # the codes kept in L2 against the same calls with the rule off, paired, on the H200
  timeout 400 python3 docs/results/2026-12-05g-h100/keep_pairs.py $P 2>&1 | tee $OUT/keep_pairs.txt
  ;;
pdl)
  # the pre-pass's launches as programmatic dependents (prepare.PDL_PREPASS), checked and paired
  # on the H200 (measured on an H100 only); the package's own kernels (carry .device/shims.tar.zst)
  .device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
  timeout 150 python3 docs/results/2026-12-05i-h100/pdl_check.py 2>&1 | tee $OUT/pdl_check.txt
  timeout 240 python3 docs/results/2026-12-05i-h100/pdl_pairs.py 2>&1 | grep -v "skipped inside" | tee $OUT/pdl_pairs.txt
  ;;
kernel_pdl)
  # the attention kernel as the quantise launch's programmatic dependent (kernel option pdl),
  # checked and paired on the H200 (measured on H100s only, docs/results/2026-12-05j-h100/); build
  # .device/sm90_pair.tar.zst as that folder's job.sh says and carry it with .device/shims.tar.zst
  .device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
  .device/zstd -q -d -c .device/sm90_pair.tar.zst | tar -C .device -xf - || exit 4
  timeout 150 python3 docs/results/2026-12-05j-h100/kernel_pdl.py check 2>&1 | grep -v "skipped inside" | tee $OUT/kernel_pdl_check.txt
  ORDER=alternate LSE=0 ROUNDS=4 timeout 360 python3 docs/results/2026-12-05j-h100/kernel_pdl.py pairs 2>&1 \
    | grep -v "skipped inside" | tee $OUT/kernel_pdl_pairs.txt
  ;;
sweep)
  # the length sweep against the two peers its targets name, with room to finish (peers_b's sweep
  # with FA4 and SageAttention 2 as well ran past its 200 s at the last length)
  timeout 450 python3 -m wan_fp4.cli bench attention --length-sweep --modes direct-p fp8 --kernels sm90-cute \
    --peers sdpa-cudnn cudnn-fp8-kernel --breakdown --rep-ms 400 $P --json $OUT/sweep.json 2>&1 \
    | tee $OUT/sweep.txt | grep -v '^ *$' | tail -14
  ;;
package)
  # the package's own prebuilt kernels (no --prebuilt-dir), as a user install runs them
  timeout 300 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
  ;;
short)
  # the 1,024-token call as it runs now, the package's own kernels: each launch's start and end in a
  # replayed call (torch.profiler), what a cold L2 costs the kernel (its codes or its instructions),
  # the call beside cuDNN BF16 alternated from graphs (issue 16's target), the call's pieces (floor),
  # then the package's check
  timeout 90 python3 docs/results/2026-12-06k-h100/trace.py 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" | tee $OUT/trace.txt
  timeout 90 python3 docs/results/2026-12-06k-h100/cold.py 2>&1 | grep -v "skipped inside" | tee $OUT/cold.txt
  ROUNDS=4 timeout 120 python3 docs/results/2026-12-06k-h100/short.py 2>&1 | grep -v "skipped inside" | tee $OUT/short.txt
  # what time the call has left (LEFT seconds, default 560): the floor, then the check
  [ $SECONDS -lt $((${LEFT:-560} - 140)) ] && timeout 130 python3 scripts/profile_sm90_device.py floor 2>&1 \
    | grep -v "skipped inside" | tee $OUT/floor.txt
  if [ $SECONDS -lt $((${LEFT:-560} - 130)) ]; then
    timeout 120 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
    tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
  fi
  ;;
quant_rule)
  # prepare.quant_launch (eight warps at 80 registers for short launches at D128) against four warps
  # everywhere, on the package's call: D128 and D64, both modes; then the same with the rule at D64
  ROUNDS=4 timeout 150 python3 docs/results/2026-12-06l-h100/quant_rule.py 2>&1 | grep -v "skipped inside" | tee $OUT/quant_rule.txt
  QUANT_D64=1 ROUNDS=4 timeout 120 python3 docs/results/2026-12-06l-h100/quant_rule.py 2>&1 | grep -v "skipped inside" \
    | tee $OUT/quant_rule_d64.txt
  timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
  ;;
package_split)
  # the package's own split kernels on shapes their plan splits (the check's D64 case does not split)
  timeout 200 python3 - <<'PY' 2>&1 | tee $OUT/package_split.txt
import torch
from wan_fp4 import reference
from wan_fp4.eval.metrics import rel_l2
from wan_fp4.kernels import prepare, sm90
from wan_fp4.kernels.sm90.layout import v_layout_args
from wan_fp4.kernels.sm90.split import plan, row_segments

for mode, (b, s, h, d) in (("fp8", (1, 8200, 3, 64)), ("fp8", (2, 9000, 1, 64)), ("fp8", (1, 8200, 3, 128))):
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ops = prepare.prepare_fp8(q, k, v, **v_layout_args(mode))
    out = sm90.launch(ops, mode, d, prebuilt=True)[0].clone()
    torch.cuda.synchronize()
    cl = sm90.default_config(mode, d)["cluster"]
    p = plan(b, h, s, s, cl)
    ref = reference.attention(q, k, v, mode, segments=row_segments(b, h, s, s, cl, device="cuda"))
    exact = reference.attention(q, k, v, "bf16")
    print(mode, (b, s, h, d), p, "vs its reference", f"{rel_l2(out, ref):.3e}", "vs exact", f"{rel_l2(out, exact):.4f}",
          "reference vs exact", f"{rel_l2(ref, exact):.4f}", "nan", int(out.isnan().sum()), flush=True)
PY
  ;;
in_model)
  # the 1,024-token call with Q, K and V just written by a launch before it (as in a model) and
  # replayed on the same inputs (the target's reading), beside cuDNN BF16 in both conditions
  ROUNDS=4 timeout 300 python3 docs/results/2026-12-06l-h100/in_model.py 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" \
    | tee $OUT/in_model.txt
  ;;
graph_spans)
  # `wan-fp4 bench attention --graph-spans` at the short lengths: each call's span from a CUDA graph,
  # replayed and with its inputs just written, ours beside cuDNN BF16; then in_model's pieces
  timeout 240 python3 -m wan_fp4.cli bench attention --shapes 1x40x1024x128 1x12x1024x128 1x40x2048x128 \
    --modes direct-p fp8 --kernels sm90-cute --peers sdpa-cudnn --graph-spans --rep-ms 300 \
    --json $OUT/graph_spans.json 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" | tee $OUT/graph_spans.txt
  ROUNDS=3 timeout 200 python3 docs/results/2026-12-06l-h100/in_model_pieces.py 2>&1 \
    | grep -v -E "skipped inside|UserWarning|_warn_once" | tee $OUT/in_model_pieces.txt
  ;;
short_rule)
  ROUNDS=4 timeout 240 python3 docs/results/next-h200/short_rule.py 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" \
    | tee $OUT/short_rule.txt
  timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
  ;;
*)
  echo "usage: job.sh dsl|peers_a|peers_b|split|bench|d64|prepass|short_ncu|keep_l2|pdl|kernel_pdl|sweep|package|short|quant_rule|package_split|in_model|graph_spans|short_rule"; exit 2
  ;;
esac
date -u +%H:%M:%S
