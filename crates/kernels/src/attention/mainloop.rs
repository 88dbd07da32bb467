//! The forward's main loops, one component per loop: the serial and the overlapped step
//! loop (FlashAttention-3's order: the previous step's PV beside this step's QKᵀ and
//! softmax) with ping-pong of the GEMM-issue turn over the consumer warpgroups, the
//! shared-K/V tile's loops (a warpgroup's view of the pair's union walk, skipping the steps
//! outside its list), and how a partial step meets its mask (docs/architecture.md).

use super::{ConfigError, MaskMode};
use crate::family::template::fill;

/// The largest head dim whose overlapped tile-list loops start S at the mask bias.
const MASK_BIAS_MAX_HEAD_DIM: u32 = 128;

/// The fewest consumer registers a thread needs for the one-block loop to write the next
/// step's bias ahead ([`bias_ahead`]): at 128 (the 64x64/2 tile, two CTAs per SM) its
/// split-KV and persistent kernels spill 20-28 bytes (`tests/attention_compile.rs`), and at
/// 160 (head dim 64's default 192x128 tile, three consumer warpgroups) its list kernel
/// spills 72 bytes (`fragmask attention --head-dim 64 --synthetic-mask random:0.5 --inspect`).
const BIAS_AHEAD_MIN_REGS: u32 = 240;

/// The one-block overlapped loop's pin of the previous PV's wait (`wgmma.wait_group 0`):
/// ptxas places the wait as early as it can, before the softmax when nothing holds it (SASS;
/// 1.036-1.054x the time at head dim 128, bench/results/session-2026-11-28k/pin). The pin is a
/// shared store (`fm_pin_before_wait`) of the max's correction, so the wait follows the row
/// max; the exp2s, the row sums and P's conversion to bf16 are scheduled around it, and ptxas
/// interleaves the 32 conversions with the exp2s, as in FlashAttention-4's SASS. Pinned on the
/// row sum, which needs every exp2 (628050f and before), the conversions ran back to back
/// after the wait. The shared-K/V loop keeps the row sum: the max's pin was 1.003-1.009x its
/// time there (docs/architecture.md, "The PV wait's pin").
const PV_WAIT_PIN: &str =
    "fm_pin_before_wait(FM_SCRATCH, corr[0] + corr[1]);   // the PV wait after the row max (PV_WAIT_PIN)";

/// How a step of a consumer loop meets the mask, `(before QK^T, after S)`: the first
/// k-step's scale-d `s_init`, and the apply on partial steps. The overlapped loops on tile
/// lists start S at the mask words' bias (`fm_mask_bias` of `family::mask`; 1 on partial
/// steps) and bound only the last key block after the GEMM. The window modes have no words;
/// the serial loops keep the select pass after the GEMM (the bias keeps S live across the
/// top of the step, and the head-dim-256 serial kernel then spills), and so do the loops at
/// head dims above [`MASK_BIAS_MAX_HEAD_DIM`]: the 128x80 overlapped kernel at head dim 256
/// took 1.053x the select pass's time with the bias (`fwd.d256.s16384.random50`, 3 ABBA
/// pairs, 1.027-1.068, H100; bench/results/session-2026-11-26h).
fn step_mask(mode: MaskMode, overlap: bool, head_dim: u32) -> (&'static str, &'static str) {
    const NO_BIAS: &str =
        "const int s_init = 0;                               // QK^T overwrites S";
    const APPLY: &str =
        "if (t.partial) fm_apply_mask(s_acc, p, sched, t, bits, frag_row, frag_col);";
    match (mode, overlap && head_dim <= MASK_BIAS_MAX_HEAD_DIM) {
        (MaskMode::Blocks, true) => (
            "const int s_init = fm_mask_bias(s_acc, t, bits);   // masked scores start at -inf; QK^T accumulates onto them",
            "if (t.partial) fm_apply_key_bound(s_acc, p, t, frag_col);   // the words were S's starting value",
        ),
        _ => (NO_BIAS, APPLY),
    }
}

