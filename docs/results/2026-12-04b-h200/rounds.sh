set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py rounds --prebuilt-dir .device/sm90 2>&1 | tee $OUT/rounds.txt
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py rounds --prebuilt-dir .device/sm90 2>&1 | tee $OUT/rounds2.txt
date -u +%H:%M:%S
