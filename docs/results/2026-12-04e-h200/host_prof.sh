set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
python3 .device/jobs/host_prof.py 300 > $OUT/host_prof.txt 2>&1; head -8 $OUT/host_prof.txt
python3 scripts/profile_sm90_device.py percall > $OUT/percall.txt 2>&1; head -12 $OUT/percall.txt