/// Where the overlapped one-block loop writes a step's mask bias, `(declaration, loop top,
/// after P's conversion)`: with the bias ([`step_mask`]), the next step's is written right
/// after this step's P is converted, branch-free (`fm_mask_bias_ahead`), so ptxas can
/// schedule its selects among the softmax's exp2s; written at the top of the step, they ran
/// between P's conversion and the next QK^T's issue, where the tensor cores wait for them.
/// H200, 3 ABBA pairs against the bias at the top: random 50% 0.974, random 10% 0.965,
/// top-k 0.971, block-sparse 10% 0.982 at S = 16384. The shared-K/V loop keeps the bias at
/// the top: written ahead there (also on skipped steps) it took 1.047 / 1.072x the time on
/// write-up 002's 10% / 50% (bench/results/session-2026-11-28l). Otherwise (other masks,
/// head dims above [`MASK_BIAS_MAX_HEAD_DIM`], fewer than [`BIAS_AHEAD_MIN_REGS`]
/// registers) the loop top keeps `mask_bias`.
fn bias_ahead(
    mode: MaskMode,
    head_dim: u32,
    consumer_regs: u32,
    mask_bias: &'static str,
) -> (&'static str, &'static str, &'static str) {
    let ahead = head_dim <= MASK_BIAS_MAX_HEAD_DIM && consumer_regs >= BIAS_AHEAD_MIN_REGS;
    match (mode, ahead) {
        (MaskMode::Blocks, true) => (
            "int s_init_next = 0;                                // the next step's scale-d (fm_mask_bias_ahead)",
            "const int s_init = s_init_next;                     // S holds the step's bias (its words, bits, were written after the last P)\n\
             \x20               (void)bits;",
            "s_init_next = fm_mask_bias_ahead(s_acc, t_next, bits_next);   // the next step's bias beside this step's exp2s",
        ),
        _ => ("", mask_bias, ""),
    }
}

