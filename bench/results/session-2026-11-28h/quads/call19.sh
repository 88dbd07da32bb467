#!/usr/bin/env bash
# Call 19: dQ staged in 16-byte quads (FM_EXP_QUADS; the postprocess reads quads): shared-memory bank conflicts
# and cycles under ncu, the D=128 backward selftest, and an A/B on the stable rows (3 ABBA pairs).
source bench/suite/device_env.sh
fm_unxz .carry/x30/fm.xz A x30g
M='l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum'
for v in base quads; do
  if [ $v = quads ]; then export FM_EXP_QUADS=1; else unset FM_EXP_QUADS; fi
  timeout 120 ncu --clock-control none -k 'regex:^fragmask_attention_bwd$' -s 1 -c 1 --metrics $M --csv /tmp/A/fragmask bench backward --random 1,16,16,16384,16384,128 --causal --warmup 1 --iters 1 > $OUT/m-$v.csv 2>&1
  echo "$v: $(grep -E 'bank_conflicts|cycles_elapsed' $OUT/m-$v.csv | awk -F'","' '{printf "%s=%s ", substr($(NF-2),1,58), $NF}')"
done
FM_EXP_QUADS=1 timeout 100 /tmp/A/fragmask attention --selftest --backward --cases d128 > $OUT/selftest.txt 2>&1; echo "selftest rc=$? $(tail -1 $OUT/selftest.txt)"
unset FM_EXP_QUADS
mkdir -p /tmp/Q && printf '#!/bin/sh\nFM_EXP_QUADS=1 exec /tmp/A/fragmask "$@"\n' > /tmp/Q/fragmask && chmod +x /tmp/Q/fragmask && echo x30g-quads > /tmp/Q/COMMIT
timeout 150 python3 bench/suite/run.py --ab /tmp/A /tmp/Q --interleave --rounds 3 --systems fragmask_cli \
  --only '^bwd[.](s16384[.](none|window1024|docs12)|s8192[.]none)$' --out $OUT/ab > $OUT/ab.log 2>&1
grep "B/A" $OUT/ab.log
