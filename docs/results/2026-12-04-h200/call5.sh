set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
cp .device/sm90_new/*.so wan_fp4/kernels/prebuilt/sm90a/
date -u +%H:%M:%S
timeout 150 python3 -m wan_fp4.cli check --kernels triton,sm90-cute > $OUT/check5.txt 2>&1; echo "check rc=$?"; grep -c "^ok" $OUT/check5.txt; tail -1 $OUT/check5.txt
date -u +%H:%M:%S
timeout 330 python3 -m wan_fp4.cli bench attention --length-sweep --modes direct-p --kernels sm90-cute --peers sdpa-cudnn cudnn-fp8-kernel --breakdown --rep-ms 400 --json $OUT/sweep5.json 2>&1 | tee $OUT/sweep5.txt | grep -v '^ *$' | tail -14
date -u +%H:%M:%S
