set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
date -u +%H:%M:%S
ncu --version | tail -1
for skv in 128 1024; do
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
      --import-source no -k regex:'kernel_cutlass' -c 1 -o $OUT/t0_$skv -f \
      python3 scripts/profile_sm90_device.py launch --prebuilt-dir .device/sm90 --shape 1x1x16896x128 --s-kv $skv > $OUT/t0_$skv.log 2>&1
  echo "ncu $skv rc=$?"
  ncu --import $OUT/t0_$skv.ncu-rep --page source --csv --print-source sass > $OUT/t0_${skv}_sass.csv 2> $OUT/t0_${skv}_sass.err
  echo "export rc=$? $(wc -l < $OUT/t0_${skv}_sass.csv) lines"
  ncu --import $OUT/t0_$skv.ncu-rep --page details --csv > $OUT/t0_${skv}_details.csv 2>&1
  grep -E '"Duration"|"Warp Cycles Per Issued Instruction"|"Stall' $OUT/t0_${skv}_details.csv | head -30
done
date -u +%H:%M:%S
