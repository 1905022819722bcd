set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
P=.device/sm90_h2
date -u +%H:%M:%S
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 --modes fp8 --kernels sm90-cute --peers cudnn-fp8-kernel --rep-ms 600 --prebuilt-dir $P --sm90-configs '{"headroom": 24}' '{"headroom": 24, "pingpong": 0}' '{"headroom": 24, "pingpong": 1}' --json $OUT/bench_h2.json 2>&1 | tee $OUT/bench_h2.txt | tail -8
date -u +%H:%M:%S
