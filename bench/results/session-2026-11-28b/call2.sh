#!/usr/bin/env bash
# Call 2 (H100): dQ staged in 16-byte quads (STS.128) for the bulk reductions: backward selftest, sanitizers
# on the bulk-path cases, A/B of the backward table against 0f95727's binary (same kernels as 2072bdf before it).
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/n1/fm.xz base 0f95727
un .carry/b2/fm.xz quads dq-quads
SECONDS=0
timeout 150 /tmp/quads/fragmask attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$? ${SECONDS}s"; grep -c PASS $OUT/selftest.txt; grep -i "fail" $OUT/selftest.txt | head -5; tail -1 $OUT/selftest.txt
python3 - <<'PY'
s=open('bench/suite/sanitize.sh').read()
lines=s.split('\n'); i=lines.index('cases=(')
j=lines.index(')', i)
keep=[l for l in lines[i+1:j] if any(c in l for c in ('"bwd-causal|','"bwd-docs|','"bwd-random50|','"bwd-gqa-causal-sections|','"bwd-64tok-writer|'))]
open('bench/suite/sanitize_sub.sh','w').write('\n'.join(lines[:i+1]+keep+lines[j:]))
PY
SECONDS=0
timeout 200 bash bench/suite/sanitize_sub.sh /tmp/quads > $OUT/sanitize_stdout.txt 2>&1; echo "sanitize rc=$? ${SECONDS}s"
cd $OUT/sanitize && for f in *-memcheck.txt *-racecheck.txt *-synccheck.txt; do s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\|LEAK\) SUMMARY: .*' $f | tail -1); echo "${f%.txt} ${s:-NO SUMMARY}"; done | sort > $OUT/sanitize_rows.txt; cd - > /dev/null
cat $OUT/sanitize_rows.txt
SECONDS=0
timeout 250 python3 bench/suite/run.py --ab /tmp/base /tmp/quads --interleave --rounds 2 --systems fragmask_cli --budget-s 240 \
  --only '^bwd\.(s16384\.(none|causal|window1024|docs12|random50)|gqa\.s16384\.causal|gqa64\.s16384\.causal|wu002\.blocks(10|50))$' --out $OUT/ab 2>&1 | grep -v "^#" | grep "B/A\|skipped" | tee $OUT/ab.txt
echo "ab ${SECONDS}s"
