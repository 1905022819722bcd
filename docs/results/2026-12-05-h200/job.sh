# The next H200 session's jobs for issue 16 (docs/SM90_GEN2.md items 26-29), kept in the repo so a
# fresh checkout still has them. Prepare on the CPU first (no GPU needed):
#   ../shared/gpu/bundle.sh py
#   python3 scripts/build_prebuilt.py --only sm90 --out .device/sm90 --sm90-config '{"split_tail": true}' --sm90-head-dims 128 64
# then run, one device call each (under 10 minutes), with
#   carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd", ".device/sm90"]:
#   bash docs/results/next-h200/job.sh split     # item 29: check, then paired timings of the tail split
#   bash docs/results/next-h200/job.sh prepass   # items 26-28: the pre-pass's floor, prototype and overlap
# and copy this script and $OUT's files to docs/results/<date>-h200/.
set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
P="--prebuilt-dir .device/sm90"
SPLIT='{"split_tail": true}'
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
date -u +%H:%M:%S
case "$1" in
split)
  # correct first (every awkward shape; the plan splits most of them, with 1 to 11 segments)
  python3 -m wan_fp4.cli check --kernels sm90-cute --configs "[$SPLIT]" $P > $OUT/check_split.txt 2>&1
  echo "check rc=$?"; tail -1 $OUT/check_split.txt; grep -E "^(FAIL|ERROR)" $OUT/check_split.txt | head -20
  date -u +%H:%M:%S
  # the kernel alone, paired with the default in rounds: fp8's short target (H12 S32760 splits its
  # last 36 tiles in thirds; H40 S32760 is not split: the plain kernel, a control)
  for mode in fp8 direct-p; do
    python3 scripts/profile_sm90_device.py pairs --mode $mode --configs "$SPLIT" --rounds 6 $P 2>&1 | tee $OUT/pairs_split_$mode.txt | grep -E "rel L2|median"
    date -u +%H:%M:%S
  done
  # short lengths (1,024 tokens: the last 56 of 320 tiles in halves)
  python3 scripts/profile_sm90_device.py short --configs "$SPLIT" $P 2>&1 | tee $OUT/short_split.txt
  ;;
prepass)
  python3 scripts/profile_sm90_device.py floor $P 2>&1 | tee $OUT/floor.txt
  date -u +%H:%M:%S
  python3 scripts/profile_sm90_device.py overlap --shapes 1x12x32760x128 1x40x32760x128 1x40x7680x128 $P 2>&1 | tee $OUT/overlap.txt
  date -u +%H:%M:%S
  python3 scripts/profile_sm90_device.py prepass $P 2>&1 | tee $OUT/prepass.txt
  ;;
*)
  echo "usage: job.sh split|prepass"; exit 2
  ;;
esac
date -u +%H:%M:%S
