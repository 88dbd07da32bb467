#!/usr/bin/env bash
# O in the caller's strides (b4478f4, .carry/o25) against main before it (.carry/m24: the
# forward kernels are the same as 7a203a2's), on the GPU machine:
#   bash validate.sh 1   forward selftest (the 'bshd O' cases on every geometry), the Python
#                        GPU tests of the layouts, compute-sanitizer on small bshd calls
#   bash validate.sh 2   A/B of every forward row, and the bshd forward + reshape timing
set -uo pipefail
source bench/suite/device_env.sh
S=bench/results/session-2026-11-28f/bshd-out
[ -x /tmp/o25/fragmask ] || fm_unxz .carry/o25/fm.xz o25 "$(cat .carry/o25/COMMIT)"
[ -x /tmp/m24/fragmask ] || fm_unxz .carry/m24/fm.xz m24 "$(cat .carry/m24/COMMIT)"
case "${1:?call 1 or 2}" in
1)
    timeout 220 /tmp/o25/fragmask attention --selftest > $OUT/selftest.txt 2>&1
    echo "selftest rc=$? ${SECONDS}s"; tail -1 $OUT/selftest.txt
    grep -c "bshd O" $OUT/selftest.txt; grep "^FAIL" $OUT/selftest.txt | head -5
    O=$(fm_install .carry/o25)
    (cd crates/python/tests && PYTHONPATH=$O timeout 240 python3 -m unittest \
        -k test_bshd -k test_eager_fast_path -k test_attention_plan_run -k layout \
        -k test_torch_compile_fullgraph_of_forward_and_backward -k test_cuda_graph \
        -k test_autograd_function_gradients test_gpu 2>&1 | grep -E "^(Ran|OK|FAILED|ERROR|FAIL)" )
    for tool in memcheck racecheck synccheck; do
        timeout 120 compute-sanitizer --tool $tool --kernel-name kns=fragmask \
            python3 $S/sanitize_bshd.py $O > $OUT/sanitize-$tool.txt 2>&1
        echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitize-$tool.txt)"
        grep "^bshd O" $OUT/sanitize-$tool.txt
    done
    ;;
2)
    M=$(fm_install .carry/m24); O=$(fm_install .carry/o25)
    for r in 1 2; do
        timeout 60 python3 $S/bshd_out.py $M main
        timeout 60 python3 $S/bshd_out.py $O bshd-out
    done > $OUT/bshd_out.jsonl 2>&1; cat $OUT/bshd_out.jsonl
    timeout 420 python3 bench/suite/run.py --ab /tmp/m24 /tmp/o25 --interleave --rounds 2 \
        --systems fragmask_cli --only '^fwd[.]' --out $OUT/ab 2>&1 | grep "^|"
    ;;
esac
