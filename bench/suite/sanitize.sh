#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and synccheck over every kernel family on small
# shapes, through the CLI (each case also checks its result against the CPU reference).
#
#   bash bench/suite/sanitize.sh [BUILD] [TOOLS]     # TOOLS default "memcheck racecheck synccheck"
#   CASES='^bwd-(causal|64tok)' bash bench/suite/sanitize.sh BUILD   # only the cases whose name matches
#
# BUILD holds the `fragmask` binary (default: target/release). CASES: an extended regex over the
# case names (default: every case). Logs: $OUT/sanitize/*.txt; the last lines printed are one row
# per case and tool: the sanitizer's summary and the exit status.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-target/release}
tools=${2:-memcheck racecheck synccheck}
source bench/suite/device_env.sh
bin=$build/fragmask
logs=$OUT/sanitize
mkdir -p "$logs"
ids=$logs/doc_ids.npy
python3 -c "import numpy as np; np.save('$ids', np.repeat(np.arange(5, dtype=np.int32), [90, 130, 40, 200, 52]))"
"$bin" pack --predicate "causal,doc=$ids" --seqlen-q 512 --seqlen-k 512 --transposed -o "$logs/docs.safetensors" -q
fwd="attention --random 1,2,2,512,512,128"
cases=(
  "fwd-causal|$fwd --causal"
  "fwd-window|$fwd --window 128,0"
  "fwd-docs|$fwd --mask $logs/docs.safetensors"
  "fwd-random50|$fwd --synthetic-mask random:0.5"
  "fwd-gqa-blocksparse|attention --random 1,4,2,512,512,128 --synthetic-mask blocksparse:0.3:0.5"
  "fwd-d256-blocksparse|attention --random 1,2,2,512,512,256 --synthetic-mask blocksparse:0.3:0.5"
  "fwd-d64-causal|attention --random 1,2,2,512,512,64 --causal"
  "fwd-window-persistent|$fwd --window 128,0 --persistent on --persistent-ctas 2"
  "fwd-docs-persistent|$fwd --mask $logs/docs.safetensors --persistent on --persistent-ctas 3"
  "fwd-64tok-persistent|$fwd --block 64x64 --synthetic-mask random:0.5 --persistent on --persistent-ctas 3"
  "fwd-64tok-shared-kv|attention --random 1,4,2,900,700,128 --block 64x64/2x2 --synthetic-mask random:0.3"
  "fwd-causal-sections|attention --random 2,6,3,400,400,128 --causal --head-section 5"
  "fwd-causal-sections-persistent|attention --random 2,6,3,500,500,128 --causal --head-section 5 --persistent on --persistent-ctas 3"
  "fwd-splitkv|attention --random 1,2,2,64,2048,128 --synthetic-mask random:0.5 --splits 4"
  "bwd-causal|$fwd --backward --causal"
  "bwd-window|attention --random 1,2,2,1100,1100,128 --backward --window 300,0"
  "bwd-window-d64|attention --random 1,2,2,450,500,64 --backward --window 100,40 --diag-offset 30"
  "bwd-docs|$fwd --backward --mask $logs/docs.safetensors"
  "bwd-random50|$fwd --backward --synthetic-mask random:0.5"
  "bwd-gqa-causal-sections|attention --random 2,8,2,1024,1024,128 --backward --causal --head-section 4"
  "bwd-64tok-writer|attention --random 1,2,2,1000,1000,128 --block 64x64 --backward --synthetic-mask random:0.5"
  "bwd-64tok-unpaired|attention --random 1,2,2,1000,1000,128 --block 64x64 --backward --synthetic-mask random:0.5 --paired-keys off"
  "bwd-64tok-paired-d64|attention --random 2,2,2,450,500,64 --block 64x64 --backward --synthetic-mask random:0.5 --paired-keys on"
  "bwd-d64-causal|attention --random 1,2,2,512,512,64 --backward --causal"
  "bwd-d256-causal|attention --random 1,2,2,512,512,256 --backward --causal"
  "decode-paged|decode --random b=2,sq=1,h=8,hkv=2,sk=1000,d=128 --page-size 16"
  "decode-causal|decode --random b=2,sq=4,h=8,hkv=2,sk=700,d=128 --causal"
  "lightning|lightning --random b=2,h=8,n=1,d=96 --steps 3"
  "packer|verify --sanitizer-friendly --packer-only"
)
summary=()
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  [[ -n "${CASES:-}" && ! "$name" =~ $CASES ]] && continue
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
