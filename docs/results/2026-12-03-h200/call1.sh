set -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee $OUT/gpu.txt
python3 -c "import triton; print('triton', triton.__version__)" | tee -a $OUT/gpu.txt
python3 .device/jobs/prepass_tune.py time 2>&1 | tee $OUT/prepass_tune.txt
ncu --clock-control none --cache-control none -k regex:'_column|_quant' --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,sm__cycles_active.avg python3 .device/jobs/prepass_tune.py ncu > $OUT/ncu_prepass.txt 2>&1; echo ncu rc=$?
tail -5 $OUT/ncu_prepass.txt
