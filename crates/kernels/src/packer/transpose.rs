//! The GPU packer's transposed lists (issue 13; docs/masks.md "Transposed lists"): the
//! backward pass's `q_num_blocks`, `q_indices`, `full_q_num_blocks`, `full_q_indices`,
//! `q_tile_offsets` and `q_words` from a packed mask's forward lists and words on the
//! device, bit for bit what the CPU's `PackedMask::add_transposed` builds.
//!
//! Four kernels, after the forward pack (or on any mask uploaded to the device), on one
//! stream:
//!
//! 1. [`CLASSES_KERNEL`] `fragmask_pack_classes`: a warp per forward row `(plane,
//!    m_block)` writes every tile's class byte from the forward lists (empty, then the
//!    listed partial and full tiles) and, for partial tiles, the index of their words
//!    (`kv_tile_offsets`) at the tile (`tile_word`).
//! 2. [`super::TRANSPOSED_LISTS_KERNEL`] `fragmask_pack_lists_t`: the forward list
//!    kernel walking the class grid by key block ([`super::ListAxis::Transposed`]): the
//!    transposed lists, ascending, padding 0 (and -1 in `q_tile_offsets`), each
//!    transposed partial tile's forward tile, and their count.
//! 3. [`super::TILE_ORDER_KERNEL`] `fragmask_pack_tile_order` ([`super::order_kernel`]): per plane, the key tiles by the
//!    query tiles their transposed lists visit, most first, ties by index: the backward's
//!    dispatch order, `fragmask_masks::tile_order`'s.
//! 4. [`TRANSCODE_KERNEL`] `fragmask_pack_transcode`: per transposed partial tile, the
//!    forward words are copied to shared memory unchanged, and each backward thread
//!    gathers its FragmentNative words from them (SwapAB by default): value `v` of
//!    thread `t` is the forward bit owning the element `backward.coord(t, v)`
//!    (gmma-frag's `owner` of the forward accumulator), at word `wt(t) + W(v)` and bit
//!    `bt(t) + B(v)`, with `wt`, `bt` linear over the bits of `t` and `W`, `B` per-value
//!    constants: fitted from `owner ∘ coord` and checked on every `(thread, value)` when
//!    the source is generated (a pair of layouts that does not split so is refused),
//!    as the CPU transcoder's table is derived from the same two maps. One 32-bit
//!    shared-memory load serves every value that shares a word.

use std::fmt::Write as _;

use fragmask_gmma_frag::TiledAccumulator;
use fragmask_masks::Encoding;

use super::{class, lists_kernel, order_kernel, ListAxis};
use crate::apply::CodegenError;
use crate::emit::FragmentTerms;

// The forward and backward `FragmentTerms` name the two TV layouts in the source's header
// comment; the gather itself is `WordGather`.

/// Name of the class kernel.
pub const CLASSES_KERNEL: &str = "fragmask_pack_classes";
/// Name of the transcode kernel.
pub const TRANSCODE_KERNEL: &str = "fragmask_pack_transcode";
/// Threads per CTA of the class kernel (a warp per row).
pub const CLASSES_THREADS: u32 = 256;

/// The most threads a transcode CTA may have (the larger accumulator's).
pub const TRANSCODE_THREADS_MAX: u32 = 1024;
/// Static shared memory the transcode kernel may use (a byte per tile element).
const SMEM_LIMIT: u32 = 48 * 1024;

/// The transposed-list kernels of one forward tile configuration and one backward
/// accumulator of the same `block_m × block_n` (FragmentNative words on both sides).
#[derive(Clone, Debug)]
pub struct TransposeKernels {
    forward: FragmentTerms,
    backward: FragmentTerms,
    gather: WordGather,
}