pub(super) fn mainloop(
    overlap: bool,
    pingpong: bool,
    mode: MaskMode,
    warpgroups: u32,
    head_dim: u32,
    consumer_regs: u32,
) -> Result<String, ConfigError> {
    // Tile lists (Blocks): read two steps ahead of their use and the words one step ahead, so
    // no global load is consumed in the iteration that issues it. Reading the words' address
    // (`kv_tile_offsets`) and the key block in the same iteration put two dependent load
    // latencies on every iteration's critical path (SASS: an `R2UR` right after each `LDG`).
    // A step past the end reads nothing (`fm_tile_at`: every slot missing, no words).
    let (tile_first, tile_kk, prefetch_first, prefetch_next, lists_ahead) = match mode {
        MaskMode::Blocks => (
            "t_next",
            "t_next",
            "fm_tile t_next = fm_tile_at(p, sched, 0);\n\
             \x20       fm_mask_bits bits_next = fm_load_mask_bits(p, t_next, ct);\n\
             \x20       fm_tile t_after = fm_tile_at(p, sched, 1);",
            "const fm_mask_bits bits = bits_next;\n\
             \x20           t_next = t_after;\n\
             \x20           bits_next = fm_load_mask_bits(p, t_next, ct);     // words of step kk + 1",
            // After the GEMMs are issued: ptxas moves the (warp-uniform) lists into uniform
            // registers right after their loads, so the load latency overlaps the wait for S
            // here instead of stalling the top of the loop.
            "t_after = fm_tile_at(p, sched, kk + 2);                  // lists of step kk + 2",
        ),
        MaskMode::Window | MaskMode::Documents => (
            "fm_tile_at(p, sched, 0)",
            "fm_tile_at(p, sched, kk)",
            "const fm_mask_bits bits_next = fm_mask_all();",
            "const fm_mask_bits bits = bits_next;",
            "// (window schedule: no tile lists to read ahead)",
        ),
    };
    let body = if overlap {
        MAINLOOP_OVERLAP
    } else {
        MAINLOOP_SERIAL
    };
    // Inter-warpgroup ping-pong (FlashAttention-3's scheduler barrier): named barrier 1 + wg gates
    // warpgroup wg's GEMM issue; the warpgroup before it (round robin) opens it after issuing its own
    // GEMMs, so one warpgroup's softmax runs while another's GEMMs own the tensor cores. Overlapped
    // loop: per warpgroup N+1 syncs and N+1 arrivals (one GEMM issue point per tile plus the last PV).
    // Serial loop: QK^T and PV are gated separately, 2N syncs per warpgroup. The last warpgroup opens
    // warpgroup 0's first turn and skips its very last arrival, which nobody waits for, so every
    // barrier takes as many arrivals as syncs.
    let last = warpgroups.saturating_sub(1);
    let not_last = pingpong_not_last(warpgroups);
    let (init, sync, arrive, arrive_last, arrive_pv) = if pingpong {
        (
            format!("if (wg == {last}) fm_named_arrive<FM_PINGPONG_THREADS>(1);   // ping-pong: consumer warpgroup 0 issues first"),
            "fm_named_sync<FM_PINGPONG_THREADS>(1 + wg);             // ping-pong: my turn to issue GEMMs".to_string(),
            "fm_named_arrive<FM_PINGPONG_THREADS>(FM_PP_NEXT);       // ping-pong: the next warpgroup's turn".to_string(),
            format!("if ({not_last}) fm_named_arrive<FM_PINGPONG_THREADS>(wg + 2);   // ping-pong: balance the last warpgroup's initial arrival (the next of a warpgroup before the last is wg + 1)"),
            format!("if ({not_last} || kk + 1 < sched.num_tiles) fm_named_arrive<FM_PINGPONG_THREADS>(FM_PP_NEXT);   // ping-pong: the next one's turn"),
        )
    } else {
        Default::default()
    };
    // Each loop names the ping-pong points it has: the overlapped one a last arrival,
    // the serial one a separate PV arrival.
    let last_point = if overlap {
        ("PP_ARRIVE_LAST", arrive_last)
    } else {
        ("PP_ARRIVE_PV", arrive_pv)
    };
    let (mask_bias, mask_step) = step_mask(mode, overlap, head_dim);
    let mut values: Vec<(&str, String)> = vec![
        ("MASK_BIAS", mask_bias.to_string()),
        ("MASK_STEP", mask_step.to_string()),
        ("TILE_KK", tile_kk.to_string()),
        ("PREFETCH_FIRST", prefetch_first.to_string()),
        ("PREFETCH_NEXT", prefetch_next.to_string()),
        ("LISTS_AHEAD", lists_ahead.to_string()),
        ("PP_INIT", init),
        ("PP_SYNC", sync),
        ("PP_ARRIVE", arrive),
        (last_point.0, last_point.1),
    ];
    // Both loops have a lone QK^T (the overlapped loop's first step, the serial step); only the
    // overlapped loop peels its first step and its last PV, and the serial one runs the shared
    // step.
    values.push(("QK_STEP", QK_STEP.to_string()));
    if overlap {
        let (decl, top, ahead) = bias_ahead(mode, head_dim, consumer_regs, mask_bias);
        values.push(("MASK_BIAS_DECL", decl.to_string()));
        values.push(("MASK_BIAS_LOOP", top.to_string()));
        values.push(("MASK_BIAS_AHEAD", ahead.to_string()));
        values.push(("OVERLAPPED_SOFTMAX", overlapped_softmax(PV_WAIT_PIN, 16)));
        values.push(("TILE_FIRST", tile_first.to_string()));
        let last_pv = pv_and_release("stage", "phase", Some(("$PP_SYNC", "$PP_ARRIVE_LAST")), 16);
        values.push(("PV_RELEASE_LAST", last_pv));
    } else {
        values.push(("SERIAL_STEP", SERIAL_STEP.to_string()));
        values.push(("PV_RELEASE_STEP", pv_release_step()));
    }
    fill(body, &values).map_err(|e| ConfigError::Layout(e.to_string()))
}

