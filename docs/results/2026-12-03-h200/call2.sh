set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee $OUT/gpu.txt
python3 .device/jobs/prepass_tune.py time 2>&1 | tee $OUT/prepass_tune2.txt
for qw in 4 8 4; do
python3 -c "
import sys; import wan_fp4.kernels.prepare as P; P.QUANT_WARPS=$qw
from wan_fp4.cli import main; sys.exit(main(sys.argv[1:]))" bench attention --length-sweep --modes direct-p --peers sdpa-cudnn cudnn-fp8-kernel --breakdown --rep-ms 400 --prebuilt-dir .device/sm90 --json $OUT/sweep_qw${qw}_$SECONDS.json 2>&1 | tee $OUT/sweep_qw${qw}_$SECONDS.txt | grep -v '^ *$' | tail -25
done
