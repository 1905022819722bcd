set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
run() {  # name mode shape skv
  ncu --clock-control none --cache-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters \
      --import-source no -k regex:'kernel_cutlass' -c 1 -o $OUT/$1 -f \
      python3 scripts/profile_sm90_device.py launch --prebuilt-dir .device/sm90 --mode $2 --shape $3 --s-kv $4 > $OUT/$1.log 2>&1
  echo "ncu $1 rc=$?"
  ncu --import $OUT/$1.ncu-rep --page source --csv --print-source sass > $OUT/$1_sass.csv 2>/dev/null
  ncu --import $OUT/$1.ncu-rep --page details --csv > $OUT/$1_details.csv 2>&1
  rm -f $OUT/$1.ncu-rep
  grep -E '"Duration"' $OUT/$1_details.csv | awk -F'","' '{print "'$1'", $(NF-1)}'
}
run warm_dp_1024 direct-p 1x1x16896x128 1024
run warm_dp_32760 direct-p 1x12x32760x128 32760
run warm_fp8_32760 fp8 1x12x32760x128 32760
date -u +%H:%M:%S
