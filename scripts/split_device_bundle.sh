#!/usr/bin/env bash
# Split a device bundle (.device/NAME.tar.zst, from ../shared/gpu/bundle.sh) into byte chunks small
# enough to travel beside the working tree: a job carries at most 64 MiB including the tree (about
# 34 MiB with the embedded model's weights), and the `dsl` bundle alone is about 58 MiB.
#
#   scripts/split_device_bundle.sh dsl 3      # -> .device/dsl.part_00 .. _02
#
# Then, on the device, one job per chunk, back to back (the machine keeps /tmp about 30 s after a
# job), each carrying its chunk (the last also .device/zstd):
#   mkdir -p /tmp/parts && cp .device/dsl.part_00 /tmp/parts/
#   cp .device/dsl.part_01 /tmp/parts/
#   cp .device/dsl.part_02 /tmp/parts/ && cat /tmp/parts/dsl.part_* | .device/zstd -q -d --long=28 \
#     | tar -C /tmp/site -xf - && touch /tmp/site/.dsl.done && rm -rf /tmp/parts
# after which `source .device/install.sh dsl py` in the next job finds it installed.
set -euo pipefail
name=${1:?usage: $0 NAME [PARTS]}
parts=${2:-3}
dir="$(cd "$(dirname "$0")/.." && pwd)/.device"
[ -f "$dir/$name.tar.zst" ] || { echo "no $dir/$name.tar.zst: build it with ../shared/gpu/bundle.sh $name" >&2; exit 1; }
[ "$parts" -ge 2 ] 2>/dev/null || { echo "PARTS must be an integer >= 2, got $parts" >&2; exit 1; }
rm -f "$dir/$name".part_*
split -n "$parts" -d "$dir/$name.tar.zst" "$dir/$name.part_"
ls -l "$dir/$name".part_*
