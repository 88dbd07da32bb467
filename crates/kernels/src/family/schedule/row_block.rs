//! Row-block schedules: the key blocks one query row block of the forward visits,
//! `FM_STEP_BLOCKS` per step. Each defines `fm_schedule` with `row0` (the global row of
//! its row and key 0), `seqlen_q` and `seqlen_k` (its bounds), which the forward's
//! loads, mask and epilogue read. Placeholders: `$WINDOW_INFINITE` ([`super::WINDOW_INFINITE`]),
//! and for the lists `$MASK_THREADS`, `$MASK_WORDS` (the mask words' shape, in comments).
//! Needs `fm_attn_params`, `FM_BLOCK_M`, `FM_BLOCK_N`, `FM_STEP_BLOCKS`.

/// The window walk of one row block, shared by [`WINDOW`] (the whole sequence) and
/// [`DOCUMENTS`] (one document): `fm_window_walk(p, m_block, seqlen_q, seqlen_k,
/// n_blocks)` and `fm_tile_at`, with the bounds as arguments so a document passes its own.
macro_rules! window_walk {
    () => {
        r#"// Key j is visible from query i iff i + diag_offset - window_left <= j <= i + diag_offset + window_right
// and j < seqlen_k. Key blocks are visited from the highest down, FM_STEP_BLOCKS per step, so the diagonal
// (partial) blocks come first, as in FlashAttention-3. Rows and keys count from the walk's row0 (0 for the
// whole sequence, a document's first token in documents mode); seqlen_q / seqlen_k bound them.
struct fm_schedule {
    int num_tiles;   // steps this block visits
    int kk0;         // the block's first step (split-KV: its split's share starts there)
    int n_last;      // highest visited key block; step kk holds blocks n_last - FM_STEP_BLOCKS*kk - h
    int n_first;     // lowest visited key block
    int m0;          // first query row of the block
    int m_end;       // last real query row of the block (< seqlen_q)
    int n_full_lo;   // key blocks n_full_lo ..= n_full_hi are fully visible from every row of the block
    int n_full_hi;   // (computed once, as FlashAttention-3's n_block_min/max masking bounds)
    int row0;        // global row (of q, k, v, o, lse) of the walk's row and key 0
    int seqlen_q;    // query rows of the walk (the epilogue's row bound)
    int seqlen_k;    // keys of the walk (the mask's key bound)
};

// floor(a / b) for b > 0 (C++ division truncates toward zero).
__device__ __forceinline__ long long fm_floor_div(long long a, long long b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

__device__ __forceinline__ fm_schedule fm_window_walk(const fm_attn_params& p, int m_block, int seqlen_q, int seqlen_k,
                                                      int n_blocks) {
    fm_schedule s;
    s.kk0 = 0;
    s.row0 = 0;
    s.seqlen_q = seqlen_q;
    s.seqlen_k = seqlen_k;
    s.m0 = m_block * FM_BLOCK_M;
    s.m_end = min(s.m0 + FM_BLOCK_M, seqlen_q) - 1;
    const long long lo = (long long)s.m0 + p.diag_offset - (long long)p.window_left;   // lowest visible key
    const long long hi = (long long)s.m_end + p.diag_offset + (long long)p.window_right; // highest visible key
    const int n_first = (p.window_left >= $WINDOW_INFINITE || lo <= 0) ? 0 : (int)min(lo / FM_BLOCK_N, (long long)n_blocks);
    int n_last;
    if (p.window_right >= $WINDOW_INFINITE || hi >= (long long)seqlen_k - 1) n_last = n_blocks - 1;
    else if (hi < 0) n_last = -1;
    else n_last = (int)(hi / FM_BLOCK_N);
    const int blocks = max(0, n_last - n_first + 1);
    s.num_tiles = (blocks + FM_STEP_BLOCKS - 1) / FM_STEP_BLOCKS;
    s.n_last = n_last;
    s.n_first = n_first;
    // Block n (keys n0 = n*FM_BLOCK_N ..) is full iff n0 >= m_end + diag_offset - window_left (every row's left
    // bound), n0 + FM_BLOCK_N - 1 <= m0 + diag_offset + window_right (every row's right bound) and
    // n0 + FM_BLOCK_N <= seqlen_k: one interval of n, clamped to -1 ..= n_blocks.
    long long full_lo = 0, full_hi = fm_floor_div((long long)seqlen_k - FM_BLOCK_N, FM_BLOCK_N);
    if (p.window_left < $WINDOW_INFINITE)
        full_lo = -fm_floor_div(-((long long)s.m_end + p.diag_offset - p.window_left), FM_BLOCK_N);   // ceil
    if (p.window_right < $WINDOW_INFINITE)
        full_hi = min(full_hi, fm_floor_div((long long)s.m0 + p.diag_offset + p.window_right - FM_BLOCK_N + 1, FM_BLOCK_N));
    s.n_full_lo = (int)max(-1LL, min(full_lo, (long long)n_blocks));
    s.n_full_hi = (int)max(-1LL, min(full_hi, (long long)n_blocks));
    return s;
}

// One step: FM_STEP_BLOCKS key blocks side by side in the S tile (block h at columns h*FM_BLOCK_N..).
struct fm_tile {
    int n_block[FM_STEP_BLOCKS];    // key block of each slot; -1: no block (its columns are masked)
    int mask_tile[FM_STEP_BLOCKS];  // unused in window mode
    int partial;                    // 1: some element of the step is masked, apply the mask
};

__device__ __forceinline__ fm_tile fm_tile_at(const fm_attn_params& p, const fm_schedule& s, int kk) {
    fm_tile t;
    t.partial = 0;
#pragma unroll
    for (int h = 0; h < FM_STEP_BLOCKS; ++h) {
        const int n = s.n_last - FM_STEP_BLOCKS * (s.kk0 + kk) - h;
        t.n_block[h] = n >= s.n_first ? n : -1;
        t.mask_tile[h] = -1;
        // Fully visible iff every (row, key) of the block satisfies the window and the key bound.
        if (t.n_block[h] < 0 || n < s.n_full_lo || n > s.n_full_hi) t.partial = 1;
    }
    return t;
}
"#
    };
}

/// Window mode: the visited key blocks from the causal / sliding-window bounds, highest
/// first, so the diagonal (partial) blocks come first, as in FlashAttention-3.
pub const WINDOW: &str = concat!(
    "// ---- tile schedule: window mode (causal / sliding window / none), no mask words ----\n",
    window_walk!(),
    r#"
// Row block m_block of the whole sequence.
__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_attn_params& p, int batch, int head, int m_block) {
    return fm_window_walk(p, m_block, p.seqlen_q, p.seqlen_k, p.n_blocks);
}
"#
);

