//! The GPU packer: a dense bool mask (one byte per element) → FlexAttention-style tile
//! lists plus the FragmentNative words of the partial tiles, bit for bit what the CPU
//! packer (`fragmask_masks::pack`) produces.
//!
//! Three kernels, run in order on one stream:
//!
//! 1. [`TILES_KERNEL`] `fragmask_pack_tiles`: persistent CTAs of `threads` (the MMA
//!    threads of the tile configuration), as many as fit on the GPU at once, each walking
//!    tiles `blockIdx.x + k * gridDim.x` with the next tile's loads in flight:
//!    - reads the tile's `block_m × block_n` bytes with coalesced 16-byte loads
//!      (`ld.global.nc.L1::no_allocate`; byte loads only where a row is not 16-byte
//!      aligned or crosses `seqlen_k`), turns every 16 bytes into 16 bits with two
//!      SWAR steps, and stores the bits row-major in shared memory;
//!    - each thread then gathers its own FragmentNative words from those bits, with
//!      the row and column of each of its values taken from the accumulator's TV layout
//!      (the same [`FragmentTerms`] the apply functions use): the words come out in
//!      exactly the order thread `t` consumes them;
//!    - the tile's ones are the sum of the threads' popcounts; it is empty (0 ones),
//!      full (all `block_m × block_n` elements 1, so a ragged edge tile never is) or
//!      partial. Partial tiles write their words to a scratch slot indexed by the tile;
//!      every tile writes its class byte.
//! 2. [`LISTS_KERNEL`] `fragmask_pack_lists`, one CTA of [`LIST_THREADS`]: a warp per
//!    row of tiles, 32 rows at a time; ballots over the class bytes give each tile's
//!    rank, a scan over the rows gives each partial tile's index; it writes
//!    `kv_num_blocks`, `kv_indices`, `full_kv_num_blocks`, `full_kv_indices`,
//!    `kv_tile_offsets` (padding 0, and -1 in `kv_tile_offsets`, as the CPU packer), the
//!    source slot of every partial tile and their count.
//! 3. [`COMPACT_KERNEL`] `fragmask_pack_compact`: copies each partial tile's words from
//!    its scratch slot to its place, 16 bytes per thread.
//!
//! Memory traffic for a mask whose tiles are all partial: the dense bytes once, then
//! 3 × the words (scratch write, read, final write); the words are 1/32 of the bytes at
//! 128 × 128 (2 KB per 16 KB tile).

use std::fmt::Write as _;

use fragmask_gmma_frag::TiledAccumulator;
use fragmask_masks::Encoding;

use crate::apply::CodegenError;
use crate::emit::FragmentTerms;

mod transpose;
pub use transpose::{
    TransposeKernels, CLASSES_KERNEL, CLASSES_THREADS, TRANSCODE_KERNEL, TRANSCODE_THREADS_MAX,
};

/// Name of the tile kernel.
pub const TILES_KERNEL: &str = "fragmask_pack_tiles";
/// Name of the list kernel.
pub const LISTS_KERNEL: &str = "fragmask_pack_lists";
/// Name of the compaction kernel.
pub const COMPACT_KERNEL: &str = "fragmask_pack_compact";
/// Name of the transposed list kernel ([`ListAxis::Transposed`]).
pub const TRANSPOSED_LISTS_KERNEL: &str = "fragmask_pack_lists_t";
/// Name of the row-order kernel ([`order_kernel`] of [`ListAxis::Forward`]).
pub const ROW_ORDER_KERNEL: &str = "fragmask_pack_row_order";
/// Name of the tile-order kernel ([`order_kernel`] of [`ListAxis::Transposed`]).
pub const TILE_ORDER_KERNEL: &str = "fragmask_pack_tile_order";
/// Threads per CTA of the order kernels (a row each; the plane's counts pass through
/// shared memory in chunks of as many).
pub const ORDER_THREADS: u32 = 256;
/// Threads of the list kernel's single CTA (32 warps: 32 rows of tiles at a time).
pub const LIST_THREADS: u32 = 1024;
/// Threads per CTA of the compaction kernel.
pub const COMPACT_THREADS: u32 = 256;

