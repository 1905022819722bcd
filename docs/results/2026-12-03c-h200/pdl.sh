set -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
python3 -c "import torch, triton, cudnn; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version(), 'cudnn-frontend', cudnn.__version__)" | tee -a $OUT/gpu.txt
date -u +%H:%M:%S
timeout 330 python3 .device/jobs/pdl_tune.py 2>&1 | tee $OUT/pdl_tune.txt | grep -v Warning
date -u +%H:%M:%S
timeout 200 python3 -m wan_fp4.cli bench attention --length-sweep --modes direct-p --kernels sm90-cute --peers sdpa-cudnn cudnn-fp8-kernel --breakdown --rep-ms 300 --prebuilt-dir .device/sm90 --json $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo sweep rc=$?
grep -v "^ *$" $OUT/sweep.txt | grep "per call\|cudnn-fp8-kernel\|sdpa" | cut -c1-220
date -u +%H:%M:%S