/// The overlapped loops' step once S_kk and the previous step's PV are in flight (both
/// loops, [`MAINLOOP_OVERLAP`] and [`MAINLOOP_SHARED_OVERLAP`]): wait for S, release K, the
/// mask (`$MASK_STEP`), the online softmax, the pin `pv_wait_pin` that holds the PV's wait
/// after it ([`PV_WAIT_PIN`]; the shared-K/V loop pins on the row sum), wait for the PV,
/// release the previous V. `indent` is the loop text's.
fn overlapped_softmax(pv_wait_pin: &str, indent: usize) -> String {
    let lines = [
        "fm_wgmma_wait<1>();                                             // S_kk is ready",
        "fm_fence_array(s_acc);",
        "fm_consumer_release(FM_BAR_K_EMPTY(stage));",
        "$MASK_STEP",
        "fm_online_softmax(s_acc, row_max, row_sum, corr, p.scale_log2);",
        "fm_fence_array(s_acc);",
        pv_wait_pin,
        "fm_wgmma_wait<0>();                                             // the previous step's PV is done",
        "fm_fence_array(o_acc);",
        "fm_fence_array(p_frag);",
        "fm_consumer_release(FM_BAR_V_EMPTY(prev_stage));",
    ];
    let pad = " ".repeat(indent);
    lines.iter().map(|line| format!("{pad}{line}\n")).collect()
}

/// The shared-K/V loop's pin of the previous PV's wait: the row sum, which needs every exp2
/// (the max's pin, [`PV_WAIT_PIN`], was 1.003-1.009x its time there).
const SHARED_PV_WAIT_PIN: &str =
    "fm_pin_before_wait(FM_SCRATCH, row_sum[0] + row_sum[1]);   // the PV wait after the row sum (SHARED_PV_WAIT_PIN)";

/// The end of a step's PV in every loop, once O was moved to the step's max: wait for the
/// stage's V, issue `O += P V`, wait for it, release V. `stage` and `phase` name the step's
/// pipeline stage and barrier phase; `pingpong` the ping-pong points around the issue
/// (placeholders the loop fills, possibly with nothing) or `None` for a loop without them;
/// `indent` the loop text's.
fn pv_and_release(
    stage: &str,
    phase: &str,
    pingpong: Option<(&str, &str)>,
    indent: usize,
) -> String {
    let mut lines = vec![format!("fm_mbar_wait(FM_BAR_V_FULL({stage}), {phase});")];
    lines.extend(pingpong.map(|(sync, _)| sync.to_string()));
    lines.push(format!(
        "fm_pv(o_acc, p_frag, smem_v + {stage} * FM_KV_TILE_BYTES);"
    ));
    lines.extend(pingpong.map(|(_, arrive)| arrive.to_string()));
    lines.extend([
        "fm_wgmma_wait<0>();".to_string(),
        "fm_fence_array(o_acc);".to_string(),
        "fm_fence_array(p_frag);".to_string(),
        format!("fm_consumer_release(FM_BAR_V_EMPTY({stage}));"),
    ]);
    let pad = " ".repeat(indent);
    lines.iter().map(|line| format!("{pad}{line}\n")).collect()
}

/// The serial step's PV end ([`SERIAL_STEP`]): ping-pong points around the issue.
fn pv_release_step() -> String {
    pv_and_release("stage", "phase", Some(("$PP_SYNC", "$PP_ARRIVE_PV")), 16)
}

/// The ping-pong barrier of the consumer warpgroup after `wg`, round robin over
/// `warpgroups`: `1 + (wg + 1) % warpgroups`. Two warpgroups take `2 - wg`, the form their
/// kernels were measured with (their machine code is unchanged by the 3-warpgroup form).
pub(super) fn pingpong_next(warpgroups: u32) -> String {
    if warpgroups == 2 {
        "(2 - wg)".to_string()
    } else {
        format!("(wg == {} ? 1 : wg + 2)", warpgroups.saturating_sub(1))
    }
}

/// "wg is not the last consumer warpgroup", in the form of [`pingpong_next`].
fn pingpong_not_last(warpgroups: u32) -> String {
    if warpgroups == 2 {
        "wg == 0".to_string()
    } else {
        format!("wg != {}", warpgroups.saturating_sub(1))
    }
}

