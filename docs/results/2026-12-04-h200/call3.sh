set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
cp .device/sm90_new/*.so wan_fp4/kernels/prebuilt/sm90a/
J=docs/results/2026-12-04-h200/epilogue_ab.py
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu3.txt
date -u +%H:%M:%S
timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check3.txt 2>&1; echo "check rc=$?"; grep -c "^ok" $OUT/check3.txt; grep -v "^ok\|^info\|^skip" $OUT/check3.txt | tail -3
date -u +%H:%M:%S
timeout 120 python3 $J waves 2>&1 | tee $OUT/waves3.txt | grep -v Warning | grep -E "kernel:|one CTA ="
date -u +%H:%M:%S
AB_SKIP=direct-p:40x32760x128 timeout 420 python3 $J 2>&1 | tee $OUT/ab3.txt | grep -v Warning
date -u +%H:%M:%S
