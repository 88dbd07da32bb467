#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and synccheck over every kernel family on small
# shapes, through the CLI (the sanitizers check memory and synchronisation, not results: the
# selftests and layouts.sh check those).
#
#   bash bench/suite/sanitize.sh [BUILD] [TOOLS]     # TOOLS default "memcheck racecheck synccheck"
#   CASES='^bwd-(causal|64tok)' bash bench/suite/sanitize.sh BUILD   # only the cases whose name matches
#   LAYOUT=bshd bash bench/suite/sanitize.sh BUILD   # the attention cases, outputs in [B, S, H, D] (--out-layout)
#
# BUILD holds the `fragmask` binary (default: target/release). CASES: an extended regex over the
# case names (default: every case); the cases are bench/suite/cli_cases.sh's. Logs: $OUT/sanitize/*.txt; the last lines printed are one row
# per case and tool: the sanitizer's summary and the exit status.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-target/release}
tools=${2:-memcheck racecheck synccheck}
source bench/suite/device_env.sh
bin=$build/fragmask
logs=$OUT/sanitize
source bench/suite/cli_cases.sh
fm_cli_cases "$bin" "$logs"
summary=()
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  [[ -n "${CASES:-}" && ! "$name" =~ $CASES ]] && continue
  if [[ "${LAYOUT:-bhsd}" != bhsd ]]; then   # the attention cases only, outputs in that layout
    [[ "$args" == attention* ]] || continue
    name="$name@$LAYOUT"; args="$args --out-layout $LAYOUT"
  fi
  for tool in $tools; do
    log=$logs/$name-$tool.txt
    # shellcheck disable=SC2086
    timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin" $args > "$log" 2>&1
    rc=$?
    s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\|LEAK\) SUMMARY: .*' "$log" | tail -1)
    summary+=("$(printf '%-22s %-9s rc=%-3s %s' "$name" "$tool" "$rc" "${s:-no summary line}")")
  done
done
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
