set -o pipefail
export PYTHONUNBUFFERED=1
nvcc -arch=sm_90a -o /tmp/cluster_probe .device/jobs/cluster_probe.cu && /tmp/cluster_probe | tee $OUT/cluster_probe.txt
nvidia-smi --query-gpu=name,serial,pci.bus_id,clocks.max.sm --format=csv | tee -a $OUT/cluster_probe.txt
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
python3 scripts/profile_sm90_device.py pairs --mode fp8 --prebuilt-dir .device/sm90_c1 --configs '{"cluster": 1}' --rounds 5 2>&1 | tee $OUT/pairs_cluster1.txt | grep -E "median|rel L2"
date -u +%H:%M:%S