impl TransposeKernels {
    /// Validates the pair: same tile, separable TV layouts, the tile's bytes fit in
    /// shared memory.
    ///
    /// ```
    /// use fragmask_gmma_frag::TiledAccumulator;
    /// use fragmask_kernels::packer::TransposeKernels;
    /// let fwd = TiledAccumulator::new(128, 128, 2, false).unwrap();
    /// let bwd = TiledAccumulator::new(128, 128, 2, true).unwrap();
    /// let k = TransposeKernels::new(&fwd, &bwd).unwrap();
    /// assert_eq!(k.backward_words_per_tile(), 512);
    /// assert!(k.source().contains("fragmask_pack_transcode"));
    /// assert!(TransposeKernels::new(&fwd, &TiledAccumulator::new(64, 128, 1, true).unwrap()).is_err());
    /// ```
    pub fn new(
        forward: &TiledAccumulator,
        backward: &TiledAccumulator,
    ) -> Result<Self, CodegenError> {
        if (forward.block_m(), forward.block_n()) != (backward.block_m(), backward.block_n()) {
            return Err(CodegenError::Unsupported(format!(
                "the backward accumulator's tile {}x{} must be the forward tile {}x{}",
                backward.block_m(),
                backward.block_n(),
                forward.block_m(),
                forward.block_n()
            )));
        }
        if forward.block_n() % 4 != 0 {
            return Err(CodegenError::Unsupported(format!(
                "the transposed GPU packer needs block_n a multiple of 4, got {}",
                forward.block_n()
            )));
        }
        let k = Self {
            forward: FragmentTerms::derive(forward)?,
            backward: FragmentTerms::derive(backward)?,
            gather: WordGather::derive(forward, backward)?,
        };
        if k.smem_bytes() > SMEM_LIMIT || k.threads() > TRANSCODE_THREADS_MAX {
            return Err(CodegenError::Unsupported(format!(
                "the transposed GPU packer holds a tile's {} bytes in shared memory (at most \
                 {SMEM_LIMIT}) with {} threads (at most {TRANSCODE_THREADS_MAX})",
                k.smem_bytes(),
                k.threads()
            )));
        }
        Ok(k)
    }

    /// The forward tile configuration.
    pub fn forward(&self) -> &TiledAccumulator {
        self.forward.accumulator()
    }

    /// The backward accumulator (the order of `q_words`).
    pub fn backward(&self) -> &TiledAccumulator {
        self.backward.accumulator()
    }

    /// FragmentNative words per forward tile.
    pub fn forward_words_per_tile(&self) -> usize {
        Encoding::FragmentNative.words_per_tile(self.forward())
    }

    /// FragmentNative words per transposed tile.
    pub fn backward_words_per_tile(&self) -> usize {
        Encoding::FragmentNative.words_per_tile(self.backward())
    }

    /// Threads per CTA of the transcode kernel: the larger accumulator's.
    pub fn threads(&self) -> u32 {
        self.forward().threads().max(self.backward().threads())
    }

    /// Static shared memory of the transcode kernel: one forward tile's words.
    pub fn smem_bytes(&self) -> u32 {
        4 * self.forward_words_per_tile() as u32
    }

