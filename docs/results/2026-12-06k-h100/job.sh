# Issue 16, 2026-12-06 (16:32-16:38 UTC, one NVIDIA H100 80GB HBM3, a fresh machine): where the
# 1,024-token call's time goes now, and the quantise launch's shape at short lengths
# (BENCHMARKS.md 2026-12-06 thirteenth run; docs/SM90_GEN2.md item 46). Six device calls on one
# machine, each with carry [".device/py.tar.zst", ".device/install.sh", ".device/zstd",
# "wan_fp4/kernels/prebuilt/sm90a"] (the folder with its shims linked on the CPU):
#   1. LEFT=500 bash docs/results/next-h200/job.sh short   (as committed at b7e08ad, with trace.py,
#      cold.py and short.py then in next-h200/; the queue now runs the copies here): trace.txt,
#      short.txt, floor.txt, check_package.txt; its cold.py stopped on a torch.sum signature
#   2. cold.py with that fixed, each kernel time a graph's time less the chain before it:
#      cold_by_subtraction.txt (b7e08ad's cold.py with torch.sum(c.view(-1), 0, dtype=torch.int64,
#      out=sink[i])); the chains' interactions make that subtraction unreliable, hence
#   3. cold.py (here): the kernel's own duration from CUPTI, cold.txt
#   4. cold_call.py: the same question inside the call, cold_call.txt
#   5. stats_in_call.py: the statistics programs' shapes inside the call, stats_in_call.txt
#   6. quant_shape.py: the quantise launch's shape (run-time module constants), quant_shape.txt
# Each of 2-6 ran as:
#   source .device/install.sh py; export PYTHONPATH=$PWD:$PYTHONPATH
#   ROUNDS=3 (4 for 5 and 6) timeout 200 python3 docs/results/2026-12-06k-h100/<script>.py
# The package's rule that followed (prepare.quant_launch) was not run on a device this session: too
# little device time was left to start another machine. docs/results/next-h200/quant_rule.py pairs it.
