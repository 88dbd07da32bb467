#!/usr/bin/env bash
# Call 6: HEAD (k40d, after the TileOrder refactor of the plan and the CLI flag): the Python
# GPU packer, deterministic and autograd tests, the backward selftest's "device count" cases,
# and the CLI's --tile-order on a synthetic mask (on, off, and refused with --deterministic).
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k40d/fm.xz N "$(cat .carry/k40d/COMMIT)" && cp .carry/k40d/*.whl /tmp/N/
site=$(fm_install /tmp/N)
F=/tmp/N/fragmask
(cd crates/python/tests && PYTHONPATH=$site timeout 200 python3 -m unittest test_gpu.GpuPackerTests test_gpu.DeterministicBackwardTests test_gpu.AutogradTests) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(grep -E '^Ran' "$OUT/pytests.txt") $(tail -1 "$OUT/pytests.txt")" | tee "$OUT/summary.txt"
timeout 90 $F attention --backward --selftest --cases "device count" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee -a "$OUT/summary.txt"
for t in on off; do
  timeout 60 $F attention --random 1,4,4,4096,4096,128 --synthetic-mask blocksparse:0.1:0.5 --backward --bench --tile-order $t > "$OUT/cli-$t.txt" 2>&1
  echo "cli --tile-order $t rc=$? $(grep -iE 'ms' "$OUT/cli-$t.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
timeout 60 $F attention --random 1,4,4,4096,4096,128 --synthetic-mask blocksparse:0.1:0.5 --backward --deterministic --tile-order on > "$OUT/cli-det.txt" 2>&1
echo "cli det --tile-order on rc=$? $(tail -1 "$OUT/cli-det.txt")" | tee -a "$OUT/summary.txt"
grep -E "^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
