//! The dQ epilogue component of the backward kernel: how a step's dQ chunks reach the f32
//! accumulator in each [`DqReduce`] mode (row-major atomics, fragment-order atomics, TMA
//! bulk reductions issued by the consumers or by the writer warp), what runs before the dS
//! barrier and at the CTA's end, and the postprocess that casts the accumulator
//! (docs/backward.md, "dQ by TMA bulk reduction").

use super::config::{BackwardKernel, DqReduce, DQ_CHUNK_BYTES};
use super::template::{POST_FRAGMENT, POST_READ_PAIRS, POST_READ_QUADS, POST_ROWS};
use crate::family::fragment::FragmentMap;

/// The step's dQ chunks in the register-order accumulator (`DqReduce::Bulk` and
/// `DqReduce::FragmentAtomics`).
const DQ_STEP_CHUNKS: &str = "// [B, H, Sq_pad/64, D/64] chunks of FM_DQ_ROWS x 64 f32 in register order; the step's first row block
                                 float* dq_step = p.dq_accum + (bh * (p.seqlen_q_pad / FM_DQ_ROWS) + (long long)t.m * FM_DQ_HALVES) * (long long)(FM_D / 64) * (FM_DQ_ROWS * 64);";

/// A chunk's staging store (bulk reductions): pair j of thread lt at `[j][lt]` of the
/// buffer `buf`, then the proxy fence that orders the stores before the bulk copy's reads.
const DQ_STAGE_PAIRS: &str = r#"#pragma unroll
                    for (int j = 0; j < $DQ_VALUES / 2; ++j) {
                        // pair j of thread lt at [j][lt]: consecutive threads, consecutive 8 bytes (no bank conflict)
                        asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(buf + (unsigned)(j * 128 + lt) * 8u),
                                     "f"(dq_acc[2 * j]), "f"(dq_acc[2 * j + 1]) : "memory");
                    }
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // generic stores -> the bulk copy's reads"#;

/// The writer warp's store of a chunk (`BackwardKernel::with_dq_writer`): wait until the
/// writer has read this warpgroup's staging buffer, store the chunk in register order, and
/// arrive (no wait) on the barrier the writer waits on.
const DQ_WRITER_STORE: &str = r#"                    const int b = cw * FM_DQ_BUFS + u;   // the chunk's staging buffer: chunk u of this warpgroup
                    const unsigned buf = smem_dqs + (unsigned)b * $DQ_CHUNK_BYTESu;
                    fm_named_sync<128 + 32>(FM_BAR_DQ_EMPTY + b);   // the writer has read this buffer's previous chunk
$DQ_STAGE_PAIRS
                    fm_named_arrive<128 + 32>(FM_BAR_DQ_FULL + b);   // the chunk is staged"#;

/// The writer warp (warp 1 of the producer warpgroup; FlashAttention-3's `dQaccum_store`):
/// it walks the CTA's steps as the producer warp does; per step it hands every staging
/// buffer back once its previous bulk read is complete, then issues the reduction of each
/// buffer `b` (chunk `u = b % FM_DQ_BUFS` of warpgroup `b / FM_DQ_BUFS`: the step's item
/// `wg + FM_WG * u`, as the consumers number them) as the chunk arrives. In the
/// deterministic mode it also takes the dQ turns, so the consumers never wait on global
/// memory for them: once the buffers are handed back it waits for the step before's
/// reductions to complete and passes that step's turn on (one release add: this thread
/// issued and waited for every reduction it covers), then computes the step's rank
/// (warp-wide) and lane 0 waits for the turn before the step's first reduction.
const DQ_WRITER_WARP: &str = r#"        } else if (threadIdx.x < 64u) {
            // ---------------- dQ writer: warp 1 issues the consumers' bulk dQ reductions ----------------
            const int lane = (int)threadIdx.x - 32;
            const int d0 = split * FM_DKV;   // first dQ column of this CTA
#if FM_DETERMINISTIC
            long long det_prev = -1;   // the semaphore of the step whose turn this CTA holds; -1: none
