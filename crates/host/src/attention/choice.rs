//! Which kernel serves a call: the one place the runtime turns a call's head dim, mask
//! and options into a kernel configuration. The forward's plan and launch paths
//! ([`super::AttentionRunner::plan`], [`super::AttentionRunner::prepare`]) and the
//! backward's ([`super::AttentionRunner::prepare_backward`],
//! [`super::AttentionRunner::launch_backward_raw`]) ask here; the configurations
//! themselves and their limits are the kernels crate's (`AttentionKernel`,
//! `BackwardKernel`), and the split count is [`super::splits`]'. The warm-up paths
//! ([`super::AttentionRunner::warm_up`], [`super::AttentionRunner::warm_up_backward`])
//! compile what this module picks, so a warmed call never compiles.

use fragmask_kernels::attention::backward::{BackwardKernel, BackwardMask, DqReduce};
use fragmask_kernels::attention::{ActDtype, AttentionKernel, Geometry, MaskMode};
use fragmask_masks::{PackedMask, TransposedLists};

use super::backward::{transposed_lists, BackwardOptions};
use super::{blockmask, AttentionError, AttentionOptions};

/// The kernel configuration of `geometry` a call with `head_dim`, `mode` and `opts`
/// launches (compiles nothing; refuses unsupported stages / overlap / ping-pong / head dims).
pub fn kernel_config(
    head_dim: usize,
    mode: MaskMode,
    geometry: Geometry,
    opts: &AttentionOptions,
) -> Result<AttentionKernel, AttentionError> {
    let d = u32::try_from(head_dim)
        .map_err(|_| AttentionError::Shape(format!("head dim {head_dim} not supported")))?;
    let default =
        AttentionKernel::default_for_geometry(geometry, d, mode).map_err(AttentionError::Config)?;
    AttentionKernel::new(
        geometry,
        d,
        mode,
        opts.stages.unwrap_or(default.stages()),
        opts.overlap.unwrap_or(default.overlap()),
    )
    .and_then(|k| k.with_pingpong(opts.pingpong.unwrap_or(default.pingpong())))
    .and_then(|k| k.with_dtype(opts.dtype.unwrap_or(ActDtype::Bf16)))
    .map(|k| k.with_lookahead(opts.lookahead.unwrap_or(default.lookahead())))
    .map_err(AttentionError::Config)
}

/// The geometry of a call: `opts.geometry`, else the preferred geometry of its packed
/// mask's tile (`mask`), else the head dim's default. With a mask, `opts.geometry` must have
/// the mask's tile (it may pick another variant of it, such as `64x64/1`).
pub fn call_geometry(
    head_dim: usize,
    mask: Option<&PackedMask>,
    opts: &AttentionOptions,
) -> Result<Geometry, AttentionError> {
    match mask {
        Some(m) => {
            let g = blockmask::mask_geometry(m)?;
            let tile = |g: &Geometry| (g.block_m(), g.block_n(), g.consumer_warpgroups());
            match opts.geometry {
                // The mask fixes the tile; the caller may pick a variant of it (key blocks
                // per step).
                Some(want) if tile(&want) != tile(&g) => Err(AttentionError::MaskLayout {
                    field: "tile",
                    found: format!("{}x{}", g.block_m(), g.block_n()),
                    expected: format!("{}x{}", want.block_m(), want.block_n()),
                }),
                Some(want) => Ok(want),
                None => Ok(g),
            }
        }
        None => Ok(opts.geometry.unwrap_or_else(|| {
            AttentionKernel::default_geometry(u32::try_from(head_dim).unwrap_or(0))
        })),
    }
}

/// The kernel a call launches: [`call_geometry`] then [`kernel_config`].
pub fn call_kernel(
    head_dim: usize,
    mode: MaskMode,
    mask: Option<&PackedMask>,
    opts: &AttentionOptions,
) -> Result<AttentionKernel, AttentionError> {
    let g = call_geometry(head_dim, mask, opts)?;
    kernel_config(head_dim, mode, g, opts)
}

