//! Row-block schedules: the key blocks one query row block of the forward visits,
//! `FM_STEP_BLOCKS` per step. Placeholders: `$WINDOW_INFINITE` ([`super::WINDOW_INFINITE`]),
//! the window walk's `$WALK_*` ([`RowGrid::values`]),
//! and for the lists `$MASK_THREADS`, `$MASK_WORDS` (the mask words' shape, in comments) and
//! `$LISTS_DENSE` ([`super::ListEntries::dense_expr`]).
//! Needs `fm_attn_params`, `FM_BLOCK_M`, `FM_BLOCK_N`, `FM_STEP_BLOCKS`.

/// Window mode: the visited key blocks from the causal / sliding-window bounds, highest
/// first, so the diagonal (partial) blocks come first, as in FlashAttention-3. The walk
/// of the whole sequence ([`RowGrid::Global`]) and of one document ([`RowGrid::Documents`],
/// the [`DOCUMENTS`] component) is this one text; [`RowGrid::values`] fills its
/// placeholders (`$WALK_*`), so the global walk's text is the window kernel's as it was.
pub const WINDOW: &str = r#"// ---- tile schedule: window mode (causal / sliding window / none), no mask words$WALK_TITLE ----
// Key j is visible from query i iff i + diag_offset - window_left <= j <= i + diag_offset + window_right
// and j < seqlen_k. Key blocks are visited from the highest down, FM_STEP_BLOCKS per step, so the diagonal
// (partial) blocks come first, as in FlashAttention-3.
struct fm_schedule {
    int num_tiles;   // steps this block visits
    int kk0;         // the block's first step (split-KV: its split's share starts there)
    int n_last;      // highest visited key block; step kk holds blocks n_last - FM_STEP_BLOCKS*kk - h
    int n_first;     // lowest visited key block
    int m0;          // first query row of the block
    int m_end;       // last real query row of the block (< seqlen_q)
    int n_full_lo;   // key blocks n_full_lo ..= n_full_hi are fully visible from every row of the block
    int n_full_hi;   // (computed once, as FlashAttention-3's n_block_min/max masking bounds)
$WALK_FIELDS};

// floor(a / b) for b > 0 (C++ division truncates toward zero).
__device__ __forceinline__ long long fm_floor_div(long long a, long long b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_attn_params& p, int batch, int head, int $WALK_GRID_BLOCK) {
$WALK_ITEM    fm_schedule s;
    s.kk0 = 0;
    s.m0 = m_block * FM_BLOCK_M;
    s.m_end = min(s.m0 + FM_BLOCK_M, $WALK_ROWS) - 1;
    const long long lo = (long long)s.m0 + p.diag_offset - (long long)p.window_left;   // lowest visible key
    const long long hi = (long long)s.m_end + p.diag_offset + (long long)p.window_right; // highest visible key
    const int n_first = (p.window_left >= $WINDOW_INFINITE || lo <= 0) ? 0 : (int)min(lo / FM_BLOCK_N, (long long)$WALK_N_BLOCKS);
    int n_last;
    if (p.window_right >= $WINDOW_INFINITE || hi >= (long long)$WALK_KEYS - 1) n_last = $WALK_N_BLOCKS - 1;
    else if (hi < 0) n_last = -1;
    else n_last = (int)(hi / FM_BLOCK_N);
    const int blocks = max(0, n_last - n_first + 1);
    s.num_tiles = (blocks + FM_STEP_BLOCKS - 1) / FM_STEP_BLOCKS;
    s.n_last = n_last;
    s.n_first = n_first;
    // Block n (keys n0 = n*FM_BLOCK_N ..) is full iff n0 >= m_end + diag_offset - window_left (every row's left
    // bound), n0 + FM_BLOCK_N - 1 <= m0 + diag_offset + window_right (every row's right bound) and
    // n0 + FM_BLOCK_N <= seqlen_k: one interval of n, clamped to -1 ..= n_blocks.
    long long full_lo = 0, full_hi = fm_floor_div((long long)$WALK_KEYS - FM_BLOCK_N, FM_BLOCK_N);
    if (p.window_left < $WINDOW_INFINITE)
        full_lo = -fm_floor_div(-((long long)s.m_end + p.diag_offset - p.window_left), FM_BLOCK_N);   // ceil
    if (p.window_right < $WINDOW_INFINITE)
        full_hi = min(full_hi, fm_floor_div((long long)s.m0 + p.diag_offset + p.window_right - FM_BLOCK_N + 1, FM_BLOCK_N));
    s.n_full_lo = (int)max(-1LL, min(full_lo, (long long)$WALK_N_BLOCKS));
    s.n_full_hi = (int)max(-1LL, min(full_hi, (long long)$WALK_N_BLOCKS));
$WALK_PLACE    return s;
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
"#;

/// The documents component of the window walk (FlashAttention's varlen grid over
/// `cu_seqlens`): each CTA is one work item (document, row block of the document) of
/// `AttentionParams::doc_items`, and inside the document the window walk runs with
/// `seqlen_q = seqlen_k =` the document's length (causal: window `(inf, 0)`; full:
/// `(inf, inf)`; diagonal offset 0). The host writes the items in launch order, most
/// key blocks first. Fills `$WALK_ITEM` of [`WINDOW`].
pub const DOCUMENTS: &str = r#"    // Documents grid: work item `item` = p.doc_items[4 item .. 4 item + 3] = (first token of its document,
    // the document's length, the row block within the document, the document), one 16-byte load. The skeleton
    // counts grid_block from the grid's end, so item = m_blocks - 1 - grid_block is the grid's x index: the
    // table's own order (most key blocks first) is the launch order. The walk below is the document's.
    const int4 item = __ldg(reinterpret_cast<const int4*>(p.doc_items) + (p.m_blocks - 1 - grid_block));
    const int m_block = item.z;
    const int doc_len = item.y;
    const int doc_blocks = (doc_len + FM_BLOCK_N - 1) / FM_BLOCK_N;
"#;

/// The grid a row-block window walk runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowGrid {
    /// Row blocks of the whole sequence (`m_block` from the grid).
    Global,
    /// (document, row block) work items ([`DOCUMENTS`]).
    Documents,
}

