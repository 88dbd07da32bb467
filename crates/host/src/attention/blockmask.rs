//! The FragmentNative block mask on the host: the normative format, a reference
//! packer from any visibility predicate, validation and decoding.
//!
//! Format (per mask batch `b` and head `h`, `Mb = ceil(Sq/128)`, `Nb = ceil(Sk/128)`):
//! - `kv_num_blocks` i32 `[B, H, Mb]`, `kv_indices` i32 `[B, H, Mb, Nb]`: partial
//!   key tiles of each query block, ascending, padded with 0 after `kv_num_blocks`.
//! - `full_kv_num_blocks`, `full_kv_indices`: fully visible tiles, same shapes.
//! - `kv_tile_offsets` i32 `[B, H, Mb, Nb]`: for the `j`-th partial tile, its
//!   index along dimension 0 of `words`.
//! - `words` u32 `[tiles, 256, 2]`: bit `b` of word `w` of consumer thread `t`
//!   is the mask bit of the element that thread holds at fragment value `32w+b`
//!   (wgmma m64n128 accumulator, warpgroup `t/128` owns rows `64*(t/128)..`).
//!
//! `B` or `H` may be 1 (broadcast over the attention's batch or heads).
//! Elements past `seqlen_q` / `seqlen_k` are stored as 0 and never counted when
//! classifying a tile.

use fragmask_kernels::attention::{
    FragmentMap, BLOCK_M, BLOCK_N, MASK_THREADS, MASK_VALUES_PER_THREAD, MASK_WORDS_PER_THREAD,
};

use super::{AttentionError, AttentionShape};

/// Most elements (`batch * heads * seqlen_q * seqlen_k`) the reference packer visits:
/// 2^36 (a 256k x 256k plane). It evaluates the predicate once per element, so larger
/// masks are refused rather than packed for hours.
pub const MAX_PACK_ELEMENTS: u64 = 1 << 36;

/// A packed FragmentNative block mask in host memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockMask {
    /// Mask batch extent (1 broadcasts).
    pub batch: usize,
    /// Mask head extent (1 broadcasts).
    pub heads: usize,
    /// Query length the mask was built for.
    pub seqlen_q: usize,
    /// Key length the mask was built for.
    pub seqlen_k: usize,
    /// `[B, H, Mb]`.
    pub kv_num_blocks: Vec<i32>,
    /// `[B, H, Mb, Nb]`.
    pub kv_indices: Vec<i32>,
    /// `[B, H, Mb]`.
    pub full_kv_num_blocks: Vec<i32>,
    /// `[B, H, Mb, Nb]`.
    pub full_kv_indices: Vec<i32>,
    /// `[B, H, Mb, Nb]`.
    pub kv_tile_offsets: Vec<i32>,
    /// `[tiles, 256, 2]`.
    pub words: Vec<u32>,
}

/// `(consumer thread, value)` of every element of a 128 x 128 tile, row-major.
pub fn tile_owner_table() -> Vec<(u16, u8)> {
    let map = FragmentMap::new(BLOCK_N).expect("CLayout_64x128 is separable");
    let mut table = vec![(0u16, 0u8); (BLOCK_M * BLOCK_N) as usize];
    for ct in 0..MASK_THREADS {
        let (wg, lt) = (ct / 128, ct % 128);
        for value in 0..MASK_VALUES_PER_THREAD {
            let (row, col) = map.coord(lt, value);
            let row = 64 * wg + row;
            table[(row * BLOCK_N + col) as usize] = (ct as u16, value as u8);
        }
    }
    table
}

/// Words per partial tile (`256 * 2`).
pub const WORDS_PER_TILE: usize = (MASK_THREADS * MASK_WORDS_PER_THREAD) as usize;

impl BlockMask {
    /// Query blocks.
    pub fn m_blocks(&self) -> usize {
        self.seqlen_q.div_ceil(BLOCK_M as usize)
    }

    /// Key blocks.
    pub fn n_blocks(&self) -> usize {
        self.seqlen_k.div_ceil(BLOCK_N as usize)
    }