/// The shared-K/V tile's consumer loop ([`MAINLOOP_SHARED_OVERLAP`] or
/// [`MAINLOOP_SHARED_SERIAL`]): the lists read ahead as in [`mainloop`], the words of the
/// warpgroup's own mask tile (thread `lt` of its 128).
pub(super) fn shared_mainloop(overlap: bool, head_dim: u32) -> Result<String, ConfigError> {
    let body = if overlap {
        MAINLOOP_SHARED_OVERLAP
    } else {
        MAINLOOP_SHARED_SERIAL
    };
    // Shared K/V runs on tile lists only.
    let (bias, apply) = step_mask(MaskMode::Blocks, overlap, head_dim);
    let mut values = vec![
        ("SKIP", SHARED_SKIP.to_string()),
        ("MASK_BIAS", bias.to_string()),
        ("MASK_STEP", apply.to_string()),
    ];
    if !overlap {
        // The one-block serial step, without ping-pong (one warpgroup per query block) and
        // with the lists read ahead at the top of the step (SHARED_PREFETCH).
        values.push(("SERIAL_STEP", SERIAL_STEP.to_string()));
        values.push(("QK_STEP", QK_STEP.to_string()));
        values.push(("PV_RELEASE_STEP", pv_release_step()));
        for point in ["PP_SYNC", "PP_ARRIVE", "PP_ARRIVE_PV", "LISTS_AHEAD"] {
            values.push((point, String::new()));
        }
    } else {
        // No ping-pong: one warpgroup per query block.
        let pending = pv_and_release("prev_stage", "prev_phase", None, 24);
        values.push(("PV_RELEASE_PREV", pending));
        values.push((
            "OVERLAPPED_SOFTMAX",
            overlapped_softmax(SHARED_PV_WAIT_PIN, 20),
        ));
        values.push((
            "PV_RELEASE_LAST",
            pv_and_release("stage", "phase", None, 16),
        ));
    }
    let body = fill(body, &values).map_err(|e| ConfigError::Layout(e.to_string()))?;
    Ok([SHARED_PREFETCH, &body].concat())
}

/// The shared-K/V loops' list prefetch: entries of the next two steps, words of the next.
const SHARED_PREFETCH: &str = r#"
            // Tile lists read ahead as in the one-block loops: entries two steps ahead, words one step ahead. The words
            // are the warpgroup's own mask tile's (consumer thread lt of its 128).
            fm_tile t_next = fm_tile_at(p, sched, 0);
            fm_mask_bits bits_next = fm_load_mask_bits(p, t_next, lt);
            fm_tile t_after = fm_tile_at(p, sched, 1);
"#;

/// A step of the union walk that is not this warpgroup's: it waits for the stage's K and V
/// (so its arrivals land in the stage's current phase) and releases them.
const SHARED_SKIP: &str = r#"                    fm_mbar_wait(FM_BAR_K_FULL(stage), phase);
                    fm_consumer_release(FM_BAR_K_EMPTY(stage));
                    fm_mbar_wait(FM_BAR_V_FULL(stage), phase);
                    fm_consumer_release(FM_BAR_V_EMPTY(stage));
                    continue;
"#;

/// Serial shared-K/V loop: a step of the warpgroup's list runs QK^T, softmax, PV as the
/// serial one-block loop; any other step is skipped.
const MAINLOOP_SHARED_SERIAL: &str = r#"            for (int kk = 0; kk < sched.num_tiles; ++kk) {
                const fm_tile t = t_next;
                const fm_mask_bits bits = bits_next;
                t_next = t_after;
                bits_next = fm_load_mask_bits(p, t_next, lt);     // words of step kk + 1
                t_after = fm_tile_at(p, sched, kk + 2);           // lists of step kk + 2
                const int stage = (pipe + kk) % FM_STAGES;
                const unsigned phase = (unsigned)((pipe + kk) / FM_STAGES) & 1u;
                if (t.skip) {
                    // Not this warpgroup's step (warpgroup-uniform): release the stage.
$SKIP                }
$SERIAL_STEP            }
"#;