/// Tile class bytes written by the tile kernel.
pub mod class {
    /// No element is 1.
    pub const EMPTY: u8 = 0;
    /// Some but not all elements are 1 (a ragged edge tile with ones is always partial).
    pub const PARTIAL: u8 = 1;
    /// All `block_m × block_n` elements are 1.
    pub const FULL: u8 = 2;
}

/// The packer kernels of one tile configuration (FragmentNative words).
#[derive(Clone, Debug)]
pub struct PackerKernels {
    terms: FragmentTerms,
}

impl PackerKernels {
    /// Validates the configuration: `block_n` must be a multiple of 8 (every legal
    /// wgmma N is) and the TV layout separable.
    ///
    /// ```
    /// use fragmask_gmma_frag::TiledAccumulator;
    /// use fragmask_kernels::packer::PackerKernels;
    /// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    /// let k = PackerKernels::new(&acc).unwrap();
    /// assert_eq!(k.words_per_tile(), 512);
    /// assert!(k.source().contains("fragmask_pack_tiles"));
    /// ```
    pub fn new(acc: &TiledAccumulator) -> Result<Self, CodegenError> {
        if acc.block_n() % 8 != 0 {
            return Err(CodegenError::Unsupported(format!(
                "the GPU packer needs block_n a multiple of 8, got {}",
                acc.block_n()
            )));
        }
        Ok(Self {
            terms: FragmentTerms::derive(acc)?,
        })
    }

    /// The tile configuration.
    pub fn accumulator(&self) -> &TiledAccumulator {
        self.terms.accumulator()
    }

    /// Threads per CTA of the tile kernel (the MMA threads).
    pub fn tile_threads(&self) -> u32 {
        self.accumulator().threads()
    }

    /// FragmentNative words per thread.
    pub fn words_per_thread(&self) -> u32 {
        self.accumulator().values_per_thread().div_ceil(32)
    }

    /// FragmentNative words per tile.
    pub fn words_per_tile(&self) -> usize {
        Encoding::FragmentNative.words_per_tile(self.accumulator())
    }

    /// Bytes per load of the byte-to-bit step: 16, or 8 when `block_n` is not a multiple
    /// of 16.
    pub fn chunk_bytes(&self) -> u32 {
        if self.accumulator().block_n() % 16 == 0 {
            16
        } else {
            8
        }
    }

