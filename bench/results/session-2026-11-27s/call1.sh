#!/usr/bin/env bash
# Call 1 (H100): FA4 part1; the whole sanitizer sweep over the HEAD build (7eea077), new cases first.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bash .carry/fa4/part1/install-on-device.sh .carry/fa4/part1 > $OUT/fa4part1.txt 2>&1; echo "fa4 part1 rc=$?"
mkdir -p /tmp/h19 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.carry/c1/h19.xz'), open('/tmp/h19/fragmask','wb'))" && chmod +x /tmp/h19/fragmask && echo 7eea077 > /tmp/h19/COMMIT
/tmp/h19/fragmask --version
# move the two cases the last session added to the front
python3 - <<'PY'
import re
s=open('bench/suite/sanitize.sh').read()
lines=s.split('\n'); first=[l for l in lines if 'bwd-gqa-causal-sections|' in l or 'bwd-64tok-writer|' in l]
rest=[l for l in lines if l not in first]
i=rest.index('cases=(')
open('/tmp/sanitize_front.sh','w').write('\n'.join(rest[:i+1]+first+rest[i+1:]))
PY
cp /tmp/sanitize_front.sh bench/suite/sanitize_front.sh
SECONDS=0
timeout 470 bash bench/suite/sanitize_front.sh /tmp/h19 > $OUT/sanitize_stdout.txt 2>&1; echo "sanitize rc=$? in ${SECONDS}s"
cd $OUT/sanitize && for f in *-memcheck.txt *-racecheck.txt *-synccheck.txt; do s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\|LEAK\) SUMMARY: .*' $f | tail -1); echo "${f%.txt} ${s:-NO SUMMARY}"; done | sort > $OUT/sanitize_rows.txt
echo "rows $(wc -l < $OUT/sanitize_rows.txt), clean $(grep -c ': 0 errors\|0 hazards displayed (0 errors, 0 warnings)' $OUT/sanitize_rows.txt)"
grep -v ': 0 errors\|(0 errors, 0 warnings)' $OUT/sanitize_rows.txt | head -20