#endif
            for (int gi = g0; gi < g1; ++gi) {
                const int head = kv_head * group + gi;
                const long long bh = (long long)batch * p.heads + head;
                const fm_schedule sched = fm_make_schedule(p, batch, head, n_cta$SCHEDULE_ITEM);
                for (int kk = 0; kk < sched.num_steps; ++kk) {
                    const fm_step t = fm_step_at(p, sched, batch, head, kk);
                    $DQ_WRITER_ROWS
                    if (lane == 0) fm_bulk_wait_read0();   // every staging buffer's previous chunk has been read
                    __syncwarp();
#pragma unroll
                    for (int b = 0; b < FM_WG * FM_DQ_BUFS; ++b) fm_named_arrive<128 + 32>(FM_BAR_DQ_EMPTY + b);
#if FM_DETERMINISTIC
                    // The step before's reductions complete: its turn passes on (the consumers stage this step meanwhile).
                    if (lane == 0 && det_prev >= 0) {
                        fm_bulk_wait0();
                        fm_red_release_add(p.sem + det_prev, 1);
                    }
                    const long long sem_index = (bh * (p.seqlen_q_pad / FM_STEP_M) + t.m) * FM_DSPLIT + split;   // this step's dQ turn
                    const int rank = fm_step_rank(p, sched, batch, head, n_cta, t);   // warp-wide
                    // The acquire orders this step's reductions after the ones the turn's release add followed.
                    if (lane == 0) while (fm_ld_acquire(p.sem + sem_index) != rank) { }
                    __syncwarp();
                    det_prev = sem_index;
#endif
#pragma unroll
                    for (int b = 0; b < FM_WG * FM_DQ_BUFS; ++b) {
                        // buffer b: chunk u of warpgroup w, the step's item w + FM_WG * u (column chunk c of query half qh)
                        const int item = b / FM_DQ_BUFS + FM_WG * (b % FM_DQ_BUFS);
                        const int c = FM_DQ_HALVES == 1 ? item : item % (FM_DKV / 64);
                        const int qh = FM_DQ_HALVES == 1 ? 0 : item / (FM_DKV / 64);
                        const int col0 = d0 + 64 * c;
                        fm_named_sync<128 + 32>(FM_BAR_DQ_FULL + b);
                        if (lane == 0)
                            fm_bulk_reduce_add(dq_step + (long long)(qh * (FM_D / 64) + col0 / 64) * (FM_DQ_ROWS * 64),
                                               smem_dqs + (unsigned)b * $DQ_CHUNK_BYTESu, $DQ_CHUNK_BYTESu);
                    }
                }
            }
#if FM_DETERMINISTIC
            if (lane == 0 && det_prev >= 0) {   // the walk's last step
                fm_bulk_wait0();
                fm_red_release_add(p.sem + det_prev, 1);
            }
#endif
            if (lane == 0) fm_bulk_wait_read0();   // no bulk read of the staging buffers outlives the CTA
"#;