    /// The CUDA source of the three kernels (header-free; compile for sm_90a, or any
    /// sm_70+).
    ///
    /// Signatures:
    /// - `fragmask_pack_tiles(const unsigned char* dense, int seqlen_q, int seqlen_k,
    ///   int m_blocks, int n_blocks, int tiles, int vector_ok, unsigned* scratch,
    ///   unsigned char* classes)`, any 1-D grid: `dense` is `[planes][seqlen_q][seqlen_k]`,
    ///   `tiles` = `planes * m_blocks * n_blocks`; `vector_ok` is nonzero when
    ///   `seqlen_k` and `dense` are 16-byte aligned (8 for 8-byte chunks); `scratch`
    ///   holds `planes * m_blocks * n_blocks * words_per_tile` words.
    /// - `fragmask_pack_lists(const unsigned char* classes, int rows, int n_blocks,
    ///   int* kv_num_blocks, int* kv_indices, int* full_kv_num_blocks, int* full_kv_indices,
    ///   int* kv_tile_offsets, int* partial_source, int* partial_count)`: `rows` =
    ///   `planes * m_blocks`.
    /// - `fragmask_pack_row_order(counts, full_counts, planes, m_blocks, order)`:
    ///   [`order_kernel`] of [`ListAxis::Forward`] over the lists' counts.
    /// - `fragmask_pack_compact(const unsigned* scratch, const int* partial_source,
    ///   const int* partial_count, int capacity, unsigned* words)`: copies the first
    ///   `min(partial_count, capacity)` partial tiles.
    pub fn source(&self) -> String {
        let acc = *self.accumulator();
        let (bm, bn) = (acc.block_m(), acc.block_n());
        let threads = acc.threads();
        let wpr = bn.div_ceil(32); // bit-matrix words per row
        let chunk = self.chunk_bytes();
        let chunks_per_row = bn / chunk;
        let chunks = bm * chunks_per_row;
        let w = self.words_per_thread();
        let wpt = self.words_per_tile();
        let warps = threads / 32;
        let mut s = String::with_capacity(24 * 1024);
        let _ = writeln!(
            s,
            "// fragmask GPU packer: dense bytes -> tile lists + FragmentNative words.\n\
             // Tile {bm}x{bn}, {wg} MMA warpgroup(s), {threads} threads, {w} word(s) per thread, {wpt} words per tile.\n\
             // Generated by fragmask-kernels from the accumulator's TV layout; compile for sm_90a.\n\
             // {thread_mode}\n// {value_mode}",
            wg = acc.warpgroups(),
            thread_mode = self.terms.thread_comment(),
            value_mode = self.terms.value_comment(),
        );
        let _ = writeln!(
            s,
            r#"
// Bit j of the result is set iff byte j of x is nonzero (4 bytes -> 4 bits, SWAR):
// the high bit of each byte of ((x & 0x7f..) + 0x7f..) | x is its "nonzero" flag, and
// the multiply by 2^21 + 2^14 + 2^7 + 1 moves the flags of bits 7, 15, 23, 31 to 28..31
// without carries (every partial product lands on a distinct bit).
__device__ __forceinline__ unsigned fm_nonzero4(unsigned x) {{
    const unsigned y = (((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x) & 0x80808080u;
    return (y * 0x00204081u) >> 28;
}}

// Where tile t (linear over planes x m_blocks x n_blocks) starts, and how much of it is
// inside the mask.
struct fm_pack_tile {{ const unsigned char* base; int rows_in; int cols_in; }};
__device__ __forceinline__ fm_pack_tile fm_pack_geometry(
    const unsigned char* dense, int t, int seqlen_q, int seqlen_k, int m_blocks, int n_blocks) {{
    const int n_block = t % n_blocks, rest = t / n_blocks;
    const int m_block = rest % m_blocks, plane = rest / m_blocks;
    fm_pack_tile g;
    g.base = dense + ((unsigned long long)plane * seqlen_q + (unsigned long long)m_block * {bm}u) * seqlen_k
        + (unsigned long long)n_block * {bn}u;
    g.rows_in = min(seqlen_q - m_block * {bm}, {bm});
    g.cols_in = min(seqlen_k - n_block * {bn}, {bn});
    return g;
}}

// Persistent: CTA b packs tiles b, b + gridDim.x, ...; the 16-byte loads of its next tile
// are in flight while it gathers and classifies the current one.
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks}) {tiles_kernel}(
    const unsigned char* __restrict__ dense, int seqlen_q, int seqlen_k, int m_blocks, int n_blocks,
    int tiles, int vector_ok, unsigned* __restrict__ scratch, unsigned char* __restrict__ classes)
{{
    // The tile as bits, row-major: bit c%32 of word r*{wpr} + c/32 is element (r, c).
    __shared__ __align__(16) unsigned bits[{bm} * {wpr}];
    __shared__ unsigned warp_ones[{warps}];
    const unsigned thread = threadIdx.x;
    int t = blockIdx.x;
    if (t >= tiles) return;
    // Chunk c = row * {cpr} + j covers columns [{chunk}j, {chunk}j + {chunk}) of row c / {cpr}; thread
    // owns chunks thread + k * {threads}. x[k] holds chunk k of the next tile when it is
    // fully inside the mask and 16-byte loads are allowed.
    unsigned x[{chunk_iters}][{xw}];
    auto prefetch = [&](int tile_index) {{
        const fm_pack_tile g = fm_pack_geometry(dense, tile_index, seqlen_q, seqlen_k, m_blocks, n_blocks);
#pragma unroll
        for (unsigned k = 0; k < {chunk_iters}u; ++k) {{
            const unsigned c = thread + k * {threads}u;
            const unsigned row = c / {cpr}u, j = c % {cpr}u;
            const int col0 = (int)(j * {chunk}u);
            if (({chunk_guard}) && vector_ok && (int)row < g.rows_in && col0 + {chunk} <= g.cols_in) {{
                const unsigned char* p = g.base + (unsigned long long)row * seqlen_k + col0;
{vector_load}
            }}
        }}
    }};
    prefetch(t);
    for (; t < tiles; t += gridDim.x) {{
        const fm_pack_tile g = fm_pack_geometry(dense, t, seqlen_q, seqlen_k, m_blocks, n_blocks);
        // ---- 1. bytes -> bits (out-of-mask elements are 0).
#pragma unroll
        for (unsigned k = 0; k < {chunk_iters}u; ++k) {{
            const unsigned c = thread + k * {threads}u;
            if ({chunk_guard}) {{
                const unsigned row = c / {cpr}u, j = c % {cpr}u;
                const int col0 = (int)(j * {chunk}u);
                unsigned flags = 0;
                if ((int)row < g.rows_in && col0 < g.cols_in) {{
                    if (vector_ok && col0 + {chunk} <= g.cols_in) {{
                        flags = {flags_from_x};
                    }} else {{
                        const unsigned char* p = g.base + (unsigned long long)row * seqlen_k + col0;
#pragma unroll 1
                        for (int b = 0; b < {chunk} && col0 + b < g.cols_in; ++b) {{ flags |= (p[b] != 0 ? 1u : 0u) << b; }}
                    }}
                }}
                {store_flags}
            }}
        }}
        if (t + (int)gridDim.x < tiles) prefetch(t + (int)gridDim.x);
        __syncthreads();
    // ---- 2. gather: thread t's FragmentNative words, value by value (row, col from the TV layout).
"#,
            tiles_kernel = TILES_KERNEL,
            // Three quarters of an SM's 2048 threads resident (at most 42 registers each,
            // no spills), so that 16 KB per CTA stay in flight.
            // (Larger tiles hold more prefetch registers: no minimum then.)
            min_blocks = if chunks.div_ceil(threads) * chunk / 4 <= 16 {
                (1536 / threads).max(1)
            } else {
                1
            },
            cpr = chunks_per_row,
            chunk_iters = chunks.div_ceil(threads),
            chunk_guard = if chunks % threads == 0 {
                "true".to_string()
            } else {
                format!("c < {chunks}u")
            },
            xw = chunk / 4,
            vector_load = if chunk == 16 {
                "                asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\" : \"=r\"(x[k][0]), \"=r\"(x[k][1]), \"=r\"(x[k][2]), \"=r\"(x[k][3]) : \"l\"(p));"
            } else {
                "                asm volatile(\"ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];\" : \"=r\"(x[k][0]), \"=r\"(x[k][1]) : \"l\"(p));"
            },
            flags_from_x = if chunk == 16 {
                "fm_nonzero4(x[k][0]) | (fm_nonzero4(x[k][1]) << 4) | (fm_nonzero4(x[k][2]) << 8) | (fm_nonzero4(x[k][3]) << 12)"
            } else {
                "fm_nonzero4(x[k][0]) | (fm_nonzero4(x[k][1]) << 4)"
            },
            store_flags = if chunk == 16 {
                format!("reinterpret_cast<unsigned short*>(bits)[row * {}u + j] = (unsigned short)flags;", wpr * 2)
            } else {
                format!(
                    "reinterpret_cast<unsigned char*>(bits)[row * {}u + j] = (unsigned char)flags;",
                    wpr * 4
                )
            },
        );
        let _ = writeln!(
            s,
            "    const unsigned row_t = {}; // tile row of value 0, {}\n    \
             const unsigned col_t = {}; // tile column of value 0, {}\n    \
             unsigned words[{w}];\n\
             #pragma unroll\n    for (int i = 0; i < {w}; ++i) {{ words[i] = 0u; }}",
            self.terms.thread_row().cuda(&[]),
            self.terms.thread_comment(),
            self.terms.thread_col().cuda(&[]),
            self.terms.thread_comment(),
        );
        for value in 0..acc.values_per_thread() {
            let (rv, cv) = self.terms.value_offset(value);
            let _ = writeln!(
                s,
                "    {{ const unsigned col = col_t + {cv}u; // value {value} = (row_t+{rv}, col_t+{cv}), tv_layout value mode\n      \
                 words[{word}] |= ((bits[(row_t + {rv}u) * {wpr}u + (col >> 5)] >> (col & 31u)) & 1u) << {bit}u; }}",
                word = value / 32,
                bit = value % 32,
            );
        }
        let store = match w {
            1 => "            scratch_words[0] = words[0];".to_string(),
            2 => "            *reinterpret_cast<uint2*>(scratch_words) = make_uint2(words[0], words[1]);".to_string(),
            4 => "            *reinterpret_cast<uint4*>(scratch_words) = make_uint4(words[0], words[1], words[2], words[3]);".to_string(),
            _ => format!(
                "#pragma unroll\n            for (int i = 0; i < {w}; ++i) {{ scratch_words[i] = words[i]; }}"
            ),
        };
        let _ = writeln!(
            s,
            r#"    // ---- 3. classify: ones of the tile = sum of the threads' popcounts.
    unsigned ones = 0;
#pragma unroll
    for (int i = 0; i < {w}; ++i) {{ ones += __popc(words[i]); }}
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {{ ones += __shfl_xor_sync(0xffffffffu, ones, d); }}
    if ((thread & 31u) == 0) {{ warp_ones[thread >> 5] = ones; }}
    __syncthreads();
    unsigned total = 0;
#pragma unroll
    for (int i = 0; i < {warps}; ++i) {{ total += warp_ones[i]; }}
    const unsigned long long tile_index = (unsigned long long)t;
    const unsigned char cls = total == 0u ? {empty} : (total == {area}u ? {full} : {partial});
    if (thread == 0) {{ classes[tile_index] = cls; }}
    if (cls == {partial}) {{
        // FragmentNative words ({threads},{w}):({w},1): thread t's words are contiguous.
        unsigned* scratch_words = scratch + tile_index * {wpt}u + thread * {w}u;
{store}
    }}
    }}  // next tile
}}
"#,
            empty = class::EMPTY,
            full = class::FULL,
            partial = class::PARTIAL,
            area = bm * bn,
        );
        s.push_str(&lists_kernel(ListAxis::Forward));
        s.push_str(&order_kernel(ListAxis::Forward));
        let _ = writeln!(
            s,
            r#"
// Copies partial tile p's {wpt} words from scratch slot partial_source[p], 16 bytes per thread.
extern "C" __global__ void __launch_bounds__({compact_threads}) {compact_kernel}(
    const unsigned* __restrict__ scratch, const int* __restrict__ partial_source,
    const int* __restrict__ partial_count, int capacity, unsigned* __restrict__ words)
{{
    const int count = min(*partial_count, capacity);
    for (int p = blockIdx.x; p < count; p += gridDim.x) {{
        const unsigned* src = scratch + (unsigned long long)partial_source[p] * {wpt}u;
        unsigned* dst = words + (unsigned long long)p * {wpt}u;
{copy}
    }}
}}"#,
            compact_kernel = COMPACT_KERNEL,
            compact_threads = COMPACT_THREADS,
            copy = if wpt % 4 == 0 {
                format!(
                    "        for (unsigned i = threadIdx.x; i < {}u; i += {COMPACT_THREADS}u) {{\n            \
                     reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];\n        }}",
                    wpt / 4
                )
            } else {
                format!(
                    "        for (unsigned i = threadIdx.x; i < {wpt}u; i += {COMPACT_THREADS}u) {{ dst[i] = src[i]; }}"
                )
            },
        );
        s
    }
}

