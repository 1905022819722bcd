set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
cp .device/sm90_new/*.so wan_fp4/kernels/prebuilt/sm90a/
J=docs/results/2026-12-04-h200/epilogue_ab.py
date -u +%H:%M:%S
timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check4.txt 2>&1; echo "check rc=$?"; grep -c "^ok" $OUT/check4.txt; tail -1 $OUT/check4.txt
date -u +%H:%M:%S
export AB_VARIANTS=staged,sv_q,new
AB_SKIP=direct-p:40x16384x128,direct-p:40x32760x128,direct-p:40x75600x128,direct-p:12x32760x64,fp8:40x32760x128,fp8:40x75600x128 timeout 300 python3 $J 2>&1 | tee $OUT/ab4.txt | grep -v Warning
date -u +%H:%M:%S
timeout 100 python3 $J waves 2>&1 | tee $OUT/waves4.txt | grep -v Warning | grep -E "kernel:|one CTA ="
date -u +%H:%M:%S
