set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 --modes fp8 direct-p --kernels sm90-cute --peers cudnn-fp8-kernel --breakdown --rep-ms 600 --prebuilt-dir .device/sm90 --json $OUT/breakdown_h12.json 2>&1 | tee $OUT/breakdown_h12.txt | grep -E "per call|\| wan|\| cuDNN"
for m in fp8 direct-p; do python3 .device/jobs/gap_trace.py $m $OUT/trace_$m.json 2>&1 | tail -2; done
ls -la $OUT
date -u +%H:%M:%S
