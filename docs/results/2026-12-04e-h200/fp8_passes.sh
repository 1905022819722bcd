set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
for r in 1 2; do
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 --modes fp8 --kernels sm90-cute --peers cudnn-fp8-kernel --rep-ms 600 --prebuilt-dir .device/sm90 --json $OUT/bench_fp8_$r.json 2>&1 | tee $OUT/bench_fp8_$r.txt | tail -3
date -u +%H:%M:%S
done
