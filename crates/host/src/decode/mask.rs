//! Block-sparse masks and top-k key lists in decode (issue 11, "Masks in decode").
//!
//! **Block lists** come from a [`PackedMask`] (the one mask format: `fragmask pack`, any
//! supported tile). Its rows are the call's query tokens (`Sq`), its columns the keys.
//! [`DecodeMask::from_packed`] converts it once, on the host, with the mask's own
//! accessors ([`PackedMask::tile_class`]-equivalent lists and
//! [`EncodedLayout::decode`](fragmask_masks::EncodedLayout::decode) of each partial
//! tile's words) into what the mma.sync decode kernel reads:
//!
//! - per mask row block, one ascending list of `(key block, partial block or -1)` pairs
//!   (full and partial blocks merged), and its length;
//! - per partial block, its bits row-major: bit `c % 32` of word `c / 32` of row `r`.
//!
//! Why not read the FragmentNative words in the kernel: they are laid out for the wgmma
//! accumulator of the mask's tile (a warpgroup's `m64nNk16` C fragment), while decode's
//! lanes hold `mma.sync.m16n8k16` C fragments of 16 packed rows (GQA heads interleaved
//! with tokens) and 16 keys. Each lane would gather its 8 elements per tile from bit
//! positions scattered over other threads' words. Row-major bits give a lane the 16
//! keys of each of its two rows as one shift of one word (a 16-key run never straddles
//! a word since tiles start at multiples of 16). The conversion costs the same memory as
//! the words (`block_m × block_n` bits per partial block) and runs once per mask.
//!
//! **Top-k** lists ([`topk_gather`]) reuse the paged kernel with pages of one key: the
//! contiguous cache `[B, Sk, Hkv, D]` is viewed as `B·Sk` pages of one key, and request
//! `b`'s block table row is `b·Sk + index`, so the kernel reads only the selected keys
//! (one `Hkv`-strided row of `D` elements per key and KV head).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use fragmask_kernels::decode::{MAX_MASK_BLOCK_N, SHARED_WARPS, TILE_KEYS, TILE_ROWS};
use fragmask_masks::PackedMask;

use super::driver;
use super::problem::{CacheShape, DecodeError, DecodeShape};

/// Most 32-bit words of partial-block bits a decode mask may hold (1 GiB).
pub const MAX_MASK_WORDS: usize = 1 << 28;

/// A block-sparse mask in the decode kernel's form (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeMask {
    /// Query tokens per row block.
    pub block_m: usize,
    /// Keys per block (a multiple of 16).
    pub block_n: usize,
    /// Row blocks: `ceil(seqlen_q / block_m)`.
    pub m_blocks: usize,
    /// Key blocks: `ceil(seqlen_k / block_n)`.
    pub n_blocks: usize,
    /// Requests stored (1: broadcast).
    pub batch: usize,
    /// Heads stored (1: broadcast).
    pub heads: usize,
    /// Query tokens the mask covers (the call's Sq).
    pub seqlen_q: usize,
    /// Keys the mask covers (keys past it are masked).
    pub seqlen_k: usize,
    /// `[batch, heads, m_blocks, n_blocks, 2]`: (key block, partial block or -1), the
    /// first `count` entries of each row block valid, ascending.
    pub list: Vec<i32>,
    /// `[batch, heads, m_blocks]` listed blocks.
    pub count: Vec<i32>,
    /// `[partials, block_m, row_words]` row-major bits of the partial blocks.
    pub bits: Vec<u32>,
}

fn mask_err(what: &'static str, detail: String) -> DecodeError {
    DecodeError::Mask { what, detail }
}

impl DecodeMask {
    /// 32-bit words per row of a partial block.
    pub fn row_words(&self) -> usize {
        self.block_n.div_ceil(32)
    }

