set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh dsl py || exit 4
export PYTHONPATH=/tmp/sage2:$PWD:$PYTHONPATH
ls /tmp/sage2/sageattention/*.so | head -3
date -u +%H:%M:%S
python3 -m wan_fp4.cli bench attention --length-sweep --modes direct-p fp8 --kernels sm90-cute --peers fa4 sdpa-cudnn cudnn-fp8-kernel sage2 --breakdown --rep-ms 400 --prebuilt-dir .device/sm90 --json $OUT/sweep.json 2>&1 | tee $OUT/sweep.txt | grep -v '^ *$' | tail -12
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py floor --prebuilt-dir .device/sm90 2>&1 | tee $OUT/floor.txt
date -u +%H:%M:%S
ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis -k regex:'kernel_cutlass|nvjet' -c 2 python3 scripts/profile_sm90_device.py launch --prebuilt-dir .device/sm90 --shape 1x40x75600x128 > $OUT/ncu_75600.txt 2>&1; echo "ncu rc=$?"
grep -E 'kernel_cutlass|nvjet|Duration|SM Frequency|Issue Slots Busy|Tensor|dominated' $OUT/ncu_75600.txt | head -20
date -u +%H:%M:%S
