"""The pre-pass's statistics chunking at B1 H40 and H12 1,024 tokens D128, direct-p, the whole call
replayed and after launches writing Q, K and V (toggles_in_model.pair): the column totals taken by a
launch of their own (FOLD_READS 0) rather than by each K and V block from the head's 32 chunk
partials, and longer statistics chunks (fewer partials to read: one-warp programs of 64 keys,
four-warp programs of 128). With the inputs written the quantise launch ends 13.8 us after the
statistics, where a cast of Q, K and V takes 13.5 (an H100, 2026-12-06). A job script, not part of
the package."""
import os
import sys

sys.path.insert(0, os.path.join(os.getcwd(), "docs/results/2026-12-06l-h100"))
from toggles_in_model import pair  # noqa: E402

pair({"package": {}, "totals launch": {"FOLD_READS": 0},
      "one-warp 64-key chunks": {"STATS_PROGRAMS": ((1, (64,)),)},
      "four-warp 128-key chunks": {"STATS_PROGRAMS": ((4, (128,)),)}})
