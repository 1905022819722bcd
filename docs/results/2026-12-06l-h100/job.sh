# Issue 16, 2026-12-06 (18:39-20:03 UTC, three NVIDIA H100 80GB HBM3 machines; no H200 came, whether the
# call asked for either card or for an H100): the 1,024-token call as committed at fef684f, the quantise
# launch's rule (prepare.quant_launch) paired on a device, and the call as a model would make it
# (BENCHMARKS.md 2026-12-06 fourteenth run; docs/SM90_GEN2.md item 47). Calls 1-3 on one machine,
# 4-7 on another, each with carry
# [".device/py.tar.zst", ".device/install.sh", ".device/zstd", "wan_fp4/kernels/prebuilt/sm90a"]
# (the folder with its shims linked on the CPU):
#   1. LEFT=560 bash docs/results/next-h200/job.sh short: trace.txt, cold.txt, short.txt, floor.txt,
#      check_package.txt (trace.py, cold.py and short.py as in docs/results/2026-12-06k-h100/)
#   2. bash docs/results/next-h200/job.sh quant_rule: quant_rule.txt, quant_rule_d64.txt,
#      check_quant_rule.txt (the check's output, check_package.txt on the device); quant_rule.py here
#   3. bash docs/results/next-h200/job.sh in_model (in_model.py here; two earlier calls stopped on a
#      misplaced case in job.sh and on the replayed condition's split into calls, both fixed before
#      this one): in_model.txt
#   4. bash docs/results/next-h200/job.sh graph_spans (a fresh machine, 19:49 UTC): graph_spans.txt and
#      .json (`wan-fp4 bench attention --graph-spans`, as committed at 0648adb), in_model_pieces.txt
#      (in_model_pieces.py here)
#   5-7. on that machine, each as
#        source .device/install.sh py; export PYTHONPATH=$PWD:$PYTHONPATH
#        ROUNDS=3 timeout 240 python3 docs/results/2026-12-06l-h100/<script>.py
#      stats_regs.py (its first run stopped on host.run's tuple, fixed before this one), stats_regs.txt;
#      quant_in_model.py, quant_in_model.txt; toggles_in_model.py, toggles_in_model.txt
#   8. on a third machine (20:01 UTC), with carry also ".device/sm90_fold" (scripts/build_prebuilt.py
#      --only sm90 --out .device/sm90_fold --sm90-config '{"fold": 2}' --sm90-config '{"fold": 1}', then
#      its fp8 and D64 objects deleted to fit a call's 64 MiB), each as in 5-7:
#      prepass_in_model.py, prepass_in_model.txt; fold_in_call.py, fold_in_call.txt
#   9. on that machine: SHAPES="40x2048 40x4096 40x7680 12x32760" ROUNDS=2 fold_in_call.py: fold_in_call_long.txt
# The rule that followed (config.length_config: fold 1 for direct-p D128 up to 1,024 tokens) was not
# run on a device: too little device time was left to start another machine. next-h200's
# short_rule.py pairs it, and the check follows it (`job.sh short_rule`).