/// Overlapped shared-K/V loop: as [`MAINLOOP_OVERLAP`], the PV of the warpgroup's previous
/// step runs beside this step's QK^T and softmax while its steps are consecutive; a
/// skipped step first finishes that PV (its V stays held otherwise, and the producer
/// could not refill the stage a later step of this warpgroup needs). Each of the three
/// paths (skip, first step after a finished PV, overlapped step) waits for every wgmma it
/// issued before the paths join: ptxas serialises every wgmma of the kernel when an
/// accumulator may still be in flight where paths join (C7518).
const MAINLOOP_SHARED_OVERLAP: &str = r#"            float corr[2];
            bool pending = false;   // P of pipeline step `prev` waits for its PV
            int prev = 0;
            for (int kk = 0; kk < sched.num_tiles; ++kk) {
                const fm_tile t = t_next;
                const fm_mask_bits bits = bits_next;
                t_next = t_after;
                bits_next = fm_load_mask_bits(p, t_next, lt);     // words of step kk + 1
                const int stage = (pipe + kk) % FM_STAGES;
                const unsigned phase = (unsigned)((pipe + kk) / FM_STAGES) & 1u;
                const int prev_stage = prev % FM_STAGES;
                const unsigned prev_phase = (unsigned)(prev / FM_STAGES) & 1u;
                if (t.skip) {
                    // Not this warpgroup's step (warpgroup-uniform): finish the pending PV, release the stage.
                    t_after = fm_tile_at(p, sched, kk + 2);       // lists of step kk + 2
                    if (pending) {
                        fm_rescale_o(o_acc, corr);
$PV_RELEASE_PREV                        pending = false;
                    }
$SKIP                }
                $MASK_BIAS
                fm_mbar_wait(FM_BAR_K_FULL(stage), phase);
                fm_qk(s_acc, q_operand, smem_k + stage * FM_KV_TILE_BYTES, s_init);          // S_kk = Q K_kk^T (async)
                if (pending) {
                    // O moves to the max after step prev (its softmax's corr), then O += P_prev V_prev (async).
                    fm_rescale_o(o_acc, corr);
                    fm_mbar_wait(FM_BAR_V_FULL(prev_stage), prev_phase);
                    fm_pv(o_acc, p_frag, smem_v + prev_stage * FM_KV_TILE_BYTES);
                    t_after = fm_tile_at(p, sched, kk + 2);       // lists of step kk + 2
$OVERLAPPED_SOFTMAX                } else {
                    // The warpgroup's first step, or the first after a skip: no PV to run beside it.
                    t_after = fm_tile_at(p, sched, kk + 2);       // lists of step kk + 2
                    fm_wgmma_wait<0>();
                    fm_fence_array(s_acc);
                    fm_consumer_release(FM_BAR_K_EMPTY(stage));
                    $MASK_STEP
                    fm_online_softmax(s_acc, row_max, row_sum, corr, p.scale_log2);
                    fm_fence_array(s_acc);
                }
                fm_convert_p(s_acc, p_frag);
                pending = true;
                prev = pipe + kk;
            }
            if (pending) {
                // PV of the warpgroup's last step.
                const int stage = prev % FM_STAGES;
                const unsigned phase = (unsigned)(prev / FM_STAGES) & 1u;
                fm_rescale_o(o_acc, corr);
$PV_RELEASE_LAST            }
"#;

/// Consumer main loop, no overlap: QK^T, wait, softmax, PV, wait.
const MAINLOOP_SERIAL: &str = r#"
            $PREFETCH_FIRST
            $PP_INIT
            for (int kk = 0; kk < sched.num_tiles; ++kk) {
                const fm_tile t = $TILE_KK;
                $PREFETCH_NEXT
                const int stage = (pipe + kk) % FM_STAGES;
                const unsigned phase = (unsigned)((pipe + kk) / FM_STAGES) & 1u;
$SERIAL_STEP            }
"#;

