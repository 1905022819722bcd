set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
timeout 280 python3 -m wan_fp4.cli check --kernels sm90-cute --prebuilt-dir .device/sm90_cfg --configs '[{"n_wg": 3, "p_smem": true, "overlap": false, "fold": 2, "intra": false, "headroom": 0}, {"cluster": 2}, {"pingpong": 2}, {"pingpong": 0}]' > $OUT/check_configs.txt 2>&1; echo "check rc=$?"; grep -c "^ok" $OUT/check_configs.txt; grep -E "^FAIL" $OUT/check_configs.txt | head; tail -1 $OUT/check_configs.txt
date -u +%H:%M:%S