    /// The CUDA source of the four kernels (header-free; compile for sm_90a, or any
    /// sm_70+). The list kernel is [`lists_kernel`]`(ListAxis::Transposed)`.
    ///
    /// Signatures:
    /// - `fragmask_pack_classes(const int* kv_num_blocks, const int* kv_indices,
    ///   const int* full_kv_num_blocks, const int* full_kv_indices,
    ///   const int* kv_tile_offsets, int rows, int n_blocks, unsigned char* classes,
    ///   int* tile_word)`: `rows = planes * m_blocks` forward rows, a warp each
    ///   ([`CLASSES_THREADS`] per CTA); `classes` and `tile_word` hold `rows * n_blocks`.
    /// - `fragmask_pack_lists_t(classes, rows, m_blocks, n_blocks, q_num_blocks,
    ///   q_indices, full_q_num_blocks, full_q_indices, q_tile_offsets,
    ///   partial_source, partial_count)`: one CTA, `rows = planes * n_blocks`.
    /// - `fragmask_pack_tile_order(const int* q_num_blocks, const int* full_q_num_blocks,
    ///   int planes, int n_blocks, int* order)`: [`super::order_kernel`].
    /// - `fragmask_pack_transcode(const unsigned* words, const int* tile_word,
    ///   const int* partial_source, const int* partial_count, int capacity,
    ///   unsigned* q_words)`, any 1-D grid of [`Self::threads`]: transposed partial tile
    ///   `p < min(count, capacity)` re-encodes forward tile `tile_word[partial_source[p]]`
    ///   (below `capacity`; `words` and `q_words` hold `capacity` tiles).
    pub fn source(&self) -> String {
        let (fwd, bwd) = (self.forward(), self.backward());
        let (bm, bn) = (fwd.block_m(), fwd.block_n());
        let threads = self.threads();
        let (wf, wb) = (
            fwd.values_per_thread().div_ceil(32),
            bwd.values_per_thread().div_ceil(32),
        );
        let (wptf, wptb) = (
            self.forward_words_per_tile(),
            self.backward_words_per_tile(),
        );
        let mut s = String::with_capacity(32 * 1024);
        let _ = writeln!(
            s,
            "// fragmask GPU packer, transposed lists: forward lists + words -> the backward pass's\n\
             // q_* lists and q_words. Tile {bm}x{bn}; forward {fw} warpgroup(s){fs}, backward {bwg} warpgroup(s){bs}.\n\
             // Generated by fragmask-kernels from both accumulators' TV layouts; compile for sm_90a.\n\
             // forward {}\n// forward {}\n// backward {}\n// backward {}",
            self.forward.thread_comment(),
            self.forward.value_comment(),
            self.backward.thread_comment(),
            self.backward.value_comment(),
            fw = fwd.warpgroups(),
            fs = if fwd.swap_ab() { " SwapAB" } else { "" },
            bwg = bwd.warpgroups(),
            bs = if bwd.swap_ab() { " SwapAB" } else { "" },
        );
        let _ = writeln!(
            s,
            r#"
// A warp per forward row (plane, m_block): every class byte of the row, then the listed
// partial and full tiles (entries outside 0..n_blocks, which a validated mask never has,
// are skipped). __syncwarp orders the lanes' global writes (CUDA C++ guide, warp sync).
extern "C" __global__ void __launch_bounds__({ct}) {classes_kernel}(
    const int* __restrict__ kv_num_blocks, const int* __restrict__ kv_indices,
    const int* __restrict__ full_kv_num_blocks, const int* __restrict__ full_kv_indices,
    const int* __restrict__ kv_tile_offsets, int rows, int n_blocks,
    unsigned char* __restrict__ classes, int* __restrict__ tile_word)
{{
    const int row = (int)(blockIdx.x * ({ct}u / 32u) + (threadIdx.x >> 5));
    const int lane = (int)(threadIdx.x & 31u);
    if (row >= rows) return;
    // Tile grid [planes, m_blocks, n_blocks]: row (plane, m_block) starts at row * n_blocks.
    const unsigned long long base = (unsigned long long)row * n_blocks;
    for (int n = lane; n < n_blocks; n += 32) {{ classes[base + n] = {empty}; }}
    __syncwarp();
    const int np = min(max(kv_num_blocks[row], 0), n_blocks);
    const int nf = min(max(full_kv_num_blocks[row], 0), n_blocks);
    for (int j = lane; j < np; j += 32) {{
        const int n = kv_indices[base + j];
        if (n >= 0 && n < n_blocks) {{ classes[base + n] = {partial}; tile_word[base + n] = kv_tile_offsets[base + j]; }}
    }}
    for (int j = lane; j < nf; j += 32) {{
        const int n = full_kv_indices[base + j];
        if (n >= 0 && n < n_blocks) {{ classes[base + n] = {full}; }}
    }}
}}
"#,
            ct = CLASSES_THREADS,
            classes_kernel = CLASSES_KERNEL,
            empty = class::EMPTY,
            partial = class::PARTIAL,
            full = class::FULL,
        );
        s.push_str(&lists_kernel(ListAxis::Transposed));
        s.push_str(&order_kernel(ListAxis::Transposed));
        // The transcode kernel.
        let g = &self.gather;
        let _ = writeln!(
            s,
            r#"
// Transposed partial tile p (in q_words order) re-encodes forward tile
// tile_word[partial_source[p]]: the forward words are copied to shared memory as they are
// (FragmentNative ({tf},{wf}):({wf},1)), then backward thread t's value v is bit
// bt(t) + B(v) of word wt(t) + W(v) there: the forward (thread, value) owning the element
// backward.coord(t, v), gmma-frag's owner∘coord, fitted as a thread part linear over the
// bits of t plus a per-value constant and checked on every (thread, value) when this
// source was generated.
extern "C" __global__ void __launch_bounds__({threads}) {transcode_kernel}(
    const unsigned* __restrict__ words, const int* __restrict__ tile_word,
    const int* __restrict__ partial_source, const int* __restrict__ partial_count, int capacity,
    unsigned* __restrict__ q_words)
{{
    __shared__ __align__(16) unsigned fw[{wptf}];
    const unsigned thread = threadIdx.x;
    const unsigned wt = {wt}; // word of the thread's value 0 (owner∘coord, linear in the bits of thread)
    const unsigned bt = {bt}; // bit of the thread's value 0 (owner∘coord, linear in the bits of thread)
    const int count = min(*partial_count, capacity);
    for (int p = blockIdx.x; p < count; p += gridDim.x) {{
        const int src = tile_word[partial_source[p]];
        const bool ok = src >= 0 && src < capacity;
        const uint4* from = reinterpret_cast<const uint4*>(words + (unsigned long long)(ok ? src : 0) * {wptf}u);
        for (unsigned i = thread; i < {wptf4}u; i += {threads}u) {{
            reinterpret_cast<uint4*>(fw)[i] = ok ? from[i] : make_uint4(0u, 0u, 0u, 0u);
        }}
        __syncthreads();
        if (thread < {tb}u) {{
            // Backward thread t's FragmentNative words ({tb},{wb}):({wb},1).
            unsigned bw[{wb}];
#pragma unroll
            for (int i = 0; i < {wb}; ++i) {{ bw[i] = 0u; }}"#,
            threads = threads,
            transcode_kernel = TRANSCODE_KERNEL,
            tf = fwd.threads(),
            tb = bwd.threads(),
            wptf4 = wptf / 4,
            wt = g.word_thread.cuda(),
            bt = g.bit_thread.cuda(),
        );
        let mut values: Vec<u32> = (0..bwd.values_per_thread()).collect();
        values.sort_by_key(|&v| (g.word_value[v as usize], v));
        for chunk in values.chunk_by(|a, b| g.word_value[*a as usize] == g.word_value[*b as usize])
        {
            let w = g.word_value[chunk[0] as usize];
            let _ = writeln!(s, "            {{ const unsigned x = fw[wt + {w}u] >> bt;");
            for &v in chunk {
                let _ = writeln!(
                    s,
                    "              bw[{word}] |= ((x >> {b}u) & 1u) << {bit}u; // value {v}",
                    word = v / 32,
                    b = g.bit_value[v as usize],
                    bit = v % 32,
                );
            }
            let _ = writeln!(s, "            }}");
        }
        let _ = writeln!(
            s,
            r#"            unsigned* to = q_words + (unsigned long long)p * {wptb}u + thread * {wb}u;
{store}
        }}
        __syncthreads();  // the next tile's copy overwrites fw
    }}
}}"#,
            store = vector_copy("bw", "to", wb, false),
        );
        s
    }
}

