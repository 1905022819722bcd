# The device jobs for issue 16 still pending on an H200 (all ran on an H100 on 2026-12-07:
# docs/results/2026-12-07b-h100/ to 2026-12-07r-h100/), kept in the repo so a fresh checkout has
# them. Jobs that ran are copied, as they ran, into their results folders
# (docs/results/<date>-<device>/job.sh); the git history has every earlier version of this file.
# One device call each (under 10 minutes).
#
# The package's own kernels (no JIT): carry [".device/py.tar.zst", ".device/install.sh",
# ".device/zstd", "wan_fp4/kernels/prebuilt/sm90a"] (the folder carries its linked shims, which git
# ignores; without them no prebuilt kernel loads). With 26 prebuilt kernels the carry and the tree
# pass a call's 64 MiB: move wan_fp4/pipelines/weights/tiny (22 MB) out of the tree for the call:
#   short_rule   config.length_config as committed (fold 1 up to 1,024 tokens for direct-p at D128
#                and D64 and fp8 at D128; direct-p D128's persistent grid up to 4,096) against the
#                defaults and beside cuDNN BF16, replayed and after a launch writing the inputs
#                (short_rule.py), then `wan-fp4 check --kernels sm90-cute`, whose plain cases reach
#                the short and the persistent kernels at the awkward shapes
#   graph_spans  `wan-fp4 bench attention --graph-spans` at 1,024 and 2,048 tokens beside cuDNN BF16,
#                then the in-model pieces (docs/results/2026-12-06l-h100/in_model_pieces.py)
#   in_model     the 1,024-token call replayed and after the writer (2026-12-06l-h100/in_model.py)
#   l2_traffic   ncu's DRAM bytes and L2 hit rate per launch of the 1,024-token call and of cuDNN
#                BF16, replayed and after the writer, the caches as the calls leave them (l2_traffic.py);
#                `l2_traffic range`: per call, its launches profiled together as one range
#   q_bound      the call with Q's blocks left out of the quantise launch (Q's codes from a pre-pass
#                before timing): what Q quantised in the kernel could save at most (q_bound.py)
#   read_speed   the statistics launch's read of K and V from DRAM against plain reads of the same
#                bytes (torch's reductions, a Triton read) after an L2 flush (read_speed.py)
#   prepass_ncu  the replayed 1,024-token call's statistics and quantise launches under ncu --set full
#                (the report, its details page and its SASS source counters)
#   persistent_rule  the persistent kernel (docs/SM90_GEN2.md items 68, 70 and 73; the package's rule up
#                to 4,096 tokens) against one unit a CTA where the rule does not reach: 8,192 and 32,760
#                tokens and the text cross-attention, with 1,024 and 2,048 again (persistent_rule.py),
#                bits first; the package's carry (its prebuilt kernels include the persistent ones)
#   block_stats  the pre-pass item 72 asks the contract for (no statistics launch; K less its first
#                128 keys' mean, V per 128-key block and channel), the kernel not applying V's block
#                scales (wrong numbers, the time only), beside the package, the kernel alone and cuDNN
#                BF16, with the persistent kernel (the rule's) and one unit a CTA, then with K's own
#                block means (block_stats.py); the package's carry
#
# The one run with every peer (issue 16's table: FA4 BF16, cuDNN BF16 and FP8, SageAttention 2,
# the cuBLAS FP8 GEMM), on one machine, back to back (it keeps /tmp for 30 s after a call):
#   prepare on the CPU:  ../shared/gpu/bundle.sh py && ../shared/gpu/bundle.sh dsl
#                        split -b 20M -d -a 1 --numeric-suffixes=1 .device/dsl.tar.zst .device/dsl.part_0
#                        scripts/pack_sage2_source.sh /path/to/SageAttention   (commit d1a57a5)
#   dsl_part N   for N = 1, 2, 3, carrying .device/dsl.part_0N and .device/zstd (the DSL bundle and the
#                repo exceed a call's 64 MiB together); the third unpacks it into /tmp/site
#   peers_a      the check (Triton and sm90, prebuilt against JIT), then the Wan shapes beside every
#                peer and the GEMM; SageAttention 2 builds meanwhile. Carry the package's carry above
#                and ".device/sage2src"
#   peers_b      the length sweep beside every peer (--breakdown), then ncu at H40 S75600; same carry
#   check_jit    after dsl_part 1-3: the sm90 check with the DSL there, so that prebuilt == JIT runs for
#                the defaults' and the short kernels; the package's carry
# Copy this script and $OUT's files to docs/results/<date>-<device>/.
set -o pipefail
export PYTHONUNBUFFERED=1
case "$1" in
dsl_part)
  mkdir -p /tmp/parts && cp .device/dsl.part_0$2 /tmp/parts/ && ls -l /tmp/parts || exit 4
  if [ "$2" = 3 ]; then
    mkdir -p /tmp/site && cat /tmp/parts/dsl.part_* | .device/zstd -q -d --long=28 | tar -C /tmp/site -xf - \
      && touch /tmp/site/.dsl.done && rm -rf /tmp/parts && echo "dsl unpacked"
  fi
  exit 0 ;;