/// Documents (FlashAttention's varlen grid over `cu_seqlens`): each CTA is one work item
/// (document, row block of the document), and inside the document the window walk runs
/// with `seqlen_q = seqlen_k =` the document's length (causal: window `(inf, 0)`; full:
/// `(inf, inf)`; diagonal offset 0), moved to the document's first token by `row0`.
/// The host writes the items in launch order, most key blocks first.
pub const DOCUMENTS: &str = concat!(
    "// ---- tile schedule: documents (a varlen grid over contiguous documents), no mask words ----\n",
    window_walk!(),
    r#"
// Work item `item` of the grid is p.doc_items[4 item .. 4 item + 3] = (first token of its document, the
// document's length, its row block within the document, the document), one 16-byte load. The skeleton
// counts m_block from the grid's end, so item = m_blocks - 1 - m_block is the grid's x index: the table's
// own order (most key blocks first) is the launch order.
__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_attn_params& p, int batch, int head, int m_block) {
    const int item = p.m_blocks - 1 - m_block;
    const int4 w = __ldg(reinterpret_cast<const int4*>(p.doc_items) + item);
    const int len = w.y;
    fm_schedule s = fm_window_walk(p, w.z, len, len, (len + FM_BLOCK_N - 1) / FM_BLOCK_N);
    s.row0 = w.x;
    return s;
}
"#
);

