set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
P=.device/sm90
date -u +%H:%M:%S
python3 -m wan_fp4.cli check --kernels triton,sm90-cute --prebuilt-dir $P --json $OUT/check_final.json 2>&1 | tail -40 > $OUT/check_final.txt
tail -2 $OUT/check_final.txt
date -u +%H:%M:%S
python3 -m wan_fp4.cli bench attention --shapes 1x12x32760x128 1x40x32760x128 1x40x75600x128 1x12x32760x64 --modes direct-p fp8 --kernels sm90-cute --peers cudnn-fp8-kernel --rep-ms 600 --prebuilt-dir $P --json $OUT/bench_final.json 2>&1 | tee $OUT/bench_final.txt | tail -6
date -u +%H:%M:%S