/// Where a schedule's rows and keys sit in the tensors, as the expressions the forward's
/// loads, window mask and epilogue paste: the Q tile's first row (`q_row`), the global
/// row of the schedule's row 0 in a `(batch, head)` plane (`row_base`, from the
/// epilogue's `head_row0`), the key row of key block 0 (`kv_row0`), the query rows
/// written (`row_bound`) and the keys visible (`key_bound`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// First row of the Q tile (TMA coordinate).
    pub q_row: &'static str,
    /// Global row of the schedule's row 0 (`head_row0` plus the document start).
    pub row_base: &'static str,
    /// Row of the schedule's row 0 within its `(batch, head)` plane of o (the document
    /// start, or 0): o's row `r` is at `o_plane + (plane_row0 + r) * o_stride_s`.
    pub plane_row0: &'static str,
    /// Global row of key 0 within the `(batch, kv head)` plane.
    pub kv_row0: &'static str,
    /// Rows the epilogue writes: `row < row_bound`.
    pub row_bound: &'static str,
    /// Keys visible: `key < key_bound`.
    pub key_bound: &'static str,
}

impl RowGrid {
    /// The values of [`WINDOW`]'s `$WALK_*` placeholders.
    pub fn values(self) -> Vec<(&'static str, String)> {
        let (title, fields, grid_block, item, rows, keys, n_blocks, place) = match self {
            RowGrid::Global => ("", "", "m_block", "", "p.seqlen_q", "p.seqlen_k", "p.n_blocks", ""),
            RowGrid::Documents => (
                " (inside each document of the documents grid)",
                "    int row0;        // first token of the document: global row of the walk's row and key 0\n    int len;         // the document's tokens (the walk's seqlen_q and seqlen_k)\n",
                "grid_block",
                DOCUMENTS,
                "doc_len",
                "doc_len",
                "doc_blocks",
                "    s.row0 = item.x;\n    s.len = doc_len;\n",
            ),
        };
        [
            ("WALK_TITLE", title),
            ("WALK_FIELDS", fields),
            ("WALK_GRID_BLOCK", grid_block),
            ("WALK_ITEM", item),
            ("WALK_ROWS", rows),
            ("WALK_KEYS", keys),
            ("WALK_N_BLOCKS", n_blocks),
            ("WALK_PLACE", place),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect()
    }

    /// Where the grid's rows sit ([`Placement`]): the global grid's are the call's own
    /// (the expressions the window and list kernels always had); a document's are moved
    /// by its first token and bounded by its length.
    pub fn placement(self) -> Placement {
        match self {
            RowGrid::Global => Placement {
                q_row: "m_block * FM_BLOCK_M",
                row_base: "head_row0",
                plane_row0: "0",
                kv_row0: "0",
                row_bound: "p.seqlen_q",
                key_bound: "p.seqlen_k",
            },
            RowGrid::Documents => Placement {
                q_row: "sched.row0 + sched.m0",
                row_base: "(head_row0 + sched.row0)",
                plane_row0: "sched.row0",
                kv_row0: "sched.row0",
                row_bound: "sched.len",
                key_bound: "sched.len",
            },
        }
    }
}

/// Where the shared-K/V tile's rows sit ([`SHARED_LISTS`]): each warpgroup's own query
/// block, through its view of the schedule (`fm_warpgroup_view`: `sched.m0` puts the
/// warpgroup's row `64 wg` at its block's first row, `sched.rows` is 0 for a warpgroup
/// without a block). Its Q rows are loaded per warpgroup, so `q_row` is not used.
pub const SHARED_PLACEMENT: Placement = Placement {
    q_row: "",
    row_base: "head_row0",
    plane_row0: "0",
    kv_row0: "0",
    row_bound: "sched.rows",
    key_bound: "p.seqlen_k",
};

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
    int dense;        // 1: dense lists, entries computed (family::schedule::ListEntries)
};

