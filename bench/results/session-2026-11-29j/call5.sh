#!/usr/bin/env bash
# Call 5: k42e (4 planes per deterministic section at S=16384): the default against a
# named 8 on block-sparse 10% / 50%, then the suite's deterministic block-sparse row.
source bench/suite/device_env.sh
fm_unxz .carry/k42e/fm.xz E "$(cat .carry/k42e/COMMIT)"
site=$(fm_install .carry/k42e)
F=/tmp/E/fragmask
for r in 0 1; do for m in blocksparse:0.1:0.5 blocksparse:0.5:0.5; do for sec in "" "--head-section 8"; do
  ms=$(timeout 60 $F bench backward --random 1,16,16,16384,16384,128 --json --warmup 5 --iters 20 --synthetic-mask $m --deterministic $sec | tail -1 | python3 -c "import json,sys; print(round(json.load(sys.stdin)['ms_median'],4))")
  echo "round $r $m [${sec:-default}] $ms" | tee -a "$OUT/default-vs-8.txt"
done; done; done
timeout 120 python3 bench/suite/run.py --isolate --site "$site" --bin $F --commit "$(cat .carry/k42e/COMMIT)" --systems fragmask,fragmask_cli --only 'blocksparse10[.]det$' --output "$OUT/suite-det-bs10.jsonl" > "$OUT/suite-det-bs10.log" 2>&1; echo "suite rc=$?"; grep -E "^bwd" "$OUT/suite-det-bs10.log" | tail -3
