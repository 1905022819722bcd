set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
P=.device/sm90_pp3
date -u +%H:%M:%S
python3 -m wan_fp4.cli check --kernels sm90-cute --prebuilt-dir $P --configs '[{"pingpong": 3}]' --json $OUT/check_pp3.json 2>&1 | tail -40 > $OUT/check_pp3.txt
tail -2 $OUT/check_pp3.txt
date -u +%H:%M:%S
for r in 1 2; do
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 --modes fp8 direct-p --kernels sm90-cute --peers cudnn-fp8-kernel --rep-ms 600 --prebuilt-dir $P --sm90-configs '{"pingpong": 3}' --json $OUT/bench_pp3_$r.json 2>&1 | tee $OUT/bench_pp3_$r.txt | tail -7
date -u +%H:%M:%S
done
