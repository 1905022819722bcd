# usage: bash .device/jobs/dsl_part.sh N  (N, LAST: the call with N = LAST (default 1) unpacks)
mkdir -p /tmp/parts && cp .device/dsl.part_0$1 /tmp/parts/ && ls -l /tmp/parts
if [ "$1" = "${2:-1}" ]; then
  mkdir -p /tmp/site && cat /tmp/parts/dsl.part_* | .device/zstd -q -d --long=28 | tar -C /tmp/site -xf - && touch /tmp/site/.dsl.done && rm -rf /tmp/parts && echo dsl unpacked
fi
