#!/usr/bin/env bash
# 43e012e (.carry/o26): O through its strides only in the kernels that need them. One call on
# the GPU machine: the forward selftest's 'bshd O' cases on every geometry, the Python GPU tests
# of the layouts, compute-sanitizer on small bshd calls, and the bshd forward + reshape timing
# against main before the change (.carry/m24).
set -uo pipefail
source bench/suite/device_env.sh
S=bench/results/session-2026-11-28f/bshd-out
[ -x /tmp/o26/fragmask ] || fm_unxz .carry/o26/fm.xz o26 "$(cat .carry/o26/COMMIT)"
timeout 120 /tmp/o26/fragmask attention --selftest --cases "bshd O" > $OUT/selftest2.txt 2>&1
echo "selftest bshd O rc=$? ${SECONDS}s"; tail -1 $OUT/selftest2.txt; grep -c "^PASS" $OUT/selftest2.txt
grep "^FAIL" $OUT/selftest2.txt | head -5
O=$(fm_install .carry/o26); M=$(fm_install .carry/m24)
(cd crates/python/tests && PYTHONPATH=$O timeout 150 python3 -m unittest \
    -k test_bshd -k test_eager_fast_path -k test_attention_plan_run -k layout \
    -k test_cuda_graph -k test_autograd_function_gradients test_gpu 2>&1 | grep -E "^(Ran|OK|FAILED|ERROR|FAIL)" )
for tool in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool --kernel-name kns=fragmask \
        python3 $S/sanitize_bshd.py $O > $OUT/sanitize2-$tool.txt 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitize2-$tool.txt)"
done
for r in 1 2; do
    timeout 40 python3 $S/bshd_out.py $M main
    timeout 40 python3 $S/bshd_out.py $O bshd-out
done > $OUT/bshd_out2.jsonl 2>&1; cat $OUT/bshd_out2.jsonl
