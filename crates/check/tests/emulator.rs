//! The CPU emulator runs the generated apply programs for every thread: for random
//! masks and every encoding, the emulator's result equals the dense mask. No GPU.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

use fragmask_check::emulator::{mismatches_against_dense, Emulator};
use fragmask_masks::{EncodedLayout, Encoding, TiledAccumulator};
use proptest::prelude::*;

/// FlashAttention-3 configurations and the shapes around them (SwapAB included).
const CONFIGS: [(u32, u32, u32, bool); 8] = [
    (128, 128, 2, false),
    (128, 128, 1, false),
    (192, 128, 3, false),
    (128, 64, 2, false),
    (64, 256, 1, false),
    (128, 176, 2, false),
    (128, 128, 2, true),
    (64, 128, 1, true),
];

fn tile_strategy() -> impl Strategy<Value = (usize, u64, u8)> {
    (0..CONFIGS.len(), any::<u64>(), 0u8..=100)
}

/// Random bools with `percent`% ones, from a SplitMix64 stream.
fn random_tile(len: usize, seed: u64, percent: u8) -> Vec<bool> {
    let mut state = seed;
    (0..len)
        .map(|_| fragmask_check::random::splitmix64(&mut state) % 100 < u64::from(percent))
        .collect()
}

proptest! {
    #![proptest_config(proptest_ci::config(48))]
    #[test]
    fn emulator_result_equals_the_dense_mask_for_every_encoding((config, seed, percent) in tile_strategy()) {
        let (bm, bn, w, swap) = CONFIGS[config];
        let acc = TiledAccumulator::new(bm, bn, w, swap).unwrap();
        let tile = random_tile((bm * bn) as usize, seed, percent);
        for encoding in Encoding::ALL {
            let words = EncodedLayout::derive(&acc, encoding).unwrap().encode_bools(&tile);
            let emu = Emulator::new(&acc, encoding).unwrap();
            let kept = emu.run_tile(&words).unwrap();
            let bad = mismatches_against_dense(&acc, &kept, &tile, 4);
            prop_assert!(bad.is_empty(), "{bm}x{bn} w{w} swap{swap} {}: {bad:?}", encoding.name());
        }
    }
}

#[test]
fn emulator_rejects_a_tile_of_the_wrong_size() {
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let emu = Emulator::new(&acc, Encoding::FragmentNative).unwrap();
    assert!(emu.run_tile(&[0; 100]).is_err());
}

#[test]
fn emulator_sees_every_bit_exactly_once_on_one_hot_tiles() {
    // A tile with a single 1 at each position in turn keeps exactly one value: the one
    // the owner holds. Exhaustive for the FA3 configuration.
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    for encoding in Encoding::ALL {
        let layout = EncodedLayout::derive(&acc, encoding).unwrap();
        let emu = Emulator::new(&acc, encoding).unwrap();
        for (row, col) in [(0, 0), (5, 9), (127, 127), (64, 3), (77, 120)] {
            let mut tile = vec![false; 128 * 128];
            tile[row * 128 + col] = true;
            let kept = emu.run_tile(&layout.encode_bools(&tile)).unwrap();
            let (thread, value) = acc.owner(row as u32, col as u32).unwrap();
            assert_eq!(
                kept.iter().filter(|&&k| k).count(),
                1,
                "{}",
                encoding.name()
            );
            assert!(kept[(thread * 64 + value) as usize], "{}", encoding.name());
        }
    }
}
