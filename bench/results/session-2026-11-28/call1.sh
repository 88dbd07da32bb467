#!/usr/bin/env bash
# Call 1 (H100): paired key blocks (1ce163b): backward selftest, sanitizers on the 64-token cases, A/B of the VSA backward rows against 7eea077.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/c1/h19.xz h19 7eea077
un .carry/n1/fm.xz n1 1ce163b
SECONDS=0
timeout 200 /tmp/n1/fragmask attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$? ${SECONDS}s"
grep -i "paired\|fail\|64x64" $OUT/selftest.txt | head -20; tail -3 $OUT/selftest.txt
python3 - <<'PY'
s=open('bench/suite/sanitize.sh').read()
lines=s.split('\n'); i=lines.index('cases=(')
j=lines.index(')', i)
keep=[l for l in lines[i+1:j] if 'bwd-64tok' in l or 'bwd-random50' in l]
open('/tmp/sanitize_sub.sh','w').write('\n'.join(lines[:i+1]+keep+lines[j:]))
PY
cp /tmp/sanitize_sub.sh bench/suite/sanitize_sub.sh
SECONDS=0
timeout 150 bash bench/suite/sanitize_sub.sh /tmp/n1 > $OUT/sanitize_stdout.txt 2>&1; echo "sanitize rc=$? ${SECONDS}s"
cd $OUT/sanitize && for f in *-memcheck.txt *-racecheck.txt *-synccheck.txt; do s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\|LEAK\) SUMMARY: .*' $f | tail -1); echo "${f%.txt} ${s:-NO SUMMARY}"; done | sort > $OUT/sanitize_rows.txt; cd - > /dev/null
cat $OUT/sanitize_rows.txt
SECONDS=0
timeout 200 python3 bench/suite/run.py --ab /tmp/h19 /tmp/n1 --interleave --rounds 2 --systems fragmask_cli --budget-s 180 \
  --only '^bwd\.wu002\.blocks(10|50)$' --out $OUT/ab 2>&1 | grep -v "^#" | grep "B/A\|skipped" | tee $OUT/ab.txt
echo "ab ${SECONDS}s"
