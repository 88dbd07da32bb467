#!/usr/bin/env bash
# 46bc0fc (k44c): 1. planes per deterministic section where the walk orders do not run (lists
# built on the GPU: ascending walks, 8 planes), with the writer: --deterministic-walks off on
# both sides, --head-section 4 / 2 / 16 against the default 8, block-sparse 10% and 50%;
# 2. write-up 002's deterministic rows at head dim 64 (the consumers' turns): unpaired and
# ascending against the default (paired, walked where the fill allows);
# 3. memcheck, racecheck, synccheck on the head dim 128 consumers' case, walked.
source bench/suite/device_env.sh
K=.carry/k44c; R=$OUT/r; mkdir -p $R
C=$(cat $K/COMMIT); fm_unxz $K/fm.xz N "$C"; F=/tmp/N/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $F attention --backward --selftest --cases "paired block-sparse, the consumers' turns" > $R/guard.txt 2>&1; rc=$?; echo "guard rc=$rc"; [ $rc -eq 0 ] || exit 1
for m in blocksparse:0.1 blocksparse:0.5; do
  timeout 150 python3 -m bench.suite.flag_pairs $F 'bwd[.]s16384[.]blocksparse10[.]det$' 2 "--head-section 4" "--head-section 2" "--head-section 16" --base "--deterministic-walks off" --set mask=$m >> $R/sections.txt 2>&1; echo "sections $m rc=$?"
done
timeout 150 python3 -m bench.suite.flag_pairs $F 'bwd[.]wu002[.]blocks(10|50)[.]det$' 2 "--paired-keys off" "--deterministic-walks off" --set dim=64 > $R/d64.txt 2>&1; echo "d64 rc=$?"
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 $F attention --backward --selftest --cases "paired block-sparse, the consumers' turns" > $R/san-$tool.txt 2>&1
  echo "$tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool.txt | tail -1)"
done
cut -c1-160 $R/sections.txt $R/d64.txt
