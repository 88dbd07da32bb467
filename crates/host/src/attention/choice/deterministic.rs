//! The deterministic backward's walk order (docs/backward.md, "Deterministic mode"): where
//! the unmasked walk may start each key tile at its own step.

use fragmask_kernels::attention::backward::{BackwardKernel, BackwardMask, BackwardParams};
use fragmask_kernels::attention::WINDOW_INFINITE;

/// Whether the deterministic window walk of `params` starts key tile n at step
/// `floor(n * steps / tiles)` (`BackwardParams::det_rotate`). Only without a window, where
/// every key tile walks every query step; the CTAs then wait for tiles on both sides of
/// them, so this takes every CTA of one (KV head, batch) plane resident at once: the
/// grid's x (key tiles × CTAs per tile) at most `slots`, the SM count. Elsewhere the ranks
/// point only at tiles launched earlier and need no such bound.
pub fn deterministic_rotation(
    kernel: &BackwardKernel,
    params: &BackwardParams,
    slots: usize,
) -> bool {
    let unbounded = params.window_left >= WINDOW_INFINITE && params.window_right >= WINDOW_INFINITE;
    let per_plane = u64::try_from(params.n_ctas.max(0))
        .unwrap_or(0)
        .saturating_mul(u64::from(kernel.grid_split()))
        .saturating_mul(u64::from(kernel.group_slices().max(1)));
    kernel.deterministic()
        && kernel.mask() == BackwardMask::Window
        && unbounded
        && per_plane >= 1
        && per_plane <= slots as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(n_ctas: i32, left: i32, right: i32) -> BackwardParams {
        BackwardParams {
            n_ctas,
            window_left: left,
            window_right: right,
            ..BackwardParams::default()
        }
    }

    fn kernel(deterministic: bool) -> BackwardKernel {
        BackwardKernel::default_for(128, BackwardMask::Window)
            .expect("head dim 128's window kernel")
            .with_deterministic(deterministic)
    }

    #[test]
    fn rotation_only_for_the_deterministic_unwindowed_walk_of_resident_tiles() {
        let inf = WINDOW_INFINITE;
        assert!(deterministic_rotation(
            &kernel(true),
            &params(128, inf, inf),
            132
        ));
        assert!(deterministic_rotation(
            &kernel(true),
            &params(132, inf, inf),
            132
        ));
        // More tiles than SMs: some CTA could wait for a tile not yet launched.
        assert!(!deterministic_rotation(
            &kernel(true),
            &params(133, inf, inf),
            132
        ));
        // A causal or windowed walk ranks from the top tile down instead.
        assert!(!deterministic_rotation(
            &kernel(true),
            &params(128, inf, 0),
            132
        ));
        assert!(!deterministic_rotation(
            &kernel(true),
            &params(128, 1024, inf),
            132
        ));
        // Not deterministic: nothing to order.
        assert!(!deterministic_rotation(
            &kernel(false),
            &params(128, inf, inf),
            132
        ));
        assert!(!deterministic_rotation(
            &kernel(true),
            &params(0, inf, inf),
            132
        ));
    }
}
