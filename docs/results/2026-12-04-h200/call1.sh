set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
cp .device/sm90_new/*.so wan_fp4/kernels/prebuilt/sm90a/
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
python3 -c "import torch, triton, cudnn; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version(), 'cudnn-frontend', cudnn.__version__)" | tee -a $OUT/gpu.txt
date -u +%H:%M:%S
timeout 200 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check.txt 2>&1; echo "check rc=$?"; grep -c "^ok" $OUT/check.txt; grep -v "^ok\|^info" $OUT/check.txt | tail -5
date -u +%H:%M:%S
timeout 360 python3 docs/results/2026-12-04-h200/epilogue_ab.py 2>&1 | tee $OUT/ab.txt | grep -v Warning
date -u +%H:%M:%S