/// The dQ epilogue of each reduction mode: the store of a chunk, what runs before the dS
/// barrier, the drain of bulk reductions, and the postprocess that reads the accumulator.
pub(super) fn dq_pieces(k: &BackwardKernel, dq: &FragmentMap) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("DQ_BUFS", k.dq_buffers().to_string()),
        ("DQ_CHUNK_BYTES", DQ_CHUNK_BYTES.to_string()),
        ("DQ_WRITER", u32::from(k.dq_writer()).to_string()),
    ];
    if !k.dq_writer() {
        v.push(("DQ_WRITER_WARP", String::new()));
    }
    match k.dq_reduce() {
        DqReduce::Atomics => {
            v.push(("VALUE_ROW_DQ", dq.value_row_expr("i")));
            v.push(("VALUE_COL_DQ", dq.value_col_expr("i")));
            v.push((
                "DQ_ROWS",
                "float* dq_rows = p.dq_accum + (bh * p.seqlen_q_pad + (long long)t.m * FM_STEP_M) * FM_D;   // [B, H, Sq_pad, D]".to_string(),
            ));
            v.push((
                "DQ_STORE",
                "#pragma unroll
                                     for (int i = 0; i < $DQ_VALUES; i += 2) {
                                         // $LAYOUT_DQ value mode: row dq_row + $VALUE_ROW_DQ of query half qh, columns dq_col + $VALUE_COL_DQ (+1, checked adjacent)
                                         fm_red_add2(dq_rows + (long long)(FM_DQ_ROWS * qh + dq_row + $VALUE_ROW_DQ) * FM_D + col0 + dq_col + $VALUE_COL_DQ, dq_acc[i], dq_acc[i + 1]);
                                     }"
                    .to_string(),
            ));
            v.push(("DQ_BEFORE_SYNC", String::new()));
            v.push(("DQ_DRAIN", String::new()));
            v.push(("DQ_DRAIN_READ", String::new()));
            v.push(("POSTPROCESS", POST_ROWS.to_string()));
        }
        DqReduce::FragmentAtomics => {
            v.push(("VALUE_ROW_DQ_2J", dq.value_row_expr("(2 * j)")));
            v.push(("VALUE_COL_DQ_2J", dq.value_col_expr("(2 * j)")));
            v.push(("DQ_ROWS", DQ_STEP_CHUNKS.to_string()));
            v.push((
                "DQ_STORE",
                r#"                    float* dq_chunk = dq_step + (long long)(qh * (FM_D / 64) + col0 / 64) * (FM_DQ_ROWS * 64);
#pragma unroll
                    for (int q = 0; q < $DQ_VALUES / 4; ++q)
                        // values 4q..4q+3 of thread lt at [q][lt] (register order): a warp adds 512 contiguous bytes (16-byte aligned: chunks are 16 KiB)
                        fm_red_add4(dq_chunk + (q * 128 + lt) * 4, dq_acc[4 * q], dq_acc[4 * q + 1], dq_acc[4 * q + 2], dq_acc[4 * q + 3]);"#
                    .to_string(),
            ));
            v.push(("DQ_BEFORE_SYNC", String::new()));
            v.push(("DQ_DRAIN", String::new()));
            v.push(("DQ_DRAIN_READ", String::new()));
            v.push(("POSTPROCESS", POST_FRAGMENT.to_string()));
            v.push(("POST_READ", POST_READ_QUADS.to_string()));
            v.push((
                "POST_CHUNK_ORDER",
                "[8 quads q][128 threads lt][4]: values 4q..4q+3 of thread lt".to_string(),
            ));
        }
        DqReduce::Bulk if k.dq_writer() => {
            v.push(("VALUE_ROW_DQ_2J", dq.value_row_expr("(2 * j)")));
            v.push(("VALUE_COL_DQ_2J", dq.value_col_expr("(2 * j)")));
            // The writer addresses the chunks; the consumers only stage them.
            v.push(("DQ_ROWS", String::new()));
            v.push(("DQ_WRITER_ROWS", DQ_STEP_CHUNKS.to_string()));
            v.push(("DQ_STAGE_PAIRS", DQ_STAGE_PAIRS.to_string()));
            v.push(("DQ_STORE", DQ_WRITER_STORE.to_string()));
            // The writer warp waits for the bulk reads; the consumers never do.
            v.push(("DQ_BEFORE_SYNC", String::new()));
            v.push(("DQ_DRAIN", String::new()));
            v.push(("DQ_DRAIN_READ", String::new()));
            v.push(("DQ_WRITER_WARP", DQ_WRITER_WARP.to_string()));
            v.extend(bulk_postprocess());
        }
        DqReduce::Bulk => {
            v.push(("VALUE_ROW_DQ_2J", dq.value_row_expr("(2 * j)")));
            v.push(("VALUE_COL_DQ_2J", dq.value_col_expr("(2 * j)")));
            v.push(("DQ_ROWS", DQ_STEP_CHUNKS.to_string()));
            v.push(("DQ_STAGE_PAIRS", DQ_STAGE_PAIRS.to_string()));
            v.push((
                "DQ_STORE",
                r#"                    const int use = u;   // this warpgroup's chunk index in the step (c = wg + FM_WG * u)
                    const unsigned buf = smem_dqs + (unsigned)(cw * FM_DQ_BUFS + use % FM_DQ_BUFS) * $DQ_CHUNK_BYTESu;
                    if (use >= FM_DQ_BUFS) {   // buffer reused within the step: wait for its previous bulk read
                        if (lt == 0) fm_bulk_wait_read0();
                        fm_named_sync<128>(3 + cw);
                    }
$DQ_STAGE_PAIRS
                    fm_named_sync<128>(3 + cw);
                    if (lt == 0) fm_bulk_reduce_add(dq_step + (long long)(qh * (FM_D / 64) + col0 / 64) * (FM_DQ_ROWS * 64), buf, $DQ_CHUNK_BYTESu);"#
                    .to_string(),
            ));
            v.push((
                "DQ_BEFORE_SYNC",
                "if (lt == 0) fm_bulk_wait_read0();   // the staging buffers' previous bulk reads are done before they are rewritten".to_string(),
            ));
            v.push(("DQ_DRAIN", "if (lt == 0) fm_bulk_wait0();".to_string()));
            // Before the CTA exits only the staging buffers' reads must be done (CUTLASS's TMA store tail);
            // the reductions' global writes complete with the grid, before the postprocess's griddepcontrol.wait.
            v.push((
                "DQ_DRAIN_READ",
                "if (lt == 0) fm_bulk_wait_read0();".to_string(),
            ));
            v.extend(bulk_postprocess());
        }
    }
    v
}

