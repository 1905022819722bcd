set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
P=.device/sm90_h
date -u +%H:%M:%S; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
python3 -m wan_fp4.cli check --kernels sm90-cute --prebuilt-dir $P --configs '[{"headroom": 24}, {"headroom": 8}]' --json $OUT/check_h.json 2>&1 | tail -60 > $OUT/check_h.txt
tail -3 $OUT/check_h.txt
date -u +%H:%M:%S
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 --modes fp8 --kernels sm90-cute --peers cudnn-fp8-kernel --rep-ms 800 --prebuilt-dir $P --sm90-configs '{"headroom": 24}' '{"headroom": 8}' --json $OUT/bench_h.json 2>&1 | tee $OUT/bench_h.txt | tail -30
date -u +%H:%M:%S
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x75600x128 --qk-gain 2.449 --modes fp8 --kernels sm90-cute --peers cudnn-fp8-kernel --rep-ms 600 --prebuilt-dir $P --sm90-configs '{"headroom": 24}' '{"headroom": 8}' --json $OUT/bench_h_peaky.json 2>&1 | tee $OUT/bench_h_peaky.txt | tail -20
date -u +%H:%M:%S