/// Listed blocks: FlexAttention-style partial then full block lists of the row.
pub const LISTS: &str = r#"// ---- tile schedule: FlexAttention-style block lists + FragmentNative words ----
// Row (batch, head, m_block) of the [Bm, Hm, Mb] lists is batch*mask_batch_stride + head*mask_head_stride
// + m_block (strides are 0 where the mask broadcasts). Partial blocks (kv_indices) come first, then full ones;
// step kk takes list entries FM_STEP_BLOCKS*kk .. FM_STEP_BLOCKS*kk + FM_STEP_BLOCKS-1 of that sequence.
struct fm_schedule {
    int num_tiles;    // steps
    int kk0;          // the block's first step (split-KV: its split's share starts there)
    int num_blocks;   // partial + full blocks
    int num_partial;  // kv_num_blocks of this row
    int list_row;     // index of this (batch, head, m_block) in [Bm, Hm, Mb]
    int m0;           // first query row of the block
    int row0;         // global row of the block's row and key 0 (always 0: the lists are global)
    int seqlen_q;     // query rows (the epilogue's row bound)
    int seqlen_k;     // keys
};

__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_attn_params& p, int batch, int head, int m_block) {
    fm_schedule s;
    s.kk0 = 0;
    s.row0 = 0;
    s.seqlen_q = p.seqlen_q;
    s.seqlen_k = p.seqlen_k;
    s.m0 = m_block * FM_BLOCK_M;
    s.list_row = batch * p.mask_batch_stride + head * p.mask_head_stride + m_block;
    s.num_partial = __ldg(p.kv_num_blocks + s.list_row);
    s.num_blocks = s.num_partial + __ldg(p.full_kv_num_blocks + s.list_row);
    s.num_tiles = (s.num_blocks + FM_STEP_BLOCKS - 1) / FM_STEP_BLOCKS;
    return s;
}

// One step: FM_STEP_BLOCKS key blocks side by side in the S tile (block h at columns h*FM_BLOCK_N..).
struct fm_tile {
    int n_block[FM_STEP_BLOCKS];    // key block of each slot; -1: no block (its columns are masked)
    int mask_tile[FM_STEP_BLOCKS];  // index along dim 0 of words [tiles, $MASK_THREADS threads, $MASK_WORDS words]; -1: no words
    int partial;                    // 1: apply the mask (words, a missing slot, or the key bound of the last block)
};

__device__ __forceinline__ fm_tile fm_tile_at(const fm_attn_params& p, const fm_schedule& s, int kk) {
    fm_tile t;
    t.partial = 0;
    const long long row = (long long)s.list_row * p.n_blocks;   // [Bm, Hm, Mb, Nb] row of the index lists
#pragma unroll
    for (int h = 0; h < FM_STEP_BLOCKS; ++h) {
        const int e = FM_STEP_BLOCKS * (s.kk0 + kk) + h;   // entry of the partial-then-full sequence
        if (e < s.num_partial) {
            t.n_block[h] = __ldg(p.kv_indices + row + e);
            t.mask_tile[h] = __ldg(p.kv_tile_offsets + row + e);
            t.partial = 1;
        } else if (e < s.num_blocks) {
            t.n_block[h] = __ldg(p.full_kv_indices + row + (e - s.num_partial));
            t.mask_tile[h] = -1;
            // A full block still needs the key bound when it reaches past seqlen_k (K is zero-filled there).
            if ((long long)t.n_block[h] * FM_BLOCK_N + FM_BLOCK_N > (long long)p.seqlen_k) t.partial = 1;
        } else {
            t.n_block[h] = -1;
            t.mask_tile[h] = -1;
            t.partial = 1;
        }
    }
    return t;
}
"#;
