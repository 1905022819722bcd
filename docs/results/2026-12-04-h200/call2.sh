set -o pipefail
export PYTHONUNBUFFERED=1
source .device/install.sh py || exit 4
export PYTHONPATH=$PWD:$PYTHONPATH
cp .device/sm90_new/*.so wan_fp4/kernels/prebuilt/sm90a/
J=docs/results/2026-12-04-h200/epilogue_ab.py
date -u +%H:%M:%S
timeout 200 python3 $J waves 2>&1 | tee $OUT/waves.txt | grep -v Warning | grep -E "kernel:|one CTA ="
date -u +%H:%M:%S
timeout 150 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats -k regex:'kernel_cutlass' python3 $J ncu > $OUT/ncu_4096.txt 2>&1; echo "ncu rc=$?"
grep -E '^  kernel_cutlass|Duration|Issue Slots Busy|Compute \(SM\) Throughput|Stall|Shared Store|Global Store' $OUT/ncu_4096.txt | head -40
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__inst_executed_op_global_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum -k regex:'kernel_cutlass' python3 $J ncu > $OUT/ncu_4096_metrics.txt 2>&1; echo "ncu metrics rc=$?"
grep -E '^  kernel_cutlass|gpu__|smsp__|l1tex__' $OUT/ncu_4096_metrics.txt | head -40
date -u +%H:%M:%S
