set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
cp .device/sm90_tma/libwanfp4_sm90_{directp,fp8}_d{128,64}.so .device/sm90_tma/manifest.json wan_fp4/kernels/prebuilt/sm90a/
J=docs/results/2026-12-04-h200/epilogue_ab.py
export AB_VARIANTS=staged,new
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu_tma.txt
date -u +%H:%M:%S
timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute > $OUT/check_tma.txt 2>&1; echo "check rc=$?"; grep -c "^ok" $OUT/check_tma.txt; grep -v "^ok\|^info\|^skip" $OUT/check_tma.txt | tail -3
date -u +%H:%M:%S
timeout 150 python3 -m wan_fp4.cli check --kernels sm90-cute --prebuilt-dir .device/sm90_tma --configs '[{"n_wg": 3, "p_smem": true, "overlap": false, "fold": 2, "intra": false, "headroom": 0}, {"cluster": 2}, {"pingpong": 2}, {"pingpong": 0}]' > $OUT/check_tma_configs.txt 2>&1; echo "check configs rc=$?"; grep -c "^ok" $OUT/check_tma_configs.txt; grep -v "^ok\|^info\|^skip" $OUT/check_tma_configs.txt | tail -3
date -u +%H:%M:%S
timeout 100 python3 $J waves 2>&1 | tee $OUT/waves_tma.txt | grep -v Warning | grep -E "kernel:|one CTA ="
date -u +%H:%M:%S
AB_SKIP=direct-p:40x32760x128,direct-p:40x75600x128,fp8:40x75600x128 timeout 210 python3 $J 2>&1 | tee $OUT/ab_tma.txt | grep -v Warning
date -u +%H:%M:%S
