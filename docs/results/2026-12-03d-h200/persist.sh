set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD/.device/persist:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
python3 -c "import torch, triton, cudnn, wan_fp4; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version(), 'cudnn-frontend', cudnn.__version__, wan_fp4.__file__)" | tee -a $OUT/gpu.txt
date -u +%H:%M:%S
timeout 200 python3 -m wan_fp4.cli check --kernels sm90-cute --configs '[{"persistent": true}]' --prebuilt-dir .device/sm90p > $OUT/check_persistent.txt 2>&1; echo "check rc=$?"; tail -3 $OUT/check_persistent.txt
date -u +%H:%M:%S
timeout 300 python3 .device/jobs/persist_tune.py 2>&1 | tee $OUT/persist_tune.txt | grep -v Warning
date -u +%H:%M:%S
