#!/usr/bin/env bash
# The outputs of every attention case of bench/suite/cli_cases.sh in both --out-layout values,
# compared: a kernel writing O (or dQ, dK, dV) through the [B, S, H, D] strides must give the
# values of the contiguous one (the CLI writes --out in [B, H, S, D] order either way). The
# forward's O and lse must be equal byte for byte. dQ is summed by reductions in no fixed order
# (and dK, dV too over GQA group slices): a gradient that differs must stay within 2^-6 of its
# largest magnitude (a few bf16 roundings) and is reported with its difference.
#
#   bash bench/suite/layouts.sh [BUILD]        # CASES=REGEX: only the cases whose name matches
#
# Prints one row per case; exits 1 on a difference past the bound or an error.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-target/release}
source bench/suite/device_env.sh
bin=$build/fragmask
dir=$OUT/layouts
source bench/suite/cli_cases.sh
fm_cli_cases "$bin" "$dir"
bad=0
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  [[ "$args" == attention* ]] || continue
  [[ -n "${CASES:-}" && ! "$name" =~ $CASES ]] && continue
  for layout in bhsd bshd; do
    # shellcheck disable=SC2086
    timeout 120 "$bin" $args --out-layout $layout --out "$dir/$name-$layout.safetensors" \
      > "$dir/$name-$layout.txt" 2>&1
    rc=$?
    [[ $rc -ne 0 ]] && break
  done
  if [[ $rc -ne 0 ]]; then
    printf '%-32s ERROR rc=%s %s\n' "$name" "$rc" "$(tail -1 "$dir/$name-$layout.txt")"
    bad=1
    continue
  fi
  row=$(python3 - "$dir/$name-bhsd.safetensors" "$dir/$name-bshd.safetensors" <<'PY'
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n]); data = b[8 + n:]
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in head.items() if k != "__metadata__"}
import numpy as np
def f32(raw, name):   # bf16 bits (the outputs) or f32 (lse)
    if name == "lse":
        return np.frombuffer(raw, dtype="<f4")
    return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
words, ok = [], True
for k in sorted(a):
    if a[k] == b.get(k):
        words.append(f"{k} equal")
        continue
    if k not in b or len(b[k]) != len(a[k]):
        words.append(f"{k} MISSING"); ok = False; continue
    x, y = f32(a[k], k), f32(b[k], k)
    d = float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(x))), 1e-30))
    within = k in ("dq", "dk", "dv") and np.isfinite(d) and d <= 2.0 ** -6   # the forward: equal
    ok &= bool(within)
    words.append(f"{k} {'differs' if within else 'DIFFERS'} {d:.1e}")
print(("ok    " if ok else "FAIL  ") + ", ".join(words))
PY
)
  printf '%-32s %s\n' "$name" "$row"
  [[ "$row" == ok* ]] || bad=1
done
exit $bad
