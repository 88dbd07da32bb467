//! The GPU packer's transposed lists (issue 13; docs/masks.md "Transposed lists"): the
//! backward pass's `q_num_blocks`, `q_indices`, `full_q_num_blocks`, `full_q_indices`,
//! `q_tile_offsets` and `q_words` from a packed mask's forward lists and words on the
//! device, bit for bit what the CPU's `PackedMask::add_transposed` builds.
//!
//! Three kernels, after the forward pack (or on any mask uploaded to the device), on one
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
//! 3. [`TRANSCODE_KERNEL`] `fragmask_pack_transcode`: per transposed partial tile, the
//!    forward accumulator's threads scatter their words' bits into a byte per element
//!    in shared memory (row and column of each value from the forward TV layout), then
//!    the backward accumulator's threads gather their FragmentNative words from it (row
//!    and column from the backward TV layout, SwapAB by default): the same
//!    [`FragmentTerms`] the packer's tile kernel and the apply functions use, so the
//!    bit of `(thread, value)` is the element `backward.coord(thread, value)`, as the
//!    CPU transcoder's table says.

use std::fmt::Write as _;

use fragmask_gmma_frag::TiledAccumulator;
use fragmask_masks::Encoding;

use super::{class, lists_kernel, ListAxis};
use crate::apply::CodegenError;
use crate::emit::FragmentTerms;

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
    /// assert!(TransposeKernels::new(&fwd, &TiledAccumulator::new(128, 64, 2, true).unwrap()).is_err());
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

    /// Bytes of a shared-memory row: `block_n` plus 4, so that the 8 rows a warp's
    /// accumulator rows (or, under SwapAB, its columns) touch fall on different banks.
    fn row_stride(&self) -> u32 {
        self.forward().block_n() + 4
    }

    /// Static shared memory of the transcode kernel.
    pub fn smem_bytes(&self) -> u32 {
        self.forward().block_m() * self.row_stride()
    }

    /// The CUDA source of the three kernels (header-free; compile for sm_90a, or any
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
    /// - `fragmask_pack_transcode(const unsigned* words, const int* tile_word,
    ///   const int* partial_source, const int* partial_count, int capacity,
    ///   unsigned* q_words)`, any 1-D grid of [`Self::threads`]: transposed partial tile
    ///   `p < min(count, capacity)` re-encodes forward tile `tile_word[partial_source[p]]`
    ///   (below `capacity`; `words` and `q_words` hold `capacity` tiles).
    pub fn source(&self) -> String {
        let (fwd, bwd) = (self.forward(), self.backward());
        let (bm, bn) = (fwd.block_m(), fwd.block_n());
        let threads = self.threads();
        let stride = self.row_stride();
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
        // The transcode kernel.
        let _ = writeln!(
            s,
            r#"
// Transposed partial tile p (in q_words order) re-encodes forward tile
// tile_word[partial_source[p]]: scatter the forward words to a byte per element, gather the
// backward words. Element (row, col) of the tile (query row, key column) is byte
// row * {stride} + col (rows padded by 4 bytes against bank conflicts).
extern "C" __global__ void __launch_bounds__({threads}) {transcode_kernel}(
    const unsigned* __restrict__ words, const int* __restrict__ tile_word,
    const int* __restrict__ partial_source, const int* __restrict__ partial_count, int capacity,
    unsigned* __restrict__ q_words)
{{
    __shared__ __align__(16) unsigned char elem[{smem}];
    const int count = min(*partial_count, capacity);
    for (int p = blockIdx.x; p < count; p += gridDim.x) {{
        const int src = tile_word[partial_source[p]];
        if (threadIdx.x < {tf}u) {{
            // ---- scatter: forward thread t's FragmentNative words ({tf},{wf}):({wf},1).
            const unsigned thread = threadIdx.x;
            unsigned fw[{wf}];
#pragma unroll
            for (int i = 0; i < {wf}; ++i) {{ fw[i] = 0u; }}
            if (src >= 0 && src < capacity) {{
                const unsigned* from = words + (unsigned long long)src * {wptf}u + thread * {wf}u;
{load}
            }}"#,
            threads = threads,
            transcode_kernel = TRANSCODE_KERNEL,
            smem = self.smem_bytes(),
            tf = fwd.threads(),
            load = vector_copy("fw", "from", wf, true),
        );
        let _ = writeln!(
            s,
            "            const unsigned row_t = {}; // tile row of value 0, forward {}\n            \
             const unsigned col_t = {}; // tile column of value 0, forward {}",
            self.forward.thread_row().cuda(&[]),
            self.forward.thread_comment(),
            self.forward.thread_col().cuda(&[]),
            self.forward.thread_comment(),
        );
        for value in 0..fwd.values_per_thread() {
            let (rv, cv) = self.forward.value_offset(value);
            let _ = writeln!(
                s,
                "            elem[(row_t + {rv}u) * {stride}u + col_t + {cv}u] = (unsigned char)((fw[{w}] >> {b}u) & 1u); \
                 // value {value} = (row_t+{rv}, col_t+{cv}), forward tv_layout value mode",
                w = value / 32,
                b = value % 32,
            );
        }
        let _ = writeln!(
            s,
            r#"        }}
        __syncthreads();
        if (threadIdx.x < {tb}u) {{
            // ---- gather: backward thread t's FragmentNative words ({tb},{wb}):({wb},1).
            const unsigned thread = threadIdx.x;
            unsigned bw[{wb}];
#pragma unroll
            for (int i = 0; i < {wb}; ++i) {{ bw[i] = 0u; }}
            const unsigned row_t = {row}; // tile row of value 0, backward {tc}
            const unsigned col_t = {col}; // tile column of value 0, backward {tc}"#,
            tb = bwd.threads(),
            row = self.backward.thread_row().cuda(&[]),
            col = self.backward.thread_col().cuda(&[]),
            tc = self.backward.thread_comment(),
        );
        for value in 0..bwd.values_per_thread() {
            let (rv, cv) = self.backward.value_offset(value);
            let _ = writeln!(
                s,
                "            bw[{w}] |= (unsigned)elem[(row_t + {rv}u) * {stride}u + col_t + {cv}u] << {b}u; \
                 // value {value} = (row_t+{rv}, col_t+{cv}), backward tv_layout value mode",
                w = value / 32,
                b = value % 32,
            );
        }
        let _ = writeln!(
            s,
            r#"            unsigned* to = q_words + (unsigned long long)p * {wptb}u + thread * {wb}u;
{store}
        }}
        __syncthreads();  // the next tile's scatter overwrites elem
    }}
}}"#,
            store = vector_copy("bw", "to", wb, false),
        );
        s
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

    /// Replays the emitted scatter and gather on the host (the same `FragmentTerms`
    /// arithmetic the source prints) and checks that bit `v` of backward thread `t` is
    /// the forward bit of element `backward.coord(t, v)`, for a tile whose forward
    /// bits are a pseudo-random pattern.
    #[test]
    fn transcode_moves_every_element_to_its_backward_coordinate() {
        for (fwd, bwd) in [
            (acc(128, 128, 2, false), acc(128, 128, 2, true)),
            (acc(64, 64, 1, false), acc(64, 64, 1, true)),
            (acc(128, 64, 2, false), acc(128, 64, 1, true)),
            (acc(192, 128, 3, false), acc(192, 128, 2, true)),
            (acc(128, 128, 2, false), acc(128, 128, 2, false)),
        ] {
            let k = TransposeKernels::new(&fwd, &bwd).unwrap();
            let (f, b) = (&k.forward, &k.backward);
            let stride = k.row_stride() as usize;
            let wf = fwd.values_per_thread().div_ceil(32) as usize;
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let fw: Vec<u32> = (0..k.forward_words_per_tile())
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (state >> 32) as u32
                })
                .collect();
            let mut elem = vec![0u8; k.smem_bytes() as usize];
            let mut written = vec![false; elem.len()];
            for t in 0..fwd.threads() {
                let (rt, ct) = f.thread_origin(t);
                for v in 0..fwd.values_per_thread() {
                    let (rv, cv) = f.value_offset(v);
                    let at = (rt + rv) as usize * stride + (ct + cv) as usize;
                    assert!(!written[at], "two forward values scatter to one byte");
                    written[at] = true;
                    elem[at] = ((fw[t as usize * wf + v as usize / 32] >> (v % 32)) & 1) as u8;
                }
            }
            for t in 0..bwd.threads() {
                let (rt, ct) = b.thread_origin(t);
                for v in 0..bwd.values_per_thread() {
                    let (rv, cv) = b.value_offset(v);
                    let at = (rt + rv) as usize * stride + (ct + cv) as usize;
                    assert!(
                        written[at],
                        "backward thread {t} value {v} reads an unwritten byte"
                    );
                    // The truth: the forward (thread, value) holding the same element
                    // (gmma-frag's `owner`, the inverse of `coord`).
                    let (q, kk) = bwd.coord(t, v).unwrap();
                    let (ft, fv) = fwd.owner(q, kk).unwrap();
                    let truth = (fw[ft as usize * wf + fv as usize / 32] >> (fv % 32)) & 1;
                    assert_eq!(u32::from(elem[at]), truth, "backward ({t}, {v}) of {bwd:?}");
                }
            }
            // Every element of the tile is scattered (the padding bytes are not).
            let covered = written.iter().filter(|&&w| w).count();
            assert_eq!(covered, (fwd.block_m() * fwd.block_n()) as usize);
        }
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
