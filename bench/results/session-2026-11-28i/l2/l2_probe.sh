#!/usr/bin/env bash
# Is the head-dim-64 forward bound by L2 -> SM traffic or by the clock? (GPU machine, repository
# root; a HEAD binary as /tmp/A/fragmask.) 1. Nsight Compute counters of one cold launch each: the
# full call, the tail's 56 CTAs alone, the head-dim-128 call. 2. The SM clock and power sampled
# every 20 ms during a sustained run of each.
source bench/suite/device_env.sh
F=/tmp/A/fragmask
M='gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_read.sum,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed'
while read -r tag args; do
    # shellcheck disable=SC2086
    timeout 120 ncu --clock-control none -k 'regex:^fragmask_attention_fwd$' -s 1 -c 1 --metrics $M --csv \
        $F bench attention $args --warmup 1 --iters 1 > "$OUT/ncu-$tag.csv" 2>&1
    echo "== $tag"
    grep -E '"(gpu__|sm__|lts__|dram__|l1tex__)' "$OUT/ncu-$tag.csv" | awk -F'","' '{printf "  %-70s %s\n", $(NF-2), $NF}' | tr -d '"'
done <<'ROWS'
d64.full --random 1,16,16,16384,16384,64
d64.tail --random 1,1,1,10752,16384,64
d128.full --random 1,16,16,16384,16384,128
ROWS
for tag in d64.full:1,16,16,16384,16384,64 d64.tail:1,1,1,10752,16384,64 d128.full:1,16,16,16384,16384,128; do
    name=${tag%%:*}; shape=${tag#*:}
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 20 > "$OUT/smi-$name.csv" &
    pid=$!
    $F attention --random "$shape" --bench --json --warmup-ms 1500 --iters 400 > "$OUT/run-$name.json" 2>&1
    kill $pid; wait $pid 2>/dev/null
    python3 - "$OUT/smi-$name.csv" "$OUT/run-$name.json" "$name" <<'PY'
import sys, json, statistics
rows = [l.split(',') for l in open(sys.argv[1]) if l.strip()]
clk = [float(r[0]) for r in rows[len(rows)//3:]]; pw = [float(r[1]) for r in rows[len(rows)//3:]]
ms = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])["ms_median"]
print(f"{sys.argv[3]:10s} sustained {ms:.4f} ms, SM clock median {statistics.median(clk):.0f} MHz (min {min(clk):.0f}), power median {statistics.median(pw):.0f} W (max {max(pw):.0f}), {len(rows)} samples")
PY
done
