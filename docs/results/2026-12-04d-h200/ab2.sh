set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
P=.device/sm90_ab2
C='{"sum_tree": true, "cluster": 2}'
date -u +%H:%M:%S
python3 -m wan_fp4.cli check --kernels sm90-cute --prebuilt-dir $P --configs "[$C]" --json $OUT/check_ab2.json 2>&1 | tail -30 > $OUT/check_ab2.txt
tail -2 $OUT/check_ab2.txt
date -u +%H:%M:%S
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 --modes fp8 --kernels sm90-cute --peers cudnn-fp8-kernel --rep-ms 600 --prebuilt-dir $P --sm90-configs "$C" --json $OUT/bench_ab2.json 2>&1 | tee $OUT/bench_ab2.txt | tail -5
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py short --prebuilt-dir $P --configs '{}' "$C" --lengths 1024 4096 7680 16384 2>&1 | grep "^fp8" | tee $OUT/short_ab2.txt
date -u +%H:%M:%S
