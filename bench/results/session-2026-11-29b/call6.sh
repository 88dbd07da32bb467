#!/usr/bin/env bash
# Call 6: 3433c24 (shared K/V only at pairs' loads <= 0.55; k34b) against ddc919c (k34a) on the
# write-up 002 forward rows; head dim 64's shared-K/V choice; the rows through Python beside
# Flex; the Python GPU and torch tests on the new wheel.
set -uo pipefail
source bench/suite/device_env.sh
for n in k34a k34b; do [ -x /tmp/$n/fragmask ] || fm_unxz .carry/$n/fm.xz $n "$(cat .carry/$n/COMMIT)"; done
commit=$(cat .carry/k34b/COMMIT); bin=/tmp/k34b/fragmask; site=$(fm_install .carry/k34b)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 150 python3 bench/suite/run.py --ab /tmp/k34a /tmp/k34b --interleave --rounds 2 --warmup-ms 500 \
  --systems fragmask_cli --only '^fwd[.]wu002[.]' --out $OUT/ab 2>&1 | tail -7
timeout 70 python3 bench/results/session-2026-11-29b/sharedkv_pairs.py $bin 3 --dim 64 --flags "--shared-kv on" \
  .carry/k34m/wu002-f10-uniform.safetensors.xz .carry/k34m/wu002-f50-uniform.safetensors.xz 2>&1 | tee $OUT/d64-pairs.txt
timeout 40 python3 bench/results/session-2026-11-29b/sharedkv_pairs.py $bin 3 --dim 64 --flags "--shared-kv off" \
  .carry/k34m/wu002-f10-o100.safetensors.xz 2>&1 | tee -a $OUT/d64-pairs.txt
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-wu002-h200.jsonl"
timeout 150 python3 bench/suite/run.py --isolate --only '^fwd[.]wu002[.]blocks(10|50)v?$' --site "$site" \
  --systems fragmask,fragmask_cli,flex --commit "$commit" --bin "$bin" --output "$out" --budget-s 130 2>&1 | grep -v "^#" | tail -14
(cd crates/python/tests && SECONDS=0 && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 200 python3 -m unittest test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s")
grep -E "^(FAIL|ERROR)" $OUT/py.txt | head; tail -n 3 $OUT/py.txt