/// Which lists a list kernel builds from the tile classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListAxis {
    /// The forward lists: a row per `(plane, m_block)`, entries `n_block` ascending
    /// (`kv_num_blocks`, `kv_indices`, ...).
    Forward,
    /// The transposed lists of the backward pass: a row per `(plane, n_block)`, entries
    /// `m_block` ascending (`q_num_blocks`, `q_indices`, ...; docs/masks.md
    /// "Transposed lists").
    Transposed,
}

/// The list kernel of `axis`, one CTA of [`LIST_THREADS`]. The classes are always the
/// tile kernel's, indexed by the forward tile `(plane * m_blocks + m) * n_blocks + n`;
/// the axis picks which index a row walks.
///
/// Signatures: `fragmask_pack_lists(classes, rows, n_blocks, counts, indices,
/// full_counts, full_indices, tile_offsets, partial_source, partial_count)` with
/// `rows = planes * m_blocks` rows of `n_blocks`; `fragmask_pack_lists_t(classes, rows,
/// m_blocks, n_blocks, ...)` (same outputs) with `rows = planes * n_blocks` rows of
/// `m_blocks`. `partial_source[p]` is partial tile `p`'s forward tile index.
pub fn lists_kernel(axis: ListAxis) -> String {
    let (name, dims, len, tile_of, what) = match axis {
        ListAxis::Forward => (
            LISTS_KERNEL,
            "int n_blocks",
            "n_blocks",
            // Row `row` = (plane, m_block) of the [planes, m_blocks, n_blocks] tile grid.
            "(unsigned long long)row * n_blocks + n",
            "row (plane, m_block), entry n_block: tile row * n_blocks + n",
        ),
        ListAxis::Transposed => (
            TRANSPOSED_LISTS_KERNEL,
            "int m_blocks, int n_blocks",
            "m_blocks",
            "((unsigned long long)(row / n_blocks) * m_blocks + n) * n_blocks + row % n_blocks",
            "row (plane, n_block), entry m_block: tile (plane * m_blocks + m) * n_blocks + n_block",
        ),
    };
    format!(
        r#"// One CTA: warp w handles row of tiles (32 * batch + w). Pass A counts each row's partial
// tiles, a scan over the 32 counts (plus the running total) gives each row's first partial
// index, pass B writes the lists. Tile grid [planes, m_blocks, n_blocks]; {what}.
extern "C" __global__ void __launch_bounds__({list_threads}) {name}(
    const unsigned char* __restrict__ classes, int rows, {dims},
    int* __restrict__ kv_num_blocks, int* __restrict__ kv_indices,
    int* __restrict__ full_kv_num_blocks, int* __restrict__ full_kv_indices,
    int* __restrict__ kv_tile_offsets, int* __restrict__ partial_source, int* __restrict__ partial_count)
{{
    __shared__ int row_partial[32];
    __shared__ int row_base[32];
    __shared__ int carry;
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned lanes_below = (1u << lane) - 1u;
    if (threadIdx.x == 0) {{ carry = 0; }}
    __syncthreads();
    for (int batch = 0; batch < rows; batch += 32) {{
        const int row = batch + (int)warp;
        int partial = 0;
        if (row < rows) {{
            for (int n0 = 0; n0 < {len}; n0 += 32) {{
                const int n = n0 + (int)lane;
                partial += __popc(__ballot_sync(0xffffffffu, n < {len} && classes[{tile_of}] == {partial_class}));
            }}
        }}
        if (lane == 0) {{ row_partial[warp] = row < rows ? partial : 0; }}
        __syncthreads();
        if (threadIdx.x == 0) {{
            int running = carry;
            for (int i = 0; i < 32; ++i) {{ row_base[i] = running; running += row_partial[i]; }}
            carry = running;
        }}
        __syncthreads();
        if (row < rows) {{
            const int base = row_base[warp];
            const unsigned long long list = (unsigned long long)row * {len};
            int np = 0, nf = 0;
            for (int n0 = 0; n0 < {len}; n0 += 32) {{
                const int n = n0 + (int)lane;
                const unsigned long long tile = {tile_of};
                const unsigned char c = n < {len} ? classes[tile] : {empty_class};
                const unsigned pm = __ballot_sync(0xffffffffu, c == {partial_class});
                const unsigned fm = __ballot_sync(0xffffffffu, c == {full_class});
                if (c == {partial_class}) {{
                    const int j = np + __popc(pm & lanes_below);
                    kv_indices[list + j] = n;
                    kv_tile_offsets[list + j] = base + j;
                    partial_source[base + j] = (int)tile;
                }}
                if (c == {full_class}) {{ full_kv_indices[list + nf + __popc(fm & lanes_below)] = n; }}
                np += __popc(pm);
                nf += __popc(fm);
            }}
            for (int j = np + (int)lane; j < {len}; j += 32) {{ kv_indices[list + j] = 0; kv_tile_offsets[list + j] = -1; }}
            for (int j = nf + (int)lane; j < {len}; j += 32) {{ full_kv_indices[list + j] = 0; }}
            if (lane == 0) {{ kv_num_blocks[row] = np; full_kv_num_blocks[row] = nf; }}
        }}
        __syncthreads();
    }}
    if (threadIdx.x == 0) {{ *partial_count = carry; }}
}}
"#,
        list_threads = LIST_THREADS,
        partial_class = class::PARTIAL,
        full_class = class::FULL,
        empty_class = class::EMPTY,
    )
}

