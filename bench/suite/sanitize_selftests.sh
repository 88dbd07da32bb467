#!/usr/bin/env bash
# compute-sanitizer over the forward and backward selftests (every geometry and configuration
# they have, small shapes): the cases sanitize.sh's CLI calls do not reach (odd key-block
# counts, tiles other than the defaults, the raw fp16 path, deterministic runs).
#
#   bash bench/suite/sanitize_selftests.sh [BUILD] [TOOLS]   # TOOLS default "memcheck racecheck synccheck"
#   SUITES=backward bash bench/suite/sanitize_selftests.sh BUILD synccheck
#
# One process per (suite, tool). A kernel error leaves the CUDA context broken, so every later
# case of that process fails too: the first failing case is then run again alone, and each
# case after it in its own process, so the summary names every case the tool reports (a
# session found a divergent-barrier report this way that the first failure had hidden).
# Logs: $OUT/sanitize-selftests/; the last lines are one row per suite and tool.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-target/release}
tools=${2:-memcheck racecheck synccheck}
source bench/suite/device_env.sh
bin=$build/fragmask
logs=$OUT/sanitize-selftests
mkdir -p "$logs"
summary=()
# The case of a PASS/FAIL line: its name, what --cases matches (a forward name starts with its
# geometry, "[128x128] ..."), before the numbers or "error:", without a trailing "(wide step)".
case_name() { sed -E 's/^(PASS|FAIL) //; s/ +(dq |rel_err |error:).*//; s/ \(wide step\)$//; s/ +$//'; }
for suite in ${SUITES:-forward backward}; do
  flag=(); [ "$suite" = backward ] && flag=(--backward)
  for tool in $tools; do
    log=$logs/$suite-$tool.txt
    timeout "${LIMIT_S:-900}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin" attention "${flag[@]}" --selftest > "$log" 2>&1
    rc=$?
    pass=$(grep -c '^PASS' "$log"); fail=$(grep -c '^FAIL' "$log")
    s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$log" | tail -1)
    summary+=("$(printf '%-9s %-9s rc=%-3s %4s pass %3s fail  %s' "$suite" "$tool" "$rc" "$pass" "$fail" "${s:-no summary line}")")
    [ "$fail" -eq 0 ] && continue
    # From the first failure on, each case alone.
    grep '^FAIL' "$log" | case_name | while IFS= read -r c; do
      one=$logs/$suite-$tool-$(printf '%s' "$c" | tr -c 'A-Za-z0-9' '_' | cut -c1-80).txt
      timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin" attention "${flag[@]}" --selftest --cases "$c" > "$one" 2>&1
      r=$?
      [ $r -ne 0 ] && printf '%-9s %-9s rc=%-3s alone: %s\n' "$suite" "$tool" "$r" "$c"
    done | tee -a "$logs/alone.txt"
  done
done
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
[ -s "$logs/alone.txt" ] && cat "$logs/alone.txt"
exit 0
