#!/usr/bin/env bash
# Pack SageAttention 2's source for a build on the H200 (there is no sm90 wheel), as the
# 2026-11-30 benchmarks did. The device has nvcc but no network, so the source travels with the job.
#
#   scripts/pack_sage2_source.sh /path/to/SageAttention   # a checkout (we used commit d1a57a5)
#     -> .device/sage2src  (git-ignored; name it in the run's carry)
#
# On the device (about 100 s, 16 cores):
#   cp -r .device/sage2src /tmp/sage2 && cd /tmp/sage2 && \
#     TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 python setup.py build_ext --inplace && cd - && \
#     export PYTHONPATH=/tmp/sage2:$PYTHONPATH     # ahead of sageattention 1.0.6 from the py bundle
# then `--peers ... sage2` in scripts/bench_attention.py.
#
# Only the sm90 attention extension and the fused quantisation extension are built: the sm80/sm89
# blocks of its setup.py are switched off (they would triple the build time and are not used on
# Hopper). setup.py reads README.md, which the packed tree lacks, so an empty one is added.
set -euo pipefail
src=${1:?usage: $0 /path/to/SageAttention}
out="$(cd "$(dirname "$0")/.." && pwd)/.device/sage2src"
rm -rf "$out" && mkdir -p "$out"
(cd "$src" && tar -cf - setup.py pyproject.toml csrc sageattention LICENSE) | tar -xf - -C "$out"
touch "$out/README.md"
python3 - "$out/setup.py" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
for cond in ("if HAS_SM80 or HAS_SM86 or HAS_SM89 or HAS_SM90 or HAS_SM100 or HAS_SM120 or HAS_SM121:",
             "if HAS_SM89 or HAS_SM90 or HAS_SM100 or HAS_SM120 or HAS_SM121:"):
    if s.count(cond) != 1:
        sys.exit(f"setup.py changed upstream: cannot find {cond!r}")
    s = s.replace(cond, "if False:  # wan-fp4 device build: sm90 extensions only")
open(p, "w").write(s)
PY
echo "packed $(du -sh "$out" | cut -f1) into $out"
