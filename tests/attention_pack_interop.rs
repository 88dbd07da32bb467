//! The masks crate's packer (`fragmask pack`) and the attention's reference
//! packer encode the same mask: the same visibility for every element, and the
//! same words for every tile both call partial (compared through
//! `kv_tile_offsets`, so the order of tiles inside `words` may differ). The
//! attention kernel consumes either file unchanged.

use fragmask::host::attention::blockmask::WORDS_PER_TILE;
use fragmask::host::attention::BlockMask;
use fragmask::masks::{pack, DenseMask, Encoding, PackOptions, TiledAccumulator};

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

#[test]
fn masks_crate_packer_and_attention_packer_encode_the_same_mask() {
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let mut seed = 42u64;
    for &(b, h, sq, sk, keep) in &[
        (1usize, 1usize, 300usize, 260usize, 3u64),
        (2, 2, 257, 129, 2),
        (1, 3, 128, 384, 10),
        (1, 1, 100, 77, 2),
    ] {
        // Mix empty, full and partial tiles: whole blocks of rows/cols forced on or off.
        let dense: Vec<u8> = (0..b * h * sq * sk)
            .map(|idx| {
                let j = idx % sk;
                let i = (idx / sk) % sq;
                match (i / 128 + j / 128) % 3 {
                    0 => u8::from(lcg(&mut seed).is_multiple_of(keep)),
                    1 => 1,
                    _ => 0,
                }
            })
            .collect();
        let theirs = pack(
            &DenseMask::new(&dense, &[b, h, sq, sk]).unwrap(),
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .unwrap();
        let bools: Vec<bool> = dense.iter().map(|&x| x != 0).collect();
        let ours = BlockMask::from_dense(b, h, sq, sk, &bools).unwrap();
        // Same visibility everywhere (the two packers may classify a boundary tile whose
        // in-range elements are all visible differently: full here, partial there; the
        // kernel handles both, applying the key bound to full tiles past seqlen_k).
        let owners = fragmask::host::attention::blockmask::tile_owner_table();
        for bb in 0..b {
            for hh in 0..h {
                for i in 0..sq {
                    for j in 0..sk {
                        assert_eq!(
                            theirs.get(bb, hh, i, j),
                            ours.is_visible(&owners, bb, hh, i, j),
                            "{b}x{h}x{sq}x{sk} at ({bb},{hh},{i},{j})"
                        );
                    }
                }
            }
        }
        // Tiles both call partial carry identical words.
        let nb = ours.n_blocks();
        let mut compared = 0;
        for row in 0..ours.kv_num_blocks.len() {
            let r = row * nb;
            let theirs_np = theirs.kv_num_blocks()[row] as usize;
            for j in 0..ours.kv_num_blocks[row] as usize {
                let n = ours.kv_indices[r + j];
                if let Some(k) = theirs.kv_indices()[r..r + theirs_np]
                    .iter()
                    .position(|&x| x == n)
                {
                    let t = theirs.kv_tile_offsets()[r + k] as usize;
                    let o = ours.kv_tile_offsets[r + j] as usize;
                    assert_eq!(
                        &theirs.words()[t * WORDS_PER_TILE..(t + 1) * WORDS_PER_TILE],
                        &ours.words[o * WORDS_PER_TILE..(o + 1) * WORDS_PER_TILE],
                        "shape {b}x{h}x{sq}x{sk} row {row} key block {n}"
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared > 0);
    }
}