    /// Converts a packed mask (module docs). Refuses tiles whose width is not a
    /// multiple of 16 keys or above 256.
    pub fn from_packed(mask: &PackedMask) -> Result<Self, DecodeError> {
        let grid = *mask.grid();
        let shape = mask.shape();
        let (bm, bn) = (grid.block_m, grid.block_n);
        if bm == 0 || bn == 0 || bn % TILE_KEYS as usize != 0 || bn > MAX_MASK_BLOCK_N as usize {
            return Err(mask_err(
                "tile",
                format!(
                    "{bm}x{bn}: decode walks 16-key tiles, so the mask tile's key columns must be a \
                     multiple of 16 up to {MAX_MASK_BLOCK_N}"
                ),
            ));
        }
        let rows = [shape.batch, shape.heads, grid.m_blocks]
            .iter()
            .try_fold(1usize, |a, &x| a.checked_mul(x))
            .ok_or(DecodeError::Overflow("mask lists"))?;
        let list_len = rows
            .checked_mul(grid.n_blocks)
            .and_then(|x| x.checked_mul(2))
            .filter(|&x| x <= MAX_MASK_WORDS)
            .ok_or(DecodeError::Overflow("mask lists"))?;
        let row_words = bn.div_ceil(32);
        let partials = mask.partial_tiles();
        let bits_len = partials
            .checked_mul(bm * row_words)
            .filter(|&x| x <= MAX_MASK_WORDS)
            .ok_or(DecodeError::Overflow("mask bits"))?;
        let mut list = vec![0i32; list_len];
        let mut count = vec![0i32; rows];
        let nb = grid.n_blocks;
        for (r, row_count) in count.iter_mut().enumerate() {
            let base = r * nb;
            let (partial, offsets, full) = mask.lists().row(r);
            let (np, nf) = (partial.len(), full.len());
            // Merge the two ascending lists.
            let (mut i, mut j, mut n) = (0, 0, 0);
            while i < np || j < nf {
                let take_partial = j >= nf || (i < np && partial[i] < full[j]);
                let (block, tile) = if take_partial {
                    i += 1;
                    (partial[i - 1], offsets[i - 1])
                } else {
                    j += 1;
                    (full[j - 1], -1)
                };
                list[(base + n) * 2] = block;
                list[(base + n) * 2 + 1] = tile;
                n += 1;
            }
            *row_count = n as i32;
        }
        let mut bits = vec![0u32; bits_len];
        let layout = mask.layout();
        for t in 0..partials {
            let tile = layout
                .decode(mask.tile_words(t))
                .map_err(|e| mask_err("words", e.to_string()))?;
            let out = &mut bits[t * bm * row_words..(t + 1) * bm * row_words];
            for (i, _) in tile.iter().enumerate().filter(|(_, &on)| on) {
                let (r, c) = (i / bn, i % bn);
                out[r * row_words + c / 32] |= 1 << (c % 32);
            }
        }
        Ok(DecodeMask {
            block_m: bm,
            block_n: bn,
            m_blocks: grid.m_blocks,
            n_blocks: nb,
            batch: shape.batch,
            heads: shape.heads,
            seqlen_q: shape.seqlen_q,
            seqlen_k: shape.seqlen_k,
            list,
            count,
            bits,
        })
    }

    fn row(&self, b: usize, h: usize, m_block: usize) -> usize {
        let b = if self.batch == 1 { 0 } else { b };
        let h = if self.heads == 1 { 0 } else { h };
        (b * self.heads + h) * self.m_blocks + m_block
    }

    /// Element `(request b, query head h, token t, key)` from the decode form (the CPU
    /// reference reads the mask through this).
    pub fn get(&self, b: usize, h: usize, t: usize, key: usize) -> bool {
        if t >= self.seqlen_q || key >= self.seqlen_k {
            return false;
        }
        let r = self.row(b, h, t / self.block_m);
        let entries = &self.list[r * self.n_blocks * 2..];
        let block = (key / self.block_n) as i32;
        for e in 0..self.count[r] as usize {
            if entries[2 * e] == block {
                let tile = entries[2 * e + 1];
                if tile < 0 {
                    return true;
                }
                let (rr, c) = (t % self.block_m, key % self.block_n);
                let w = self.bits[(tile as usize * self.block_m + rr) * self.row_words() + c / 32];
                return (w >> (c % 32)) & 1 == 1;
            }
        }
        false
    }

    /// The most keys any row block lists (`count × block_n`): what the split planner
    /// sizes the splits for.
    pub fn max_listed_keys(&self) -> usize {
        self.count
            .iter()
            .map(|&c| c.max(0) as usize)
            .max()
            .unwrap_or(0)
            * self.block_n
    }

