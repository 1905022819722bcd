set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
P=.device/sm90_2cta
A='{"n_wg": 1, "pingpong": 0}'
B='{"n_wg": 1, "ctas_per_sm": 2, "pingpong": 0}'
date -u +%H:%M:%S; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
python3 scripts/profile_sm90_device.py short --prebuilt-dir $P --configs "$A" "$B" --lengths 1024 4096 7680 16384 32760 2>&1 | tee $OUT/short_2cta.txt
date -u +%H:%M:%S
ncu --clock-control none --section LaunchStats --section Occupancy --section SpeedOfLight -k regex:'kernel_cutlass' -c 3 \
    python3 scripts/profile_sm90_device.py launch --prebuilt-dir $P --shape 1x40x1024x128 --configs "$A" "$B" > $OUT/ncu_2cta.txt 2>&1
echo "ncu rc=$?"; grep -E "Registers Per|Shared Memory Config|Dynamic Shared|Block Limit|Theoretical Occ|Achieved Occ|Duration|Waves Per SM|Grid Size|Block Size" $OUT/ncu_2cta.txt
date -u +%H:%M:%S
python3 -m wan_fp4.cli check --kernels sm90-cute --prebuilt-dir $P --configs "[$A, $B]" --json $OUT/check_2cta.json 2>&1 | tail -40 | tee $OUT/check_2cta.txt
date -u +%H:%M:%S