/// A function of the thread index that is linear over its bits: `Σ bit_b(thread) ·
/// coef_b` (no carries between the terms: checked where it is fitted).
#[derive(Clone, Debug, PartialEq, Eq)]
struct BitLinear {
    /// `(b, coef_b)` with `coef_b != 0`.
    terms: Vec<(u32, u32)>,
}

impl BitLinear {
    /// Fits `f` (with `f(0) == 0`) on threads `0..threads` from its values at the powers
    /// of two; `None` unless it reproduces `f` on every thread.
    fn fit(threads: u32, f: impl Fn(u32) -> i64) -> Option<BitLinear> {
        let mut terms = Vec::new();
        let mut b = 0;
        while b < 32 && (1u32 << b) < threads {
            let c = f(1 << b);
            if c != 0 {
                terms.push((b, u32::try_from(c).ok()?));
            }
            b += 1;
        }
        let fit = BitLinear { terms };
        (0..threads)
            .all(|t| i64::from(fit.eval(t)) == f(t))
            .then_some(fit)
    }

    fn eval(&self, thread: u32) -> u32 {
        self.terms
            .iter()
            .map(|&(b, c)| ((thread >> b) & 1) * c)
            .sum()
    }

    fn cuda(&self) -> String {
        if self.terms.is_empty() {
            return "0u".into();
        }
        self.terms
            .iter()
            .map(|&(b, c)| format!("((thread >> {b}u) & 1u) * {c}u"))
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// Where backward thread `t`'s value `v` is among the forward words of its tile:
/// word `word_thread(t) + word_value[v]`, bit `bit_thread(t) + bit_value[v]`.
#[derive(Clone, Debug)]
struct WordGather {
    word_thread: BitLinear,
    bit_thread: BitLinear,
    word_value: Vec<u32>,
    bit_value: Vec<u32>,
}

impl WordGather {
    /// Walks every `(thread, value)` of `backward`: the element `backward.coord(t, v)`
    /// is forward value `fv` of forward thread `ft` (`forward.owner`), bit `fv % 32` of
    /// word `ft · words_per_thread + fv / 32`; splits that into a thread part linear over
    /// the bits of `t` and a per-value part, and checks the split on every pair.
    fn derive(
        forward: &TiledAccumulator,
        backward: &TiledAccumulator,
    ) -> Result<Self, CodegenError> {
        let wf = forward.values_per_thread().div_ceil(32);
        let (tb, vb) = (backward.threads(), backward.values_per_thread());
        let mut table = Vec::with_capacity((tb * vb) as usize);
        for t in 0..tb {
            for v in 0..vb {
                let (q, k) = backward.coord(t, v)?;
                let (ft, fv) = forward.owner(q, k)?;
                table.push((i64::from(ft * wf + fv / 32), i64::from(fv % 32)));
            }
        }
        let at = |t: u32, v: u32| table[(t * vb + v) as usize];
        let not_linear = |what: &str| {
            CodegenError::Unsupported(format!(
                "the transposed GPU packer needs the forward {what} of each backward value to be a \
                 per-thread part linear over the thread's bits plus a per-value part; \
                 {forward:?} -> {backward:?} is not"
            ))
        };
        let word_thread =
            BitLinear::fit(tb, |t| at(t, 0).0 - at(0, 0).0).ok_or_else(|| not_linear("word"))?;
        let bit_thread =
            BitLinear::fit(tb, |t| at(t, 0).1 - at(0, 0).1).ok_or_else(|| not_linear("bit"))?;
        let word_value: Vec<u32> = (0..vb).map(|v| at(0, v).0 as u32).collect();
        let bit_value: Vec<u32> = (0..vb).map(|v| at(0, v).1 as u32).collect();
        for t in 0..tb {
            let (wt, bt) = (word_thread.eval(t), bit_thread.eval(t));
            for v in 0..vb {
                let (w, b) = at(t, v);
                if i64::from(wt + word_value[v as usize]) != w
                    || i64::from(bt + bit_value[v as usize]) != b
                {
                    return Err(not_linear("word and bit"));
                }
            }
        }
        Ok(WordGather {
            word_thread,
            bit_thread,
            word_value,
            bit_value,
        })
    }
}

/// Copies `w` words between the register array `regs` and the pointer `ptr` (16, 8 or
/// 4 bytes at a time as `w` allows; a thread's FragmentNative words are contiguous and
/// their offset a multiple of `w` words).
fn vector_copy(regs: &str, ptr: &str, w: u32, load: bool) -> String {
    let pad = "                ";
    match (w, load) {
        (4, true) => format!(
            "{pad}{{ const uint4 x = *reinterpret_cast<const uint4*>({ptr}); {regs}[0] = x.x; {regs}[1] = x.y; {regs}[2] = x.z; {regs}[3] = x.w; }}"
        ),
        (2, true) => format!(
            "{pad}{{ const uint2 x = *reinterpret_cast<const uint2*>({ptr}); {regs}[0] = x.x; {regs}[1] = x.y; }}"
        ),
        (4, false) => format!(
            "{pad}*reinterpret_cast<uint4*>({ptr}) = make_uint4({regs}[0], {regs}[1], {regs}[2], {regs}[3]);"
        ),
        (2, false) => format!(
            "{pad}*reinterpret_cast<uint2*>({ptr}) = make_uint2({regs}[0], {regs}[1]);"
        ),
        (_, true) => format!(
            "#pragma unroll\n{pad}for (int i = 0; i < {w}; ++i) {{ {regs}[i] = {ptr}[i]; }}"
        ),
        (_, false) => format!(
            "#pragma unroll\n{pad}for (int i = 0; i < {w}; ++i) {{ {ptr}[i] = {regs}[i]; }}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(bm: u32, bn: u32, w: u32, swap: bool) -> TiledAccumulator {
        TiledAccumulator::new(bm, bn, w, swap).unwrap()
    }

    /// Replays the emitted gather on the host (the fitted word and bit of every value)
    /// over the forward words of random tiles, and compares with the masks crate's
    /// FragmentNative encoding of the same tiles over the backward accumulator (its
    /// bit positions derived from `coord` on its own, as the CPU packer uses them).
    #[test]
    fn word_gather_gives_the_backward_encoding_of_every_tile() {
        use fragmask_masks::EncodedLayout;
        for (fwd, bwd) in [
            (acc(128, 128, 2, false), acc(128, 128, 2, true)),
            (acc(64, 64, 1, false), acc(64, 64, 1, true)),
            (acc(128, 64, 2, false), acc(128, 64, 1, true)),
            (acc(192, 128, 3, false), acc(192, 128, 2, true)),
            (acc(128, 128, 2, false), acc(128, 128, 2, false)),
            (acc(128, 128, 1, false), acc(128, 128, 2, true)),
        ] {
            let k = TransposeKernels::new(&fwd, &bwd).unwrap();
            let g = &k.gather;
            let f_layout = EncodedLayout::derive(&fwd, Encoding::FragmentNative).unwrap();
            let b_layout = EncodedLayout::derive(&bwd, Encoding::FragmentNative).unwrap();
            let (bm, bn) = (fwd.block_m() as usize, fwd.block_n() as usize);
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            for density in [1u64, 50, 97] {
                let tile: Vec<bool> = (0..bm * bn)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        (state >> 33) % 100 < density
                    })
                    .collect();
                let fw = f_layout.encode_bools(&tile);
                let expected = b_layout.encode_bools(&tile);
                let wb = bwd.values_per_thread().div_ceil(32) as usize;
                let mut got = vec![0u32; expected.len()];
                for t in 0..bwd.threads() {
                    let (wt, bt) = (g.word_thread.eval(t), g.bit_thread.eval(t));
                    for v in 0..bwd.values_per_thread() {
                        let x = fw[(wt + g.word_value[v as usize]) as usize] >> bt;
                        got[t as usize * wb + v as usize / 32] |=
                            ((x >> g.bit_value[v as usize]) & 1) << (v % 32);
                    }
                }
                assert_eq!(got, expected, "{fwd:?} -> {bwd:?}, {density}%");
            }
            // One shared-memory load per distinct word: at most the values, and for the
            // default 128x128 pair a quarter of them (a word serves four values).
            let mut words = g.word_value.clone();
            words.sort_unstable();
            words.dedup();
            assert!(words.len() <= g.word_value.len());
            if (fwd, bwd) == (acc(128, 128, 2, false), acc(128, 128, 2, true)) {
                assert_eq!(words.len(), 16, "{words:?}");
            }
        }
    }

    #[test]
    fn the_emitted_gather_loads_each_word_once() {
        let k = TransposeKernels::new(&acc(128, 128, 2, false), &acc(128, 128, 2, true)).unwrap();
        let src = k.source();
        assert_eq!(src.matches("const unsigned x = fw[wt + ").count(), 16);
        assert_eq!(src.matches("& 1u) << ").count(), 64);
        assert!(src.contains("const unsigned wt = ((thread >> "), "{src}");
    }

    #[test]
    fn tiles_that_differ_are_refused() {
        let e =
            TransposeKernels::new(&acc(128, 128, 2, false), &acc(64, 128, 1, true)).unwrap_err();
        assert!(e.to_string().contains("must be the forward tile"), "{e}");
    }

    #[test]
    fn the_list_kernels_differ_only_in_how_a_row_walks_the_tiles() {
        let f = lists_kernel(ListAxis::Forward);
        let t = lists_kernel(ListAxis::Transposed);
        assert!(f.contains("fragmask_pack_lists(") && t.contains("fragmask_pack_lists_t("));
        assert!(t.contains("(row / n_blocks) * m_blocks + n) * n_blocks + row % n_blocks"));
        assert_eq!(
            f.matches("__syncthreads()").count(),
            t.matches("__syncthreads()").count()
        );
    }
}