    /// Checks that the mask fits `shape` and returns its geometry for the kernel.
    ///
    /// - rows: the mask's Sq equals the call's; batch 1 or B; heads 1 or H;
    /// - per-head masks with G > 1 do not pack the G heads of a KV head into one CTA's
    ///   rows (each head has its own list; a packed CTA walks one): each query head gets
    ///   its own CTAs, which read their KV head's K and V (the G heads' CTAs run
    ///   together, so the repeats mostly hit L2). Packing them would make a CTA walk the
    ///   union of G lists and mask each row by its own, for a gain only when Sq · G < 16;
    /// - shared-K/V CTAs (64 rows) when there are more than 48 rows and every CTA's
    ///   tokens lie in one mask row block; 16-row CTAs otherwise, whose tokens
    ///   (`16·m / G ..= (16·m + 15) / G`) must lie in one row block;
    /// - a masked kernel exists for the head size and tile width.
    pub fn fit(&self, shape: &DecodeShape) -> Result<MaskGeometry, DecodeError> {
        if self.seqlen_q != shape.seqlen_q {
            return Err(mask_err(
                "rows",
                format!(
                    "the mask has {} query rows, the call {} new tokens per request",
                    self.seqlen_q, shape.seqlen_q
                ),
            ));
        }
        if self.seqlen_k > shape.cache.capacity() {
            return Err(mask_err(
                "keys",
                format!(
                    "the mask has {} key columns, the cache holds {} keys per request",
                    self.seqlen_k,
                    shape.cache.capacity()
                ),
            ));
        }
        if self.batch != 1 && self.batch != shape.batch {
            return Err(mask_err(
                "batch",
                format!(
                    "the mask holds {} requests, the call {}",
                    self.batch, shape.batch
                ),
            ));
        }
        if self.heads != 1 && self.heads != shape.heads {
            return Err(mask_err(
                "heads",
                format!(
                    "the mask holds {} heads, the call {}",
                    self.heads, shape.heads
                ),
            ));
        }
        let pack_heads = self.heads == 1 || shape.group() == 1;
        let g = if pack_heads { shape.group() } else { 1 };
        let rows = shape.rows() / shape.group() * g;
        // The CTA of `cta` rows whose tokens straddle two mask row blocks, if any.
        let straddles = |cta: usize| {
            (0..rows.div_ceil(cta)).find_map(|m| {
                let first = m * cta / g;
                let last = (m * cta + cta - 1).min(rows - 1) / g;
                (first / self.block_m != last / self.block_m).then_some((m, first, last))
            })
        };
        // The kernel variant exists (head size, tile width).
        let base = shape
            .base_config()?
            .with_mask_block_n(self.block_n as u32)
            .map_err(DecodeError::Config)?;
        let row_block_ctas = crate::decode::problem::shared_kv_pays(rows)
            && straddles(
                base.with_shared_kv()
                    .map_or(usize::MAX, |c| c.cta_rows() as usize),
            )
            .is_none()
            && base.with_shared_kv().is_ok();
        // 64-row shared-K/V CTAs; else 16-row ones: one shared-K/V warp at D = 256 (the
        // per-warp key shares spill there with a mask), per-warp key shares below.
        let shared_warps = if row_block_ctas {
            SHARED_WARPS
        } else if base.head_dim > 128 {
            1
        } else {
            0
        };
        if !row_block_ctas {
            if let Some((m, first, last)) = straddles(TILE_ROWS as usize) {
                return Err(mask_err(
                    "tile rows",
                    format!(
                        "the 16 packed rows of CTA {m} hold tokens {first}..={last}, across mask \
                         row blocks of {} tokens; use a G (= {g}) that divides 16 or a multiple of 16",
                        self.block_m
                    ),
                ));
            }
        }
        let i32_of = |x: usize, what| i32::try_from(x).map_err(|_| DecodeError::Overflow(what));
        Ok(MaskGeometry {
            block_m: i32_of(self.block_m, "mask rows")?,
            block_n: u32::try_from(self.block_n).map_err(|_| DecodeError::Overflow("mask"))?,
            n_blocks: i32_of(self.n_blocks, "mask key blocks")?,
            batch_stride: if self.batch == 1 {
                0
            } else {
                i32_of(self.heads * self.m_blocks, "mask rows")?
            },
            head_stride: if self.heads == 1 {
                0
            } else {
                i32_of(self.m_blocks, "mask rows")?
            },
            pack_heads,
            shared_warps,
        })
    }