peers_a|peers_b|check_jit) ls /tmp/site/.dsl.done || { echo "no dsl on this machine: run job.sh dsl_part 1..3 first"; exit 3; }
  source .device/install.sh dsl py || exit 4 ;;
*) source .device/install.sh py || exit 4 ;;
esac
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
peers_a)
  # SageAttention 2 builds on the CPU cores while the check runs on the GPU
  rm -rf /tmp/sage2 && cp -r .device/sage2src /tmp/sage2 && (cd /tmp/sage2 && TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=14 \
    python3 setup.py build_ext --inplace > $OUT/sage2_build.log 2>&1; echo "sage2 build rc=$? at $(date -u +%H:%M:%S)" >> $OUT/sage2_build.log) &
  build=$!
  python3 -c "
import torch, triton, cudnn, flash_attn, cutlass
print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version(), 'cudnn-frontend', cudnn.__version__)
print('cutlass-dsl', getattr(cutlass, '__version__', '?'))" 2>&1 | tee $OUT/imports.txt
  timeout 300 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check.txt 2>&1; echo "check rc=$?"; tail -1 $OUT/check.txt
  grep -E "^(FAIL|ERROR)" $OUT/check.txt | head -20
  date -u +%H:%M:%S
  wait $build; tail -1 $OUT/sage2_build.log
  export PYTHONPATH=/tmp/sage2:$PYTHONPATH
  timeout 200 python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 \
    --modes direct-p fp8 --kernels sm90-cute --peers fa4 sdpa-cudnn cudnn-fp8-kernel sage2 --rep-ms 800 \
    --json $OUT/bench.json 2>&1 | tee $OUT/bench.txt | grep -v '^ *$' | tail -26
  ;;
check_jit)
  # the check with the DSL installed, so that prebuilt == JIT runs (the defaults' and the short kernels)
  timeout 300 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_jit.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_jit.txt; grep -E "^(FAIL|ERROR)|JIT|length=" $OUT/check_jit.txt | head -40
  ;;