__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_attn_params& p, int batch, int head, int m_block) {
    fm_schedule s;
    s.kk0 = 0;
    s.m0 = m_block * FM_BLOCK_M;
    s.list_row = batch * p.mask_batch_stride + head * p.mask_head_stride + m_block;
    s.num_partial = __ldg(p.kv_num_blocks + s.list_row);
    s.num_blocks = s.num_partial + __ldg(p.full_kv_num_blocks + s.list_row);
    s.num_tiles = (s.num_blocks + FM_STEP_BLOCKS - 1) / FM_STEP_BLOCKS;
    s.dense = $LISTS_DENSE;
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
            if (s.dense) {   // dense lists: entry e is key block e, its words tile row + e (no list read)
                t.n_block[h] = e;
                t.mask_tile[h] = (int)(row + e);
            } else {
                t.n_block[h] = __ldg(p.kv_indices + row + e);
                t.mask_tile[h] = __ldg(p.kv_tile_offsets + row + e);
            }
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

/// How a forward CTA gets its work tiles (row block, head, batch): one from the launch grid
/// ([`WORK_GRID`]), a list of them from the host's table ([`WORK_PERSISTENT`]), or one
/// tile or one split of it ([`WORK_TAIL`]). Each defines `FM_PERSISTENT`, `FM_Q_BUFFERS`,
/// `fm_work` (with the tile's split and split count), `fm_work_begin/end/at` and
/// `fm_work_ws_row0` (where a split's partial rows go in the workspace); the
/// skeleton loops `w` over `[fm_work_begin, fm_work_end)`, which for the grid is the one
/// iteration `w = 0` (a constant trip count: the loop folds away).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowWork {
    /// One work tile per CTA.
    Grid,
    /// Persistent CTAs walking the host's per-CTA tile lists.
    Persistent,
    /// One work tile per CTA, the launch's last tiles cut into splits ([`WORK_TAIL`]).
    Tail,
}

impl RowWork {
    /// The component's text.
    pub fn text(self) -> &'static str {
        match self {
            RowWork::Grid => WORK_GRID,
            RowWork::Persistent => WORK_PERSISTENT,
            RowWork::Tail => WORK_TAIL,
        }
    }
}