    /// Listed key blocks of the mask row block each CTA row of the grid walks: one
    /// entry per (request, grid head, m-block), for `rows_per_cta` packed rows of
    /// `row_group` heads per CTA and `grid_heads` heads (what the split planner balances).
    pub fn listed_per_cta(
        &self,
        batch: usize,
        grid_heads: usize,
        seqlen_q: usize,
        row_group: usize,
        rows_per_cta: usize,
    ) -> Vec<usize> {
        let rows = seqlen_q * row_group;
        let m_blocks = rows.div_ceil(rows_per_cta.max(1));
        let mut out = Vec::with_capacity(batch * grid_heads * m_blocks);
        for b in 0..batch {
            for h in 0..grid_heads {
                for m in 0..m_blocks {
                    let t = m * rows_per_cta / row_group.max(1);
                    let r = self.row(b, h, t / self.block_m);
                    out.push(self.count[r].max(0) as usize);
                }
            }
        }
        out
    }
}

/// What the kernel needs to find a CTA's list (from [`DecodeMask::fit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskGeometry {
    /// Tokens per row block.
    pub block_m: i32,
    /// Keys per block.
    pub block_n: u32,
    /// Entries per list.
    pub n_blocks: i32,
    /// Row blocks between requests (0: broadcast).
    pub batch_stride: i32,
    /// Row blocks between grid heads (0: broadcast; the grid's heads are then the query heads).
    pub head_stride: i32,
    /// Whether a CTA packs the G query heads of a KV head (false: per-head mask, G > 1).
    pub pack_heads: bool,
    /// Warps of a shared-K/V CTA (4: 64 rows; 1: 16 rows), or 0: 16-row CTAs whose
    /// warps walk their own shares of the key tiles.
    pub shared_warps: u32,
}

impl MaskGeometry {
    /// The parameters of an unmasked call (no list is read).
    pub const NONE: MaskGeometry = MaskGeometry {
        block_m: 1,
        block_n: 0,
        n_blocks: 0,
        batch_stride: 0,
        head_stride: 0,
        pack_heads: true,
        shared_warps: 0,
    };
}

/// A [`DecodeMask`] on the device.
#[derive(Debug)]
pub struct DecodeMaskDevice {
    /// The list pairs.
    pub list: CudaSlice<i32>,
    /// The counts.
    pub count: CudaSlice<i32>,
    /// The partial blocks' bits (one unused word when there are none).
    pub bits: CudaSlice<u32>,
}

impl DecodeMaskDevice {
    /// Uploads `mask` on `stream`.
    pub fn upload(stream: &Arc<CudaStream>, mask: &DecodeMask) -> Result<Self, DecodeError> {
        let bits = if mask.bits.is_empty() {
            vec![0]
        } else {
            mask.bits.clone()
        };
        Ok(Self {
            list: stream
                .clone_htod(&mask.list)
                .map_err(driver("uploading the mask lists"))?,
            count: stream
                .clone_htod(&mask.count)
                .map_err(driver("uploading the mask counts"))?,
            bits: stream
                .clone_htod(&bits)
                .map_err(driver("uploading the mask bits"))?,
        })
    }
}

/// Top-k sparse decode as a gather (module docs): for a contiguous `shape` and per-request
/// key lists `indices [B, k]` (each in `0..seqlens_k[b]`, or `0..capacity`), the paged
/// shape with pages of one key over the same K and V bytes, and its block table. Every
/// token of a request uses the request's list; causal and window bounds are refused
/// (the gathered keys have no positions).
pub fn topk_gather(
    shape: &DecodeShape,
    k: usize,
    indices: &[i32],
    seqlens_k: Option<&[i32]>,
) -> Result<(DecodeShape, Vec<i32>), DecodeError> {
    let gathered = topk_shape(shape, k)?;
    let shape = shape.validate()?;
    let capacity = shape.cache.capacity();
    let expected = shape
        .batch
        .checked_mul(k)
        .ok_or(DecodeError::Overflow("top-k indices"))?;
    if indices.len() != expected {
        return Err(DecodeError::Shape {
            tensor: "topk_indices",
            got: indices.len(),
            expected,
        });
    }
    let mut table = Vec::with_capacity(expected);
    for b in 0..shape.batch {
        let len = seqlens_k.map_or(capacity, |l| l[b].clamp(0, capacity as i32) as usize);
        for (slot, &idx) in indices[b * k..(b + 1) * k].iter().enumerate() {
            if idx < 0 || idx as usize >= len {
                return Err(DecodeError::TopKIndex {
                    request: b,
                    slot,
                    index: i64::from(idx),
                    seqlen_k: len,
                });
            }
            table.push((b * capacity) as i32 + idx);
        }
    }
    Ok((gathered, table))
}

