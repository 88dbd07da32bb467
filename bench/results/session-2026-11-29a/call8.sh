#!/usr/bin/env bash
# Call 8 (k33e): the sweeps at the commit with the paired dS barrier fix: synccheck over the
# whole backward selftest, memcheck and racecheck over the whole forward selftest (call 5's
# runs of those two stopped at 110 s).
set -uo pipefail
source bench/suite/device_env.sh
name=k33e
commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
bin=/tmp/$name/fragmask
run() { local tool=$1 lim=$2; shift 2; local log=$OUT/$tool-$*; log=${log// /_}.txt; SECONDS=0
  timeout $lim compute-sanitizer --tool $tool --error-exitcode 99 $bin attention "$@" --selftest > "$log" 2>&1
  echo "$tool $* rc=$? ${SECONDS}s $(grep -c '^PASS' "$log") pass $(grep -c '^FAIL' "$log") fail $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' "$log" | tail -1)"; }
run synccheck 60 --backward
run racecheck 140
run memcheck 230