/// The bulk reductions' postprocess: the fragment-order read of each chunk in pairs.
fn bulk_postprocess() -> [(&'static str, String); 3] {
    [
        ("POSTPROCESS", POST_FRAGMENT.to_string()),
        ("POST_READ", POST_READ_PAIRS.to_string()),
        (
            "POST_CHUNK_ORDER",
            "[16 pairs j][128 threads lt][2]: values 2j, 2j+1 of thread lt".to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With strided gradients every path that writes one goes through the caller's strides:
    /// dQ in both postprocesses, dK and dV in the staged and unstaged epilogues and the group
    /// slices' kv postprocess; the f32 accumulators stay contiguous. Without, no stride is read.
    #[test]
    fn strided_gradient_writes_go_through_the_caller_s_strides_and_the_others_are_contiguous() {
        use super::super::config::SWEEP_MASKS;
        for d in [64, 128, 256] {
            for mask in SWEEP_MASKS {
                let k = BackwardKernel::default_for(d, mask).unwrap();
                let mut kernels = vec![
                    k.with_dq_reduce(DqReduce::Atomics),
                    k.with_dq_reduce(DqReduce::FragmentAtomics),
                    k.with_dq_reduce(DqReduce::Bulk)
                        .with_fitting_stages()
                        .unwrap(),
                ];
                if let Ok(gs) = k.with_group_slices(2) {
                    kernels.push(gs);
                }
                for k in kernels {
                    let contiguous = k.source().unwrap();
                    let label = k.label();
                    assert!(
                        !contiguous.contains("p.dq_stride") && !contiguous.contains("p.dkv_stride"),
                        "{label}"
                    );
                    assert!(
                        contiguous.contains("p.dq + (bh * p.seqlen_q + row) * FM_D"),
                        "{label}"
                    );
                    let k = k.with_strided_grads(true);
                    let src = k.source().unwrap();
                    assert!(
                        src.contains("p.dq + batch * p.dq_stride_b + head * p.dq_stride_h + row * p.dq_stride_s"),
                        "{label}: dQ's postprocess"
                    );
                    assert!(!src.contains("p.dq + (bh * p.seqlen_q"), "{label}");
                    if k.group_slices() > 1 {
                        assert!(
                            src.contains("row * p.dkv_stride_s"),
                            "{label}: kv postprocess"
                        );
                        assert!(src.contains("fm_red_add2(p.dk_accum + off"), "{label}");
                    } else {
                        assert!(
                            src.contains("kv_out0 + (long long)grow * p.dkv_stride_s + col"),
                            "{label}: staged dK/dV"
                        );
                        assert!(
                            src.contains("kv_out0 + (long long)key * p.dkv_stride_s + col"),
                            "{label}: unstaged dK/dV"
                        );
                        assert!(
                            contiguous.contains("(kv_row0 + key) * FM_D + col")
                                && contiguous.contains("(kv_row0 + grow) * FM_D + col"),
                            "{label}: contiguous dK/dV"
                        );
                    }
                    assert!(!src.contains("p.dk + (kv_row0"), "{label}");
                }
            }
        }
    }

    /// Each reduction into the register-order accumulator is read back by the postprocess
    /// in its own order: the bulk path's staged pairs `[j][lt]`, the atomics' quads `[q][lt]`.
    #[test]
    fn each_register_order_reduction_gets_the_postprocess_of_its_own_order() {
        for d in [64, 128, 256] {
            for mask in super::super::config::SWEEP_MASKS {
                let k = BackwardKernel::default_for(d, mask).unwrap();
                let bulk = k
                    .with_dq_reduce(DqReduce::Bulk)
                    .with_fitting_stages()
                    .unwrap()
                    .source()
                    .unwrap();
                assert!(
                    bulk.contains("fm_bulk_reduce_add(dq_step") && !bulk.contains("fm_red_add4(dq")
                );
                assert!(bulk.contains("src[j * 128 + lt]") && !bulk.contains("src[q * 128 + lt]"));
                let quads = k
                    .with_dq_reduce(DqReduce::FragmentAtomics)
                    .source()
                    .unwrap();
                assert!(quads.contains("fm_red_add4(dq_chunk + (q * 128 + lt) * 4"));
                assert!(!quads.contains("fm_bulk_reduce_add(dq_step"));
                assert!(
                    quads.contains("src[q * 128 + lt]") && !quads.contains("src[j * 128 + lt]")
                );
                assert!(!quads.contains('$'), "{k:?}");
            }
        }
    }
}
