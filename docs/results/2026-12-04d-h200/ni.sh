set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
P=.device/sm90_ni
date -u +%H:%M:%S
for r in 1 2; do
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 --modes fp8 --kernels sm90-cute --peers cudnn-fp8-kernel --rep-ms 600 --prebuilt-dir $P --sm90-configs '{"intra": false}' --json $OUT/bench_ni_$r.json 2>&1 | tee $OUT/bench_ni_$r.txt | tail -7
date -u +%H:%M:%S
done