    /// Stored partial tiles.
    pub fn num_partial_tiles(&self) -> usize {
        self.words.len() / WORDS_PER_TILE
    }

    /// Bytes of the packed mask (lists and words).
    pub fn bytes(&self) -> usize {
        4 * (self.kv_num_blocks.len()
            + self.kv_indices.len()
            + self.full_kv_num_blocks.len()
            + self.full_kv_indices.len()
            + self.kv_tile_offsets.len()
            + self.words.len())
    }

    /// Checks that the reference packer accepts these extents: positive and at most
    /// [`MAX_PACK_ELEMENTS`] elements (so every list length fits too).
    pub fn check_pack_size(
        batch: usize,
        heads: usize,
        seqlen_q: usize,
        seqlen_k: usize,
    ) -> Result<(), AttentionError> {
        if batch == 0 || heads == 0 || seqlen_q == 0 || seqlen_k == 0 {
            return Err(AttentionError::Mask("mask extents must be positive".into()));
        }
        let elements = [batch, heads, seqlen_q, seqlen_k]
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        match elements {
            Some(n) if n <= MAX_PACK_ELEMENTS => Ok(()),
            _ => Err(AttentionError::Mask(format!(
                "{batch}x{heads}x{seqlen_q}x{seqlen_k} elements to pack; the limit is {MAX_PACK_ELEMENTS}"
            ))),
        }
    }

    /// Checks that this mask fits a call of `shape`: built for its `Sq`, `Sk`, and
    /// batch and heads 1 (broadcast) or equal to the call's.
    pub fn check_fits(&self, shape: &AttentionShape) -> Result<(), AttentionError> {
        if self.seqlen_q != shape.seqlen_q || self.seqlen_k != shape.seqlen_k {
            return Err(AttentionError::Mask(format!(
                "mask built for Sq={} Sk={}, attention has Sq={} Sk={}",
                self.seqlen_q, self.seqlen_k, shape.seqlen_q, shape.seqlen_k
            )));
        }
        if !(self.batch == 1 || self.batch == shape.batch)
            || !(self.heads == 1 || self.heads == shape.heads)
        {
            return Err(AttentionError::Mask(format!(
                "mask batch x heads {}x{} must be 1 or equal to {}x{}",
                self.batch, self.heads, shape.batch, shape.heads
            )));
        }
        Ok(())
    }

    /// Packs `visible(b, h, i, j)` over `[batch, heads, seqlen_q, seqlen_k]`
    /// (the reference packer; tiles with no visible element are skipped,
    /// tiles with every in-range element visible are listed as full).
    pub fn from_fn(
        batch: usize,
        heads: usize,
        seqlen_q: usize,
        seqlen_k: usize,
        visible: impl Fn(usize, usize, usize, usize) -> bool,
    ) -> Result<Self, AttentionError> {
        Self::check_pack_size(batch, heads, seqlen_q, seqlen_k)?;
        let (bm, bn) = (BLOCK_M as usize, BLOCK_N as usize);
        let mb = seqlen_q.div_ceil(bm);
        let nb = seqlen_k.div_ceil(bn);
        let owners = tile_owner_table();
        let rows = batch * heads * mb;
        let mut mask = BlockMask {
            batch,
            heads,
            seqlen_q,
            seqlen_k,
            kv_num_blocks: vec![0; rows],
            kv_indices: vec![0; rows * nb],
            full_kv_num_blocks: vec![0; rows],
            full_kv_indices: vec![0; rows * nb],
            kv_tile_offsets: vec![0; rows * nb],
            words: Vec::new(),
        };
        let mut tile_words = vec![0u32; WORDS_PER_TILE];
        for b in 0..batch {
            for h in 0..heads {
                for m in 0..mb {
                    let row = (b * heads + h) * mb + m;
                    let (mut partial, mut full) = (0usize, 0usize);
                    for n in 0..nb {
                        tile_words.iter_mut().for_each(|w| *w = 0);
                        let rows_in = (seqlen_q - m * bm).min(bm);
                        let cols_in = (seqlen_k - n * bn).min(bn);
                        let mut count = 0usize;
                        for r in 0..rows_in {
                            for c in 0..cols_in {
                                if visible(b, h, m * bm + r, n * bn + c) {
                                    count += 1;
                                    let (ct, value) = owners[r * bn + c];
                                    let word = ct as usize * MASK_WORDS_PER_THREAD as usize
                                        + value as usize / 32;
                                    tile_words[word] |= 1 << (value % 32);
                                }
                            }
                        }
                        if count == 0 {
                            continue;
                        }
                        if count == rows_in * cols_in {
                            mask.full_kv_indices[row * nb + full] = n as i32;
                            full += 1;
                        } else {
                            let tile = mask.words.len() / WORDS_PER_TILE;
                            mask.kv_indices[row * nb + partial] = n as i32;
                            mask.kv_tile_offsets[row * nb + partial] = i32::try_from(tile)
                                .map_err(|_| {
                                    AttentionError::Mask("more than 2^31 partial tiles".into())
                                })?;
                            mask.words.extend_from_slice(&tile_words);
                            partial += 1;
                        }
                    }
                    mask.kv_num_blocks[row] = partial as i32;
                    mask.full_kv_num_blocks[row] = full as i32;
                }
            }
        }
        Ok(mask)
    }

