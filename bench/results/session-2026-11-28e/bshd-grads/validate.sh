#!/usr/bin/env bash
# The bshd-grads branch's validation on the GPU machine, in three calls (each under 10 min):
#   bash validate.sh 1   backward selftest + sanitizers on the backward cases (binary .carry/g24)
#   bash validate.sh 2   the Python GPU tests of the backward (wheel .carry/g24) and the bshd
#                        step's time with .grad accumulation, main (.carry/m24) against the branch
#   bash validate.sh 3   A/B of every backward row, main (.carry/m24) against the branch
# .carry/g24 and .carry/m24 hold fm.xz (the binary), the wheel and COMMIT (build them from the
# branch and from main: cargo build --release; maturin build --release -m crates/python/Cargo.toml).
set -uo pipefail
source bench/suite/device_env.sh
S=bench/results/session-2026-11-28e/bshd-grads
[ -x /tmp/g24/fragmask ] || fm_unxz .carry/g24/fm.xz g24 "$(cat .carry/g24/COMMIT)"
[ -x /tmp/m24/fragmask ] || fm_unxz .carry/m24/fm.xz m24 "$(cat .carry/m24/COMMIT)"
case "${1:?call 1, 2 or 3}" in
1)
    timeout 240 /tmp/g24/fragmask attention --selftest --backward > $OUT/selftest.txt 2>&1
    echo "selftest rc=$? ${SECONDS}s"; tail -2 $OUT/selftest.txt
    CASES='^bwd-' timeout 300 bash bench/suite/sanitize.sh /tmp/g24 2>&1 | tail -36
    ;;
2)
    G=$(fm_install .carry/g24); M=$(fm_install .carry/m24)
    (cd crates/python/tests && PYTHONPATH=$G timeout 300 python3 -m unittest \
        -k test_bshd_gradients -k test_gradients_match_fp32 -k test_autograd_function_gradients \
        -k test_opcheck_of_the_backward_op -k test_torch_compile_fullgraph_of_forward_and_backward \
        -k test_cuda_graph_captures_forward_and_backward -k GradientLayout -k DoutView \
        test_torch test_gpu 2>&1 | grep -E "^(Ran|OK|FAILED|ERROR|FAIL)" )
    for r in 1 2; do
        timeout 60 python3 $S/bshd_accumulate.py $M main
        timeout 60 python3 $S/bshd_accumulate.py $G bshd-grads
    done > $OUT/accumulate.jsonl 2>&1; cat $OUT/accumulate.jsonl
    ;;
3)
    timeout 560 python3 bench/suite/run.py --ab /tmp/m24 /tmp/g24 --interleave --rounds 2 \
        --systems fragmask_cli --only '^bwd[.]' --out $OUT/ab 2>&1 | grep "^|"
    ;;
esac