/// The gathered shape of top-k decode over a contiguous `shape` with `k` keys per
/// request ([`topk_gather`]), checked without any index list: draw or read the indices
/// only once this holds.
pub fn topk_shape(shape: &DecodeShape, k: usize) -> Result<DecodeShape, DecodeError> {
    let shape = shape.validate()?;
    let CacheShape::Contiguous { capacity } = shape.cache else {
        return Err(mask_err(
            "top-k",
            "top-k gathers from a contiguous cache [B, Sk, Hkv, D]".into(),
        ));
    };
    if shape.window_left.is_some() || shape.window_right.is_some() {
        return Err(mask_err(
            "top-k",
            "causal or window bounds do not apply to gathered keys".into(),
        ));
    }
    if k == 0 || k > capacity {
        return Err(DecodeError::Size {
            what: "top-k keys per request",
            value: k,
            max: capacity,
        });
    }
    shape
        .batch
        .checked_mul(k)
        .ok_or(DecodeError::Overflow("top-k indices"))?;
    let num_pages = shape
        .batch
        .checked_mul(capacity)
        .filter(|&n| n <= i32::MAX as usize)
        .ok_or(DecodeError::Overflow("top-k pages"))?;
    DecodeShape {
        cache: CacheShape::Paged {
            page_size: 1,
            num_pages,
            max_pages: k,
        },
        ..shape
    }
    .validate()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::decode::problem::tests::shape as test_shape;
    use fragmask_gmma_frag::TiledAccumulator;
    use fragmask_masks::{pack, BlockSparseMask, BlockSparseOptions, Encoding, PackOptions};

    #[test]
    fn the_top_k_shape_is_checked_without_indices() {
        let mut s = test_shape(1, 4, 1, 64);
        s.cache = CacheShape::Contiguous { capacity: 1 << 30 };
        s.batch = 65_535;
        assert!(matches!(
            topk_shape(&s, 1 << 30),
            Err(DecodeError::Overflow("top-k pages"))
        ));
        s.batch = 1;
        assert!(matches!(
            topk_shape(&s, (1 << 30) + 1),
            Err(DecodeError::Size { .. })
        ));
        let g = topk_shape(&s, 100).unwrap();
        assert_eq!(g.cache.capacity(), 100);
    }

    /// A packed mask of `heads` heads over `sq` tokens and `sk` keys on `bm x bn` tiles:
    /// each run of 16 keys of a row is empty, full or mixed (a hash of its position and
    /// `seed`), so empty, full and partial tiles all occur. (The checking crate's
    /// `decode::masks::random_packed_mask` draws the same kinds of runs at random.)
    pub(crate) fn packed_random(
        sq: usize,
        sk: usize,
        heads: usize,
        bm: u32,
        bn: u32,
        seed: u64,
    ) -> PackedMask {
        let mix = |x: u64| {
            let z = (x ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (z ^ (z >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 32
        };
        let mut bytes = vec![0u8; heads * sq * sk];
        for (i, b) in bytes.iter_mut().enumerate() {
            let (row, key) = (i / sk, i % sk);
            let run = (row * sk.div_ceil(16) + key / 16) as u64;
            *b = u8::from(match mix(run) % 3 {
                0 => false,
                1 => true,
                _ => mix(i as u64 + (1 << 40)) % 2 == 0,
            });
        }
        let dense = fragmask_masks::DenseMask::new(&bytes, &[1, heads, sq, sk]).unwrap();
        let acc = TiledAccumulator::new(bm, bn, (bm / 64).max(1), false).unwrap();
        pack(
            &dense,
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .unwrap()
    }

    #[test]
    fn decode_form_equals_the_packed_masks_own_accessors() {
        for (bm, bn, heads) in [(64, 64, 1), (64, 128, 3), (128, 128, 2), (64, 176, 1)] {
            let packed = packed_random(70, 300, heads, bm, bn, 7 + bn as u64);
            let m = DecodeMask::from_packed(&packed).unwrap();
            for h in 0..heads {
                for t in 0..70 {
                    for key in 0..310 {
                        assert_eq!(
                            m.get(0, h, t, key),
                            packed.get(0, h, t, key),
                            "{bm}x{bn} h{h} t{t} k{key}"
                        );
                    }
                }
            }
            // Lists ascending, partial entries point at partial tiles.
            for r in 0..m.count.len() {
                let e = &m.list[r * m.n_blocks * 2..r * m.n_blocks * 2 + m.count[r] as usize * 2];
                assert!(e
                    .chunks(2)
                    .zip(e.chunks(2).skip(1))
                    .all(|(a, b)| a[0] < b[0]));
            }
        }
    }

    #[test]
    fn block_lists_with_variable_block_sizes_convert() {
        // Write-up 002's arrays: 2 query blocks of 64, 4 key blocks, sizes 64/50/64/10.
        let index = [0i32, 2, 3, 1, 0, 0];
        let num = [3i32, 1];
        let sizes = [64i32, 50, 64, 10];
        let src = BlockSparseMask::new(
            &[2, 3],
            &index,
            &[2],
            &num,
            Some(&sizes[..]),
            BlockSparseOptions {
                block_size: 64,
                seqlen_q: Some(128),
                seqlen_k: Some(202),
            },
        )
        .unwrap();
        let acc = TiledAccumulator::new(64, 64, 1, false).unwrap();
        let packed = pack(
            &src,
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .unwrap();
        let m = DecodeMask::from_packed(&packed).unwrap();
        for t in 0..128 {
            for key in 0..256 {
                let want =
                    fragmask_masks::MaskSource::get(&src, 0, 0, t, key.min(201)) && key < 202;
                assert_eq!(m.get(0, 0, t, key), want, "t{t} k{key}");
            }
        }
        assert_eq!(m.max_listed_keys(), 3 * 64);
    }

    #[test]
    fn masks_that_do_not_fit_are_typed_errors() {
        let packed = packed_random(8, 64, 2, 64, 64, 3);
        let m = DecodeMask::from_packed(&packed).unwrap();
        let mut s = test_shape(1, 2, 2, 64);
        s.seqlen_q = 8;
        assert!(m.fit(&s).is_ok());
        s.seqlen_q = 9;
        assert!(matches!(
            m.fit(&s),
            Err(DecodeError::Mask { what: "rows", .. })
        ));
        // A per-head mask with G = 2: each query head its own CTAs (not packed).
        let mut g = test_shape(1, 4, 2, 64);
        g.seqlen_q = 8;
        let packed4 = packed_random(8, 64, 4, 64, 64, 3);
        let m4 = DecodeMask::from_packed(&packed4).unwrap();
        let geo = m4.fit(&g).unwrap();
        assert!(!geo.pack_heads && geo.shared_warps == 0);
        assert_eq!(geo.head_stride, 1);
        // 2 heads stored, 4 in the call: refused.
        assert!(matches!(
            m.fit(&g),
            Err(DecodeError::Mask { what: "heads", .. })
        ));
        // 64 tokens in one 64-row block: shared-K/V CTAs.
        let wide64 = packed_random(64, 128, 1, 64, 64, 5);
        let mut s64 = test_shape(1, 2, 2, 128);
        s64.seqlen_q = 64;
        let geo64 = DecodeMask::from_packed(&wide64).unwrap().fit(&s64).unwrap();
        assert_eq!(geo64.shared_warps, SHARED_WARPS);
        // D = 256 with few rows: one shared-K/V warp.
        let mut s256 = test_shape(1, 2, 2, 64);
        s256.seqlen_q = 8;
        s256.head_dim = 256;
        assert_eq!(m.fit(&s256).unwrap().shared_warps, 1);
        // Any G with a broadcast mask: a row block of block_m tokens ends at packed row
        // block_m * G, a multiple of 16 when block_m is, so no CTA straddles two.
        let wide = packed_random(100, 64, 1, 64, 64, 4);
        let wm = DecodeMask::from_packed(&wide).unwrap();
        for g in [1, 3, 5, 8, 24] {
            let mut s = test_shape(1, g, 1, 64);
            s.seqlen_q = 100;
            assert!(wm.fit(&s).is_ok(), "G = {g}");
        }
    }
}