    /// Packs a dense bool mask `[batch, heads, seqlen_q, seqlen_k]`.
    pub fn from_dense(
        batch: usize,
        heads: usize,
        seqlen_q: usize,
        seqlen_k: usize,
        dense: &[bool],
    ) -> Result<Self, AttentionError> {
        let elements = [batch, heads, seqlen_q, seqlen_k]
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d));
        if elements != Some(dense.len()) {
            return Err(AttentionError::Mask(format!(
                "dense mask has {} elements, expected {batch}x{heads}x{seqlen_q}x{seqlen_k}",
                dense.len()
            )));
        }
        Self::from_fn(batch, heads, seqlen_q, seqlen_k, |b, h, i, j| {
            dense[((b * heads + h) * seqlen_q + i) * seqlen_k + j]
        })
    }

    /// Checks every length, count, index and offset, so the kernel can trust them.
    pub fn validate(&self) -> Result<(), AttentionError> {
        let err = |m: String| Err(AttentionError::Mask(m));
        if self.batch == 0 || self.heads == 0 || self.seqlen_q == 0 || self.seqlen_k == 0 {
            return err("mask extents must be positive".into());
        }
        let (mb, nb) = (self.m_blocks(), self.n_blocks());
        // Extents may come from a file: checked, and then bounded by the list lengths.
        let (rows, lists) = match [self.batch, self.heads, mb]
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .and_then(|rows| Some((rows, rows.checked_mul(nb)?)))
        {
            Some(x) => x,
            None => {
                return err(format!(
                    "extents {}x{}x{}x{} overflow",
                    self.batch, self.heads, self.seqlen_q, self.seqlen_k
                ))
            }
        };
        let rows_nb = lists;
        for (name, len, want) in [
            ("kv_num_blocks", self.kv_num_blocks.len(), rows),
            ("full_kv_num_blocks", self.full_kv_num_blocks.len(), rows),
            ("kv_indices", self.kv_indices.len(), rows_nb),
            ("full_kv_indices", self.full_kv_indices.len(), rows_nb),
            ("kv_tile_offsets", self.kv_tile_offsets.len(), rows_nb),
        ] {
            if len != want {
                return err(format!("{name} has {len} elements, expected {want}"));
            }
        }
        if self.words.len() % WORDS_PER_TILE != 0 {
            return err(format!(
                "words has {} elements, not a multiple of {WORDS_PER_TILE}",
                self.words.len()
            ));
        }
        let tiles = self.num_partial_tiles();
        for row in 0..rows {
            let np = self.kv_num_blocks[row];
            let nf = self.full_kv_num_blocks[row];
            if np < 0 || nf < 0 || (i64::from(np) + i64::from(nf)) as u64 > nb as u64 {
                return err(format!(
                    "row {row}: {np} partial + {nf} full tiles out of {nb}"
                ));
            }
            let mut seen = vec![false; nb];
            for j in 0..np as usize {
                let n = self.kv_indices[row * nb + j];
                let t = self.kv_tile_offsets[row * nb + j];
                if n < 0 || n as usize >= nb || seen[n as usize] {
                    return err(format!(
                        "row {row}: partial index {n} out of range or repeated"
                    ));
                }
                seen[n as usize] = true;
                if t < 0 || t as usize >= tiles {
                    return err(format!("row {row}: tile offset {t} out of 0..{tiles}"));
                }
            }
            for j in 0..nf as usize {
                let n = self.full_kv_indices[row * nb + j];
                if n < 0 || n as usize >= nb || seen[n as usize] {
                    return err(format!(
                        "row {row}: full index {n} out of range or repeated"
                    ));
                }
                seen[n as usize] = true;
            }
        }
        Ok(())
    }

    /// Decodes one element from the packed form (`b`, `h` in the mask's own,
    /// possibly broadcast, extents are reduced modulo 1 automatically).
    pub fn is_visible(&self, owners: &[(u16, u8)], b: usize, h: usize, i: usize, j: usize) -> bool {
        if i >= self.seqlen_q || j >= self.seqlen_k {
            return false;
        }
        let b = if self.batch == 1 { 0 } else { b };
        let h = if self.heads == 1 { 0 } else { h };
        let (bm, bn) = (BLOCK_M as usize, BLOCK_N as usize);
        let (mb, nb) = (self.m_blocks(), self.n_blocks());
        let row = (b * self.heads + h) * mb + i / bm;
        let n = (j / bn) as i32;
        let list = row * nb;
        let np = self.kv_num_blocks[row] as usize;
        if let Some(p) = self.kv_indices[list..list + np]
            .iter()
            .position(|&x| x == n)
        {
            let tile = self.kv_tile_offsets[list + p] as usize;
            let (ct, value) = owners[(i % bm) * bn + j % bn];
            let word = self.words[(tile * MASK_THREADS as usize + ct as usize)
                * MASK_WORDS_PER_THREAD as usize
                + value as usize / 32];
            return (word >> (value % 32)) & 1 == 1;
        }
        let nf = self.full_kv_num_blocks[row] as usize;
        self.full_kv_indices[list..list + nf].contains(&n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn owner_table_is_a_bijection_onto_thread_value_pairs() {
        let t = tile_owner_table();
        let mut seen = vec![false; t.len()];
        for &(ct, v) in &t {
            let k = ct as usize * 64 + v as usize;
            assert!(!seen[k]);
            seen[k] = true;
        }
        // DESIGN fact 1 at thread 5 of warpgroup 1, value 6: row 64 + 1 + 8, col 8 + 2.
        assert_eq!(t[(64 + 9) * 128 + 10], (128 + 5, 6));
    }

    #[test]
    fn packing_then_decoding_returns_the_mask() {
        let mut seed = 7u64;
        for &(sq, sk) in &[(1usize, 1usize), (130, 257), (256, 128), (77, 300)] {
            let dense: Vec<bool> = (0..2 * sq * sk).map(|_| lcg(&mut seed) % 3 == 0).collect();
            let m = BlockMask::from_dense(1, 2, sq, sk, &dense).unwrap();
            m.validate().unwrap();
            let owners = tile_owner_table();
            for h in 0..2 {
                for i in 0..sq {
                    for j in 0..sk {
                        assert_eq!(
                            m.is_visible(&owners, 0, h, i, j),
                            dense[(h * sq + i) * sk + j]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn empty_and_full_tiles_store_no_words() {
        let m = BlockMask::from_fn(1, 1, 256, 256, |_, _, i, _| i < 128).unwrap();
        assert_eq!(m.num_partial_tiles(), 0);
        assert_eq!(m.full_kv_num_blocks, vec![2, 0]);
        assert_eq!(m.kv_num_blocks, vec![0, 0]);
        let mut bad = m.clone();
        bad.full_kv_indices[1] = 0;
        assert!(bad.validate().is_err(), "repeated tile must be rejected");
    }
}