/// The backward configuration of a call: the mask's tile (with its transposed lists, in
/// the default backward accumulator) or the window mode, at `head_dim`, with `opts`.
pub fn backward_kernel(
    head_dim: usize,
    mask: Option<&PackedMask>,
    opts: &BackwardOptions,
) -> Result<BackwardKernel, AttentionError> {
    let d = u32::try_from(head_dim).unwrap_or(0);
    let mode = match mask {
        None => BackwardMask::Window,
        Some(m) => {
            blockmask::mask_geometry(m)?;
            let t = transposed_lists(m)?;
            let acc = m.accumulator();
            let want = TransposedLists::default_accumulator(acc).map_err(AttentionError::Masks)?;
            if *t.accumulator() != want {
                return Err(AttentionError::MaskLayout {
                    field: "transposed accumulator",
                    found: format!(
                        "{} warpgroup(s), swap_ab {}",
                        t.accumulator().warpgroups(),
                        t.accumulator().swap_ab()
                    ),
                    expected: format!("{} warpgroup(s), swap_ab true", want.warpgroups()),
                });
            }
            BackwardMask::Blocks {
                block_m: acc.block_m(),
                block_n: acc.block_n(),
            }
        }
    };
    backward_config(d, mode, opts)
}

/// The backward configuration of `mode` (window, or a mask tile) at head dim `d` with
/// `opts`: the kernels crate's default for the mode, then the options' stages, dtype,
/// determinism and dQ reduction. [`backward_kernel`] checks a call's mask first;
/// `warm_up_backward` compiles the configurations of the modes it is given.
pub fn backward_config(
    d: u32,
    mode: BackwardMask,
    opts: &BackwardOptions,
) -> Result<BackwardKernel, AttentionError> {
    let mut k = BackwardKernel::default_for(d, mode).map_err(AttentionError::Config)?;
    if let Some(stages) = opts.stages {
        k = BackwardKernel::new(k.warpgroups(), d, k.d_split(), stages, mode)
            .map_err(AttentionError::Config)?;
    }
    Ok(k.with_dtype(opts.dtype.unwrap_or(ActDtype::Bf16))
        .map_err(AttentionError::Config)?
        .with_deterministic(opts.deterministic)
        .with_dq_reduce(opts.dq_reduce.unwrap_or(DqReduce::Bulk)))
}

#[cfg(test)]
mod tests {
    use fragmask_masks::DenseMask;

    use super::*;
    use crate::attention::blockmask::pack_for_kernel;

    #[test]
    fn a_mask_fixes_the_tile_and_the_caller_may_pick_its_variant() {
        let dense = DenseMask::new(&[1u8; 128 * 128], &[128, 128]).unwrap();
        let m = pack_for_kernel(&dense, &Geometry::TILE_64X64).unwrap();
        let with = |g: Option<Geometry>| AttentionOptions {
            geometry: g,
            ..AttentionOptions::default()
        };
        assert_eq!(
            call_geometry(128, Some(&m), &with(None)).unwrap(),
            Geometry::TILE_64X64
        );
        assert_eq!(
            call_geometry(128, Some(&m), &with(Some(Geometry::TILE_64X64_SINGLE))).unwrap(),
            Geometry::TILE_64X64_SINGLE
        );
        let e = call_geometry(128, Some(&m), &with(Some(Geometry::TILE_128X128))).unwrap_err();
        assert!(e.to_string().contains("tile = 64x64"), "{e}");
        // Without a mask: the head dim's default tile.
        for (d, g) in [
            (64, Geometry::TILE_192X128),
            (128, Geometry::TILE_128X128),
            (256, Geometry::TILE_128X80),
        ] {
            assert_eq!(call_geometry(d, None, &with(None)).unwrap(), g);
        }
    }
}