peers_b)
  export PYTHONPATH=/tmp/sage2:$PYTHONPATH
  ls /tmp/sage2/sageattention/*.so | head -3
  timeout 420 python3 -m wan_fp4.cli bench attention --length-sweep --modes direct-p fp8 --kernels sm90-cute \
    --peers fa4 sdpa-cudnn cudnn-fp8-kernel sage2 --breakdown --rep-ms 300 --json $OUT/sweep.json 2>&1 \
    | tee $OUT/sweep.txt | grep -v '^ *$' | tail -14
  date -u +%H:%M:%S
  timeout 110 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis -k regex:'kernel_cutlass|nvjet' -c 2 \
    python3 scripts/profile_sm90_device.py launch --shape 1x40x75600x128 > $OUT/ncu_75600.txt 2>&1; echo "ncu rc=$?"
  grep -E 'kernel_cutlass|nvjet|Duration|SM Frequency|Issue Slots Busy|Tensor|dominated' $OUT/ncu_75600.txt | head -20
  ;;
short_rule)
  ROUNDS=4 timeout 240 python3 docs/results/next-h200/short_rule.py 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" \
    | tee $OUT/short_rule.txt
  timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_package.txt 2>&1; echo "check rc=$?"
  tail -1 $OUT/check_package.txt; grep -E "^(FAIL|ERROR)" $OUT/check_package.txt | head -20
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
q_bound)
  ROUNDS=3 timeout 300 python3 docs/results/next-h200/q_bound.py 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" \
    | tee $OUT/q_bound.txt
  ;;
read_speed)
  ROUNDS=3 timeout 240 python3 docs/results/next-h200/read_speed.py 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" \
    | tee $OUT/read_speed.txt
  ;;
prepass_ncu)
  # the pre-pass's launches of the replayed 1,024-token call under ncu's full set (stalls, memory
  # charts, source counters): what holds the statistics and the quantise launch short of a cast
  timeout 300 ncu --set full --cache-control none --clock-control none --nvtx --nvtx-include "measured/" \
    -k regex:'_column_stats|_quant' -c 2 -o $OUT/prepass python3 docs/results/next-h200/l2_traffic.py package replayed \
    > $OUT/prepass_ncu.log 2>&1; echo "ncu rc=$?"; tail -3 $OUT/prepass_ncu.log
  ncu --import $OUT/prepass.ncu-rep --page details > $OUT/prepass_details.txt 2>&1
  ncu --import $OUT/prepass.ncu-rep --page source --csv --print-source sass > $OUT/prepass_source.csv 2>&1
  ls -la $OUT; grep -E "^  [a-z_]+|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|One or More Eligible" $OUT/prepass_details.txt | head -60
  ;;
l2_traffic)
  # per launch (ncu's default), or with `range` each call's launches as one range (--replay-mode
  # app-range: the application run again per pass, as CUDA graphs need), so that the counters see
  # the L2 as the call's launches leave it for each other
  replay=""; [ "$2" = range ] && replay="--replay-mode app-range"
  for call in package cudnn; do for cond in replayed written; do
    timeout 100 ncu $replay --cache-control none --clock-control none --nvtx --nvtx-include "measured/" --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
      python3 docs/results/next-h200/l2_traffic.py $call $cond > $OUT/l2_traffic${2:+_$2}_${call}_${cond}.csv 2>&1
    echo "$call $cond rc=$?"; grep -E '^"[0-9]' $OUT/l2_traffic${2:+_$2}_${call}_${cond}.csv \
      | awk -F'","' '{n=$(NF-10); sub(/\(.*/, "", n); v=$NF; gsub(/"/, "", v); printf "  %-28.28s %-32s %s %s\n", n, $(NF-2), $(NF-1), v}'
  done; done
  ;;
in_model)
  # the 1,024-token call with Q, K and V just written by a launch before it (as in a model) and
  # replayed on the same inputs (the target's reading), beside cuDNN BF16 in both conditions
  ROUNDS=4 timeout 300 python3 docs/results/2026-12-06l-h100/in_model.py 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" \
    | tee $OUT/in_model.txt
  ;;
block_stats)
  # item 72's pre-pass timed (block_stats.py): K less its first block's mean, V per block and channel,
  # the kernel not applying V's block scales (wrong numbers, the time only); then K's own block means
  # (OWN=1, the twentieth run's); each with the persistent kernel (the rule's) and one unit a CTA
  for own in 0 1; do for extra in '{}' '{"persistent": 0}'; do
    echo "OWN=$own EXTRA=$extra"
    OWN=$own EXTRA="$extra" ROUNDS=3 timeout 150 python3 docs/results/next-h200/block_stats.py 2>&1 \
      | grep -v -E "skipped inside|UserWarning|_warn_once" | tee -a $OUT/block_stats.txt
  done; done
  ;;
persistent_rule)
  # where the persistent kernel gains past its rule's lengths (persistent_rule.py)
  ROUNDS=3 timeout 330 python3 docs/results/next-h200/persistent_rule.py 2>&1 | grep -v -E "skipped inside|UserWarning|_warn_once" \
    | tee $OUT/persistent_rule.txt
  ;;
*)
  echo "usage: job.sh dsl_part N|peers_a|peers_b|check_jit|short_rule|graph_spans|in_model|l2_traffic|prepass_ncu|q_bound|read_speed|persistent_rule|block_stats"; exit 2
  ;;
esac
date -u +%H:%M:%S
