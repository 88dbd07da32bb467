#!/usr/bin/env bash
# Call 6 (H100): one fm_pair_key0 for the paired schedule's s.n0 and the kernel's dK/dV rows (the paired kernels'
# SASS changes): the backward selftest's paired cases, sanitizers on the paired cases, A/B of the VSA backward
# rows against 0f95727's binary (the same kernels as e475847 before it).
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/n1/fm.xz base 0f95727
un .carry/b4/fm.xz pk pair-key0
SECONDS=0
timeout 150 /tmp/pk/fragmask attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$? ${SECONDS}s"; grep -c PASS $OUT/selftest.txt; grep -i "paired" $OUT/selftest.txt | head -8; tail -1 $OUT/selftest.txt
python3 - <<'PY'
s=open('bench/suite/sanitize.sh').read()
lines=s.split('\n'); i=lines.index('cases=(')
j=lines.index(')', i)
keep=[l for l in lines[i+1:j] if '"bwd-64tok-writer|' in l or '"bwd-64tok-paired-d64|' in l]
open('bench/suite/sanitize_sub.sh','w').write('\n'.join(lines[:i+1]+keep+lines[j:]))
PY
SECONDS=0
timeout 120 bash bench/suite/sanitize_sub.sh /tmp/pk > $OUT/sanitize_stdout.txt 2>&1; echo "sanitize rc=$? ${SECONDS}s"
cd $OUT/sanitize && for f in *-memcheck.txt *-racecheck.txt *-synccheck.txt; do s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\|LEAK\) SUMMARY: .*' $f | tail -1); echo "${f%.txt} ${s:-NO SUMMARY}"; done | sort > $OUT/sanitize_rows.txt; cd - > /dev/null
cat $OUT/sanitize_rows.txt
SECONDS=0
timeout 200 python3 bench/suite/run.py --ab /tmp/base /tmp/pk --interleave --rounds 3 --systems fragmask_cli --budget-s 190 \
  --only '^bwd\.wu002\.blocks(10|50)$' --out $OUT/ab 2>&1 | grep -v "^#" | grep "B/A\|skipped" | tee $OUT/ab.txt
echo "ab ${SECONDS}s"