/// One work tile per CTA, read off the grid in launch order (the linear block index,
/// x fastest): sections of `p.head_section` (head, batch) planes, and inside a section
/// the row blocks' splits from the last row block (longest first, causal) with the
/// section's planes fastest (FlashAttention-4's `SingleTileLPTScheduler`: a section's
/// K/V fit in L2, and the whole launch runs longest first). A section of one plane is
/// the grid itself: x the row blocks' splits, y the head, z the batch. The host's mirror
/// is `attention::persistent::grid_tile`.
pub const WORK_GRID: &str = r#"// ---- work tiles: one per CTA, from the grid in launch order: sections of p.head_section (head, batch) planes; in a
// section the row blocks' splits (last row block first), the section's planes fastest ----
#define FM_PERSISTENT 0
#define FM_Q_BUFFERS 1                   // one Q tile: the CTA runs one work tile
struct fm_work { int split; int splits; int m_block; int head; int batch; };
__device__ __forceinline__ int fm_work_begin(const fm_attn_params&) { return 0; }
__device__ __forceinline__ int fm_work_end(const fm_attn_params&) { return 1; }
__device__ __forceinline__ fm_work fm_work_at(const fm_attn_params& p, int, unsigned num_splits) {
    fm_work t;
    const unsigned xs = gridDim.x;                                     // row blocks x splits
    const uint2 at = fm_section_tile(p.head_section);                 // (x index, plane)
    const unsigned xi = at.x, plane = at.y;
    t.split = (int)(xi % num_splits);
    t.splits = (int)num_splits;
    t.m_block = fm_grid_row(p, (int)(plane % gridDim.y), (int)(plane / gridDim.y), xi / num_splits, xs / num_splits);
    t.head = (int)(plane % gridDim.y);
    t.batch = (int)(plane / gridDim.y);
    return t;
}
// Workspace rows [split][B][H][Sq]: the split's partial of global row head_row0 + r is row fm_work_ws_row0 + r.
__device__ __forceinline__ long long fm_work_ws_row0(const fm_attn_params& p, const fm_work& w, long long head_row0) {
    return (long long)w.split * p.batch * p.heads * p.seqlen_q + head_row0;
}
"#;

/// The one-tile grid's row block of launch rank `rank` (0 first) among a plane's `rows`:
/// from the last row block (a causal walk's longest first). [`WORK_GRID`] calls it.
pub const GRID_ROW_FROM_LAST: &str = r#"// The row block of launch rank `rank` among a plane's `rows`: from the last (a causal walk's longest first).
__device__ __forceinline__ int fm_grid_row(const fm_attn_params&, int, int, unsigned rank, unsigned rows) {
    return (int)(rows - 1u - rank);
}
"#;

/// [`GRID_ROW_FROM_LAST`] for tile lists: the mask's dispatch order where the plan gives
/// one (`AttentionParams::row_order`: per mask plane, the row blocks by their key-tile
/// count, most first, ties from the last row; `fragmask_masks::row_order`), so that the
/// longest walks start first; from the last row block without it.
pub const GRID_ROW_ORDER: &str = r#"// The row block of launch rank `rank` among a plane's `rows`: p.row_order's (the mask's rows by key-tile count, most
// first; [Bm, Hm, Mb] in the lists' row strides), or from the last without it.
__device__ __forceinline__ int fm_grid_row(const fm_attn_params& p, int head, int batch, unsigned rank, unsigned rows) {
    if (!p.row_order) return (int)(rows - 1u - rank);
    const long long row = (long long)batch * p.mask_batch_stride + (long long)head * p.mask_head_stride + rank;
    return __ldg(p.row_order + row);
}
"#;

/// Persistent CTAs (FlashAttention-3's `StaticPersistentTileScheduler` and FlashAttention-4's
/// `tile_scheduler.py` run one CTA per SM over a tile loop; docs/architecture.md,
/// "Persistent forward"): `AttentionParams::work` holds `gridDim.x + 1` offsets, then the
/// tiles; CTA c runs tiles `[work[c], work[c + 1])` in order, each the linear index of a
/// CTA of the one-tile grid ([`WORK_GRID`], one split): `x + m_blocks (head + heads batch)`.
pub const WORK_PERSISTENT: &str = r#"// ---- work tiles: persistent CTAs; p.work = [gridDim.x + 1 offsets | tiles] ----
// CTA c runs tiles p.work[gridDim.x + 1 + w] for w in [p.work[c], p.work[c + 1]), each the index x + m_blocks (head +
// heads batch) of a CTA of the one-tile grid (x: the row block counted from the last). The host lists them in that
// grid's launch order, each given to the CTA an estimate of its steps says is free first (attention::persistent).
#define FM_PERSISTENT 1
#define FM_Q_BUFFERS 2                   // two Q tiles: the next tile's Q loads while this one's O is staged
struct fm_work { int split; int splits; int m_block; int head; int batch; };
__device__ __forceinline__ int fm_work_begin(const fm_attn_params& p) { return __ldg(p.work + blockIdx.x); }
__device__ __forceinline__ int fm_work_end(const fm_attn_params& p) { return __ldg(p.work + blockIdx.x + 1); }
__device__ __forceinline__ fm_work fm_work_at(const fm_attn_params& p, int w, unsigned) {
    const int tile = __ldg(p.work + gridDim.x + 1 + w);
    const int rest = tile / p.m_blocks;
    fm_work t;
    t.split = 0;
    t.splits = 1;
    t.m_block = p.m_blocks - 1 - (tile - rest * p.m_blocks);
    t.head = rest % p.heads;
    t.batch = rest / p.heads;
    return t;
}
// Persistent CTAs never split: no workspace rows.
__device__ __forceinline__ long long fm_work_ws_row0(const fm_attn_params&, const fm_work&, long long) { return 0; }
"#;

