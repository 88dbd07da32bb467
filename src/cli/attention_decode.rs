//! `fragmask attention --random ... --bench` on a decode shape: one query row against the
//! keys, no mask, window or causal bound, no forward-kernel flag. The attention entry
//! point sends it to the split-KV decode kernel (`fragmask decode`'s, its splits planned
//! from the SM count), which reads K and V as head-major caches `[B, Hkv, Sk, D]`, the
//! attention layout, and packs the H/Hkv query heads of a KV head into one CTA's rows:
//! the forward's 128-row tiles would read each KV head once per query head. `--splits`
//! (or any tile flag) keeps the forward.

use fragmask::check::decode::bench::{bench, copy_roof, BenchExtra};
use fragmask::host::attention::{AttentionShape, Window};
use fragmask::host::decode::{DecodeRunner, DecodeShape};
use fragmask::host::{Compiler, Device};
use fragmask::kernels::family::dtype::ActDtype;

use super::{ForwardArgs, OutLayout, Source, Validated};
use crate::cli::CmdResult;

/// Whether this forward is a decode shape the decode kernel serves as it is.
pub(super) fn serves(args: &ForwardArgs, inputs: &Validated, timed: bool, outputs: bool) -> bool {
    timed
        && !outputs
        && !args.json
        && args.iters > 0
        && inputs.shape.seqlen_q == 1
        && inputs.mask.is_none()
        && inputs.window == Window::NONE
        && matches!(inputs.source, Source::Random(..))
        && args.splits.is_none()
        && args.block.is_none()
        && args.stages.is_none()
        && !args.no_overlap
        && args.pingpong.is_none()
        && args.lookahead.is_none()
        && args.lazy_rescale.is_none()
        && args.q_registers.is_none()
        && args.out_layout == OutLayout::Bhsd
}

/// Times the decode kernel on `shape` (random inputs, rotated over 1 GiB of caches) and
/// prints the forward's report lines with the copy roof.
pub(super) fn bench_decode(device: &Device, args: &ForwardArgs, s: &AttentionShape) -> CmdResult {
    let shape = DecodeShape::from_attention(
        s.batch,
        s.heads,
        s.kv_heads,
        s.seqlen_k,
        s.head_dim,
        ActDtype::Bf16,
        false,
        args.scale.map(f64::from),
    );
    let e = |e: fragmask::host::decode::DecodeError| e.to_string();
    let runner = DecodeRunner::for_shape(device, &Compiler::new(), &shape).map_err(e)?;
    let plan = runner.plan(shape, s.seqlen_k, None).map_err(e)?;
    let timing = super::bench_timing(args);
    let (_, roof_gbps) = copy_roof(&runner, 1 << 30, timing).map_err(e)?;
    let row = bench(
        &runner,
        &plan,
        false,
        timing,
        1 << 30,
        BenchExtra::default(),
    )
    .map_err(e)?;
    println!("device: {}", device.name());
    println!(
        "shape B={} H={} Hkv={} Sq={} Sk={} D={}",
        s.batch, s.heads, s.kv_heads, s.seqlen_q, s.seqlen_k, s.head_dim
    );
    println!(
        "kernel: split-KV decode (a decode shape; fragmask decode's kernel), {} splits",
        plan.num_splits
    );
    println!(
        "median {:.4} ms ({} iters): {:.0} GB/s, {:.3} of the device-copy roof ({roof_gbps:.0} GB/s); \
         in a CUDA graph {:.4} ms",
        row.ms,
        args.iters,
        row.gbps,
        row.gbps / roof_gbps,
        row.graph_ms
    );
    Ok(std::process::ExitCode::SUCCESS)
}
