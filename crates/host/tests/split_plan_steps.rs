//! The key steps the split-KV planner weighs (`split_plan_steps`): a host-packed mask's
//! own longest row, and every key block for a mask whose lists are on the device only
//! (`AttentionOptions::mask_on_device_only`, a GPU pack not read back, whose host lists are
//! a placeholder of its geometry with no tile).

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

use fragmask_host::attention::blockmask::pack_for_kernel;
use fragmask_host::attention::choice::call_kernel;
use fragmask_host::attention::splits::max_steps_of_mask;
use fragmask_host::attention::{split_plan_steps, AttentionOptions, AttentionShape};
use fragmask_kernels::attention::{Geometry, MaskMode};
use fragmask_masks::{DenseMask, PackedMask};
use proptest::prelude::*;

/// The placeholder a GPU pack registers: `mask`'s geometry, no partial and no full tile.
fn placeholder(mask: &PackedMask) -> PackedMask {
    PackedMask::geometry_only(mask.accumulator(), mask.encoding(), mask.shape()).unwrap()
}

proptest! {
    #![proptest_config(proptest_ci::config(24))]

    /// Post-condition: with its lists on the device only, a mask's split plan weighs every
    /// key block of a row (the most any mask of its geometry can visit, never less than its
    /// own longest row); with host lists, its own longest row, however sparse.
    #[test]
    fn device_only_masks_plan_splits_over_every_key_block(
        sq in 1usize..400, sk in 1usize..1500, keep_keys in 1usize..1500, seed in any::<u64>(),
    ) {
        let keep_keys = keep_keys.min(sk);
        // Each query row sees a pseudo-random half of the first `keep_keys` keys.
        let bytes: Vec<u8> = (0..sq * sk)
            .map(|i| {
                let (q, k) = (i / sk, i % sk);
                let h = ((q as u64 * 0x9e37_79b9) ^ (k as u64 * 0x85eb_ca6b) ^ seed).wrapping_mul(0xc2b2_ae35);
                u8::from(k < keep_keys && (h >> 29) & 1 == 1)
            })
            .collect();
        let dense = DenseMask::new(&bytes, &[sq, sk]).unwrap();
        let mask = pack_for_kernel(&dense, &Geometry::TILE_128X128).unwrap();
        let shape = AttentionShape::from_tensors([1, 2, sq, 128], [1, 2, sk, 128], [1, 2, sk, 128]).unwrap();
        let host = AttentionOptions::default();
        let kernel = call_kernel(128, MaskMode::Blocks, Some(&mask), &host).unwrap();
        let g = kernel.geometry();
        let every = sk.div_ceil(g.block_n() as usize).div_ceil(g.step_blocks() as usize);
        let device_only = AttentionOptions { mask_on_device_only: true, ..host };

        let own = split_plan_steps(&kernel, &shape, Some(&mask), &host);
        prop_assert_eq!(own, max_steps_of_mask(&mask, &g));
        prop_assert!(own <= every);
        let stand_in = placeholder(&mask);
        prop_assert_eq!(split_plan_steps(&kernel, &shape, Some(&stand_in), &host), 0);
        prop_assert_eq!(split_plan_steps(&kernel, &shape, Some(&stand_in), &device_only), every);
        prop_assert_eq!(split_plan_steps(&kernel, &shape, None, &host), every);
    }
}