/// The split tail (docs/architecture.md, "Split tail"): the one-tile grid's work tiles in
/// its plain launch order (tile `t = x + m_blocks (head + heads batch)`, x counted from the
/// last row block, as [`WORK_PERSISTENT`] numbers them), on a one-dimensional grid whose
/// last `p.tail_tiles` tiles are cut into `p.num_splits` splits each: CTA `c < whole`
/// runs tile `c` whole, CTA `whole + i` split `i % n` of tile `whole + i / n`. The last
/// wave then runs shorter pieces on more SMs. A split's partial goes to workspace rows
/// `[split][tail tile][block_m]`, which the combine merges into o and lse. The host's
/// mirror is `attention::splits::TailSplit::work_at`.
pub const WORK_TAIL: &str = r#"// ---- work tiles: one per CTA in the plain launch order, the last p.tail_tiles cut into p.num_splits splits ----
#define FM_PERSISTENT 0
#define FM_Q_BUFFERS 1                   // one Q tile: the CTA runs one work tile or one split of it
struct fm_work { int split; int splits; int m_block; int head; int batch; int tail; };
__device__ __forceinline__ int fm_work_begin(const fm_attn_params&) { return 0; }
__device__ __forceinline__ int fm_work_end(const fm_attn_params&) { return 1; }
__device__ __forceinline__ fm_work fm_work_at(const fm_attn_params& p, int, unsigned num_splits) {
    const unsigned tiles = (unsigned)p.m_blocks * (unsigned)p.heads * (unsigned)p.batch;
    const unsigned whole = tiles - (unsigned)p.tail_tiles;           // tiles run whole, first
    const unsigned c = blockIdx.x;
    fm_work t;
    unsigned tile;
    if (c < whole) {
        tile = c;
        t.split = 0;
        t.splits = 1;
        t.tail = -1;
    } else {
        const unsigned piece = c - whole;
        t.tail = (int)(piece / num_splits);                           // its index among the tail's tiles
        t.split = (int)(piece % num_splits);
        t.splits = (int)num_splits;
        tile = whole + (unsigned)t.tail;
    }
    const unsigned rest = tile / (unsigned)p.m_blocks;                // head + heads batch
    t.m_block = p.m_blocks - 1 - (int)(tile - rest * (unsigned)p.m_blocks);
    t.head = (int)(rest % (unsigned)p.heads);
    t.batch = (int)(rest / (unsigned)p.heads);
    return t;
}
// Workspace rows [split][tail tile][FM_BLOCK_M]: the split's partial of the block's row m0 + r is row fm_work_ws_row0 + m0 + r.
__device__ __forceinline__ long long fm_work_ws_row0(const fm_attn_params& p, const fm_work& w, long long) {
    return ((long long)w.split * p.tail_tiles + w.tail - w.m_block) * FM_BLOCK_M;
}
"#;

/// Shared K/V of two query blocks (`Geometry::TILE_64X64_SHARED`): the CTA walks the host's
/// step table of a pair of 64-row query blocks, the union of their key-block lists two
/// blocks per step (docs/architecture.md, "Shared K/V of the 64-token tile"). The producer
/// loads every step's blocks once; consumer warpgroup `wg` computes the slots its own
/// block's list holds and skips a step that holds none of them (a warpgroup-uniform
/// branch). `AttentionParams::pair_steps`:
/// - headers: int4 at row `batch * mask_batch_stride + head * mask_head_stride + pair` of
///   `[Bm, Hm, Mb]` = (query block of warpgroup 0, of warpgroup 1 or -1, the int offset of
///   the pair's first step in `pair_steps`, its steps);
/// - steps: 8 ints = (key block of slot 0, of slot 1 or -1, then per warpgroup and slot
///   its mask tile: >= 0 the words' tile (partial), -1 full, -2 not in this warpgroup's
///   list).
///
/// Needs `fm_attn_params`, `FM_BLOCK_N`, `FM_STEP_BLOCKS` (2).
pub const SHARED_LISTS: &str = r#"// ---- tile schedule: the union of two query blocks' lists (host step table) + FragmentNative words ----
static_assert(FM_STEP_BLOCKS == 2, "the shared-K/V step table holds two key blocks per step");
#define FM_NOT_MINE (-2)   // a step-table slot outside this warpgroup's list
struct fm_schedule {
    int num_tiles;    // steps of the pair's union walk
    int kk0;          // 0: the shared-K/V tile never splits
    int step0;        // int offset of step 0 in p.pair_steps
    int m_block[2];   // the query blocks of warpgroups 0 and 1 (-1: none)
    int wg;           // the view: -1 the producer's (every slot's block), else warpgroup wg's own
    int m0;           // global row of the block's row 0 in the view: a warpgroup's row 64*wg is its block's first row
    int rows;         // rows the view writes (row < rows): seqlen_q, or 0 for a warpgroup without a query block
};

