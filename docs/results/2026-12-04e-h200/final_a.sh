set -o pipefail
export PYTHONUNBUFFERED=1
ls /tmp/site/.dsl.done || { echo "no dsl on this machine"; exit 3; }
source .device/install.sh dsl py || exit 4
date -u +%H:%M:%S
# SageAttention 2 builds on the CPU cores while the check runs on the GPU
cp -r .device/sage2src /tmp/sage2 && (cd /tmp/sage2 && TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=14 python3 setup.py build_ext --inplace > $OUT/sage2_build.log 2>&1; echo "sage2 build rc=$? at $(date -u +%H:%M:%S)" >> $OUT/sage2_build.log) &
build=$!
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
python3 -c "
import torch, triton, cudnn, flash_attn, cutlass
print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version(), 'cudnn-frontend', cudnn.__version__)
print('cutlass-dsl', getattr(cutlass, '__version__', '?'))" 2>&1 | tee $OUT/imports.txt
date -u +%H:%M:%S
python3 -m wan_fp4.cli check --kernels triton,sm90-cute --prebuilt-dir .device/sm90 > $OUT/check.txt 2>&1; echo "check rc=$?"; tail -3 $OUT/check.txt
wait $build; tail -1 $OUT/sage2_build.log
export PYTHONPATH=/tmp/sage2:$PYTHONPATH
date -u +%H:%M:%S
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 --modes direct-p fp8 --kernels sm90-cute --peers fa4 sdpa-cudnn cudnn-fp8-kernel sage2 --rep-ms 800 --prebuilt-dir .device/sm90 --json $OUT/bench.json 2>&1 | tee $OUT/bench.txt | grep -v '^ *$' | tail -26
date -u +%H:%M:%S
