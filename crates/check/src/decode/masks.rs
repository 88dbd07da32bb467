//! Random and write-up decode masks and top-k lists: the inputs of the decode checks,
//! benches and the CLI's synthetic calls.

use fragmask_host::decode::DecodeError;
use fragmask_masks::PackedMask;

use crate::limits::MAX_HOST_BYTES;
use crate::random::splitmix64;

fn mask_err(what: &'static str, detail: String) -> DecodeError {
    DecodeError::Mask { what, detail }
}

/// Most mask elements [`random_packed_mask`] builds (heads × Sq × Sk).
pub const MAX_RANDOM_MASK_ELEMENTS: usize = 1 << 28;

/// A random packed mask of `heads` heads over `sq` tokens and `sk` keys on `bm × bn`
/// tiles (FragmentNative), from `seed`: each run of 16 keys of a row is empty, full or
/// random bits (one third each), so empty, full and partial tiles all occur (the
/// sweep's and the tests' masks).
pub fn random_packed_mask(
    sq: usize,
    sk: usize,
    heads: usize,
    bm: u32,
    bn: u32,
    seed: u64,
) -> Result<PackedMask, DecodeError> {
    let n = [heads, sq, sk]
        .iter()
        .try_fold(1usize, |a, &x| a.checked_mul(x))
        .filter(|&n| n <= MAX_RANDOM_MASK_ELEMENTS)
        .ok_or(DecodeError::Overflow("random mask"))?;
    let mut state = seed;
    let mut bytes = vec![0u8; n];
    for h in 0..heads {
        for t in 0..sq {
            for kb in 0..sk.div_ceil(16) {
                let kind = splitmix64(&mut state) % 3;
                for key in kb * 16..((kb + 1) * 16).min(sk) {
                    let on = match kind {
                        0 => false,
                        1 => true,
                        _ => splitmix64(&mut state) % 2 == 0,
                    };
                    bytes[(h * sq + t) * sk + key] = u8::from(on);
                }
            }
        }
    }
    let dims = [1usize, heads, sq, sk];
    let dense = fragmask_masks::DenseMask::new(&bytes, &dims)
        .map_err(|e| mask_err("random mask", e.to_string()))?;
    let acc = fragmask_gmma_frag::TiledAccumulator::new(bm, bn, (bm / 64).max(1), false)
        .map_err(|e| mask_err("random mask", format!("{e:?}")))?;
    fragmask_masks::pack(
        &dense,
        &acc,
        fragmask_masks::Encoding::FragmentNative,
        &fragmask_masks::PackOptions::default(),
    )
    .map_err(|e| mask_err("random mask", e.to_string()))
}

/// Write-up 002's decode mask: `heads` heads of one 64-token query block over `seqlen_k`
/// keys in 64-token blocks, each head keeping `kept` random distinct key blocks (its own
/// list, from `seed`), packed on 64×64 tiles (`fragmask pack --blocks ... --block 64x64
/// --warpgroups 1`, the lists of bench/decode_mask_bench.py in form).
pub fn writeup002_mask(
    heads: usize,
    seqlen_k: usize,
    kept: usize,
    seed: u64,
) -> Result<PackedMask, DecodeError> {
    const BLOCK: usize = 64;
    let blocks = seqlen_k.div_ceil(BLOCK);
    if kept == 0 || kept > blocks || heads == 0 || heads > 4096 {
        return Err(mask_err(
            "random 64-token block lists",
            format!("{kept} of {blocks} blocks for {heads} heads"),
        ));
    }
    let index = random_topk(&vec![blocks; heads], kept, seed)?;
    let num = vec![kept as i32; heads];
    let src = fragmask_masks::BlockSparseMask::new(
        &[heads, 1, kept],
        &index,
        &[heads, 1],
        &num,
        None::<&[i32]>,
        fragmask_masks::BlockSparseOptions {
            block_size: BLOCK,
            seqlen_q: Some(BLOCK),
            seqlen_k: Some(seqlen_k),
        },
    )
    .map_err(|e| mask_err("random 64-token block lists", e.to_string()))?;
    let acc = fragmask_gmma_frag::TiledAccumulator::new(64, 64, 1, false)
        .map_err(|e| mask_err("random 64-token block lists", format!("{e:?}")))?;
    fragmask_masks::pack(
        &src,
        &acc,
        fragmask_masks::Encoding::FragmentNative,
        &fragmask_masks::PackOptions::default(),
    )
    .map_err(|e| mask_err("random 64-token block lists", e.to_string()))
}

/// `k` distinct random key indices per request in `0..len_b` (ascending), from `seed`.
pub fn random_topk(lens: &[usize], k: usize, seed: u64) -> Result<Vec<i32>, DecodeError> {
    // The list, and a bitset over the longest request's keys (Floyd's draws).
    let longest = lens.iter().copied().max().unwrap_or(0);
    let need = lens
        .len()
        .checked_mul(k)
        .and_then(|n| n.checked_mul(4))
        .and_then(|n| n.checked_add(longest.div_ceil(8)))
        .unwrap_or(usize::MAX);
    if need > MAX_HOST_BYTES || longest > i32::MAX as usize {
        return Err(DecodeError::HostMemory {
            what: "the random top-k lists (B x k indices)",
            need,
            max: MAX_HOST_BYTES,
        });
    }
    let mut state = seed;
    let mut out = Vec::with_capacity(lens.len() * k);
    let mut taken = vec![0u64; longest.div_ceil(64)];
    for &len in lens {
        let take = k.min(len);
        // Floyd's algorithm: `take` distinct values of 0..len.
        let start = out.len();
        for j in len - take..len {
            let r = (splitmix64(&mut state) % (j as u64 + 1)) as usize;
            let pick = if taken[r / 64] & (1 << (r % 64)) == 0 {
                r
            } else {
                j
            };
            taken[pick / 64] |= 1 << (pick % 64);
            out.push(pick as i32);
        }
        out[start..].sort_unstable();
        for &x in &out[start..] {
            taken[x as usize / 64] = 0;
        }
        out.extend(std::iter::repeat_n(0, k - take));
    }
    Ok(out)
}