/// A step's S with nothing else in flight, in the serial step and the overlapped loop's
/// first step: QK^T (between the ping-pong points), the lists' read-ahead, the wait for S,
/// K released, the mask.
const QK_STEP: &str = r#"                $MASK_BIAS
                fm_mbar_wait(FM_BAR_K_FULL(stage), phase);
                $PP_SYNC
                fm_qk(s_acc, q_operand, smem_k + stage * FM_KV_TILE_BYTES, s_init);
                $PP_ARRIVE
                $LISTS_AHEAD
                fm_wgmma_wait<0>();
                fm_fence_array(s_acc);
                fm_consumer_release(FM_BAR_K_EMPTY(stage));
                $MASK_STEP"#;

/// One step of the serial loops ([`MAINLOOP_SERIAL`], [`MAINLOOP_SHARED_SERIAL`]) once
/// the step's `t`, `bits`, `stage` and `phase` are known: QK^T, wait, mask, softmax, PV,
/// wait, with the ping-pong points and the lists' read-ahead as placeholders.
const SERIAL_STEP: &str = r#"$QK_STEP
                float corr[2];
                fm_online_softmax(s_acc, row_max, row_sum, corr, p.scale_log2);
                fm_rescale_o(o_acc, corr);
                fm_convert_p(s_acc, p_frag);
$PV_RELEASE_STEP"#;

/// Consumer main loop with FlashAttention-3's intra-warpgroup overlap: the QK^T of
/// tile kk and the PV of tile kk-1 are in flight while the softmax of tile kk runs.
const MAINLOOP_OVERLAP: &str = r#"
            $PREFETCH_FIRST
            float corr[2];
            $MASK_BIAS_DECL
            $PP_INIT
            {
                // Tile 0: QK^T, mask, softmax; its PV is issued in the next iteration.
                const fm_tile t = $TILE_FIRST;
                const int kk = 0;
                (void)kk;
                $PREFETCH_NEXT
                const int stage = pipe % FM_STAGES;
                const unsigned phase = (unsigned)(pipe / FM_STAGES) & 1u;
$QK_STEP
                fm_online_softmax(s_acc, row_max, row_sum, corr, p.scale_log2);
                fm_convert_p(s_acc, p_frag);
                $MASK_BIAS_AHEAD
            }
            for (int kk = 1; kk < sched.num_tiles; ++kk) {
                const fm_tile t = $TILE_KK;
                $PREFETCH_NEXT
                const int stage = (pipe + kk) % FM_STAGES;
                const unsigned phase = (unsigned)((pipe + kk) / FM_STAGES) & 1u;
                const int prev_stage = (pipe + kk - 1) % FM_STAGES;
                const unsigned prev_phase = (unsigned)((pipe + kk - 1) / FM_STAGES) & 1u;
                $MASK_BIAS_LOOP
                fm_mbar_wait(FM_BAR_K_FULL(stage), phase);
                $PP_SYNC
                fm_qk(s_acc, q_operand, smem_k + stage * FM_KV_TILE_BYTES, s_init);          // S_kk = Q K_kk^T (async)
                // O was accumulated against the max before tile kk-1; move it to the max after tile kk-1
                // (corr of the previous softmax) before P_{kk-1} V_{kk-1} is added. FlashAttention-3 order:
                // nothing after the wait<0> below touches O, so the softmax can overlap the PV.
                fm_rescale_o(o_acc, corr);
                fm_mbar_wait(FM_BAR_V_FULL(prev_stage), prev_phase);
                fm_pv(o_acc, p_frag, smem_v + prev_stage * FM_KV_TILE_BYTES);      // O += P_{kk-1} V_{kk-1} (async)
                $PP_ARRIVE
                $LISTS_AHEAD
$OVERLAPPED_SOFTMAX                fm_convert_p(s_acc, p_frag);
                $MASK_BIAS_AHEAD
            }
            {
                // PV of the last tile.
                const int last = pipe + sched.num_tiles - 1;
                const int stage = last % FM_STAGES;
                const unsigned phase = (unsigned)(last / FM_STAGES) & 1u;
                fm_rescale_o(o_acc, corr);
$PV_RELEASE_LAST            }
"#;