__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_attn_params& p, int batch, int head, int pair) {
    fm_schedule s;
    const int list_row = batch * p.mask_batch_stride + head * p.mask_head_stride + pair;   // [Bm, Hm, Mb] row
    const int4 h = __ldg(reinterpret_cast<const int4*>(p.pair_steps) + list_row);
    s.m_block[0] = h.x;
    s.m_block[1] = h.y;
    s.step0 = h.z;
    s.num_tiles = h.w;
    s.kk0 = 0;
    s.wg = -1;
    s.m0 = h.x * 64;
    s.rows = p.seqlen_q;
    return s;
}

// Warpgroup wg's view of the pair's schedule: its row 64*wg is row 0 of its own query block.
__device__ __forceinline__ fm_schedule fm_warpgroup_view(const fm_attn_params& p, fm_schedule s, int wg) {
    const int m_block = wg == 0 ? s.m_block[0] : s.m_block[1];   // constant indices: no local memory
    s.wg = wg;
    s.m0 = (m_block >= 0 ? m_block * 64 : 0) - 64 * wg;
    s.rows = m_block >= 0 ? p.seqlen_q : 0;
    return s;
}

// One step: two key blocks side by side in the S tile (block h at columns h*FM_BLOCK_N..).
struct fm_tile {
    int n_block[FM_STEP_BLOCKS];    // key block of each slot in the view; -1: no block, or not this warpgroup's (masked)
    int mask_tile[FM_STEP_BLOCKS];  // index along dim 0 of words [tiles, $MASK_THREADS threads, $MASK_WORDS words]; -1: no words
    int partial;                    // 1: apply the mask (words, a slot not in the view, or the key bound of the last block)
    int skip;                       // 1: no slot is this warpgroup's: it only releases the step's stage
};

__device__ __forceinline__ fm_tile fm_tile_at(const fm_attn_params& p, const fm_schedule& s, int kk) {
    fm_tile t;
    t.partial = 0;
    t.skip = 0;
    if (kk >= s.num_tiles) {   // past the end: nothing read
#pragma unroll
        for (int h = 0; h < FM_STEP_BLOCKS; ++h) {
            t.n_block[h] = -1;
            t.mask_tile[h] = -1;
        }
        t.partial = 1;
        t.skip = 1;
        return t;
    }
    const int4* entry = reinterpret_cast<const int4*>(p.pair_steps + s.step0) + 2 * kk;
    const int4 e0 = __ldg(entry);
    const int n[2] = {e0.x, e0.y};
    int tile[2] = {e0.z, e0.w};
    if (s.wg == 1) {
        const int4 e1 = __ldg(entry + 1);
        tile[0] = e1.x;
        tile[1] = e1.y;
    }
    int mine = 0;
#pragma unroll
    for (int h = 0; h < FM_STEP_BLOCKS; ++h) {
        const bool in_view = n[h] >= 0 && (s.wg < 0 || tile[h] != FM_NOT_MINE);
        t.n_block[h] = in_view ? n[h] : -1;
        t.mask_tile[h] = in_view && s.wg >= 0 ? tile[h] : -1;
        mine += in_view ? 1 : 0;
        if (!in_view || t.mask_tile[h] >= 0) t.partial = 1;
        // A full block still needs the key bound when it reaches past seqlen_k (K is zero-filled there).
        if (in_view && (long long)n[h] * FM_BLOCK_N + FM_BLOCK_N > (long long)p.seqlen_k) t.partial = 1;
    }
    t.skip = mine == 0;
    return t;
}
"#;
