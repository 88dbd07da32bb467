#!/usr/bin/env bash
# O and lse of two builds, byte for byte, over the forward cases of bench/suite/cli_cases.sh: the
# check for a kernel change that must not change any result (an instruction order, a pin, a
# register choice). Sourced (needs device_env.sh's OUT and fm_cli_cases) or run:
#
#   bash bench/suite/same_outputs.sh BIN_A BIN_B      # CASES=REGEX: other cases (default ^fwd)
#
# Prints each differing case and a count; exits 1 if any case differs or fails.
fm_same_outputs() {
  local a=$1 b=$2 dir=$OUT/same-outputs same=0 differ=0 name args v
  source bench/suite/cli_cases.sh
  fm_cli_cases "$a" "$dir"
  for c in "${cases[@]}"; do
    name=${c%%|*}; args=${c#*|}
    [[ "$name" =~ ${CASES:-^fwd} ]] || continue
    for v in a b; do
      local bin=$a; [[ $v == b ]] && bin=$b
      # shellcheck disable=SC2086
      timeout 60 "$bin" $args --out "$dir/$name-$v.safetensors" > "$dir/$name-$v.txt" 2>&1 || echo "$name $v rc=$?"
    done
    if [[ ! -f "$dir/$name-a.safetensors" || ! -f "$dir/$name-b.safetensors" ]]; then
      differ=$((differ + 1)); echo "FAILED $name (no output; see $dir/$name-a.txt, $name-b.txt)"
    elif cmp -s "$dir/$name-a.safetensors" "$dir/$name-b.safetensors"; then
      same=$((same + 1))
    else
      differ=$((differ + 1)); echo "DIFFERS $name"
    fi
  done
  echo "outputs: $same cases equal byte for byte, $differ differ or failed"
  rm -f "$dir"/*.safetensors
  [[ $differ -eq 0 ]]
}
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -uo pipefail
  cd "$(dirname "$0")/../.."
  source bench/suite/device_env.sh
  fm_same_outputs "${1:?BIN_A}" "${2:?BIN_B}"
fi
