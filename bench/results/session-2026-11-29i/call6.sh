#!/usr/bin/env bash
# Call 6: Nsight Compute of the deterministic backward with no mask (S=16384 H=16 D=128) at
# the grid's order and at 8 planes per section, and the non-deterministic kernel: where the
# deterministic mode's 1.34x goes (per-instruction samples of each).
source bench/suite/device_env.sh
fm_unxz .carry/k41e/fm.xz E 35ff81a
F=/tmp/E/fragmask
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section SourceCounters"
run() {  # name, flags...
  local name=$1; shift
  timeout 150 ncu --clock-control none --kernel-name fragmask_attention_bwd --launch-skip 2 --launch-count 1 $S \
    -o "/tmp/$name" -f $F bench backward --random 1,16,16,16384,16384,128 \
    --warmup 2 --iters 1 --json "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$?"
  ncu --import "/tmp/$name.ncu-rep" --csv --page details > "$OUT/$name-details.csv" 2>/dev/null
  ncu --import "/tmp/$name.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip -6 > "$OUT/$name-source.csv.gz"
}
run none-det1 --deterministic
run none-det8 --deterministic --head-section 8
run none-nondet
ls -la "$OUT"
