# The H100 beside every peer (BENCHMARKS.md, "2026-12-05, eighth run"): the tables the H200 runs give,
# measured on an H100, where users also run, with the package's own prebuilt kernels.
# Carry, per call:
#   part N (N = 1, 2, 3, back to back): [".device/dsl.part_0N", ".device/zstd"]
#     bash docs/results/2026-12-05h-h100/job.sh part N
#   peers_a, peers_b: [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/shims.tar.zst",
#     ".device/sage2src"]
#     bash docs/results/2026-12-05h-h100/job.sh peers_a | peers_b | e2e | e2e13
# (the machine keeps /tmp for 30 s after a call while it is held: the DSL, then SageAttention 2's build)
set -o pipefail
export PYTHONUNBUFFERED=1
if [ "$1" = part ]; then bash docs/results/2026-12-04b-h200/dsl_part.sh "$2" 3; exit $?; fi
ls /tmp/site/.dsl.done || { echo "no dsl on this machine: run the three parts first"; exit 3; }
.device/zstd -q -d -c .device/shims.tar.zst | tar -C wan_fp4/kernels/prebuilt/sm90a -xf - || exit 4
source .device/install.sh dsl py || exit 4
export PYTHONPATH=$PWD:/tmp/sage2:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu_$1.txt
date -u +%H:%M:%S
case "$1" in
peers_a)
  # SageAttention 2 builds on the CPU cores while the check runs on the GPU
  rm -rf /tmp/sage2 && cp -r .device/sage2src /tmp/sage2 && (cd /tmp/sage2 && TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=14 python3 setup.py build_ext --inplace > $OUT/sage2_build.log 2>&1; echo "sage2 build rc=$? at $(date -u +%H:%M:%S)" >> $OUT/sage2_build.log) &
  build=$!
  python3 -c "
import torch, triton, cudnn, flash_attn, cutlass
print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version(), 'cudnn-frontend', cudnn.__version__)
print('cutlass-dsl', getattr(cutlass, '__version__', '?'))" 2>&1 | tee $OUT/imports.txt
  timeout 240 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check.txt 2>&1; echo "check rc=$?"; tail -1 $OUT/check.txt
  grep -E "^(FAIL|ERROR)" $OUT/check.txt | head -20
  date -u +%H:%M:%S
  wait $build; tail -1 $OUT/sage2_build.log
  timeout 270 python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 \
    --modes direct-p fp8 --kernels sm90-cute --peers fa4 sdpa-cudnn cudnn-fp8-kernel sage2 --rep-ms 800 \
    --json $OUT/bench.json 2>&1 | tee $OUT/bench.txt | grep -v '^ *$' | tail -26
  ;;
peers_b)
  ls /tmp/sage2/sageattention/*.so | head -3
  timeout 360 python3 -m wan_fp4.cli bench attention --length-sweep --modes direct-p fp8 --kernels sm90-cute \
    --peers fa4 sdpa-cudnn cudnn-fp8-kernel sage2 --breakdown --rep-ms 400 --json $OUT/sweep.json 2>&1 \
    | tee $OUT/sweep.txt | grep -v '^ *$' | tail -14
  date -u +%H:%M:%S
  timeout 150 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis -k regex:'kernel_cutlass|nvjet' -c 2 \
    python3 scripts/profile_sm90_device.py launch --shape 1x40x75600x128 > $OUT/ncu_75600.txt 2>&1; echo "ncu rc=$?"
  grep -E 'kernel_cutlass|nvjet|Duration|SM Frequency|Issue Slots Busy|Tensor|dominated' $OUT/ncu_75600.txt | head -20
  ;;
e2e)
  # one 14B 720p x 81 forward, stock against direct-p, eager and compiled by blocks (random weights)
  timeout 560 python3 scripts/bench_e2e.py --model random:14b --height 720 --width 1280 --frames 81 \
    --modes bf16-sdpa,direct-p --compile --compile-scope blocks --repeats 1 --budget-s 400 \
    --json $OUT/e2e_14b.json 2>&1 | tee $OUT/e2e_14b.log | grep -v '^ *$' | tail -30
  ;;
e2e13)
  # the same for one 1.3B 480p x 81 forward
  timeout 560 python3 scripts/bench_e2e.py --model random:1.3b --height 480 --width 832 --frames 81 \
    --modes bf16-sdpa,direct-p --compile --compile-scope blocks --repeats 3 --budget-s 400 \
    --json $OUT/e2e_13b.json 2>&1 | tee $OUT/e2e_13b.log | grep -v '^ *$' | tail -30
  ;;
*) echo "unknown case $1"; exit 2 ;;
esac
date -u +%H:%M:%S