/// The dispatch-order kernel of `axis` (`fragmask_masks::row_order` for the forward lists,
/// `fragmask_masks::tile_order` for the transposed ones): row `i` of a plane (count `c_i`,
/// partial plus full entries) goes to rank `#{j : c_j > c_i}` plus its ties' share: the
/// ties before it in index order (transposed) or after it (forward, whose grid without
/// counts runs from the last row). Each thread compares its row with every row of the
/// plane: `rows²` comparisons per plane, over `ceil(rows / ORDER_THREADS)` CTAs.
///
/// Signature: `(const int* counts, const int* full_counts, int planes, int rows,
/// int* order)`, grid `(ceil(rows / ORDER_THREADS), any)` of [`ORDER_THREADS`]; the
/// counts and `order` hold `planes * rows`.
pub fn order_kernel(axis: ListAxis) -> String {
    let (name, tie, what) = match axis {
        ListAxis::Forward => (
            ROW_ORDER_KERNEL,
            "j0 + k > i",
            "the forward's row blocks, ties from the last row",
        ),
        ListAxis::Transposed => (
            TILE_ORDER_KERNEL,
            "j0 + k < i",
            "the backward's key tiles, ties by index",
        ),
    };
    format!(
        r#"
// Dispatch order ({what}): per plane, the rows by c = counts + full_counts, most first.
// Thread i's row goes to rank #{{j : c_j > c_i}} + #{{tied j before it}}; the plane's counts
// pass through shared memory a chunk at a time.
extern "C" __global__ void __launch_bounds__({t}) {name}(
    const int* __restrict__ counts, const int* __restrict__ full_counts,
    int planes, int rows, int* __restrict__ order)
{{
    __shared__ int chunk[{t}];
    const int i = (int)(blockIdx.x * {t}u + threadIdx.x);
    for (int plane = blockIdx.y; plane < planes; plane += gridDim.y) {{
        const unsigned long long row0 = (unsigned long long)plane * (unsigned)rows;
        const int ci = i < rows ? counts[row0 + i] + full_counts[row0 + i] : 0;
        int rank = 0;
        for (int j0 = 0; j0 < rows; j0 += {t}) {{
            const int j = j0 + (int)threadIdx.x;
            __syncthreads();  // the previous chunk's reads are done
            chunk[threadIdx.x] = j < rows ? counts[row0 + j] + full_counts[row0 + j] : 0;
            __syncthreads();
            const int len = min({t}, rows - j0);
            for (int k = 0; k < len; ++k) {{
                const int cj = chunk[k];
                rank += (cj > ci) | (cj == ci && {tie});
            }}
        }}
        if (i < rows) {{ order[row0 + rank] = i; }}
    }}
}}
"#,
        t = ORDER_THREADS,
    )
}
