//! Key-tile schedules: the query steps (`FM_STEP_M` rows) one key tile of the backward
//! visits. Placeholders: `$WINDOW_INFINITE` ([`super::WINDOW_INFINITE`]). Needs
//! `fm_bwd_params`, `FM_CTA_N`, `FM_STEP_M`, and for the lists `FM_SUB`, `FM_HALVES`.
//! Each defines `fm_cta_of_block` (the key tile of the x-th CTA: index order, or the
//! host's largest-first order) and `fm_step_rank` (the deterministic dQ order).
//! The window walk's `$WALK_*` placeholders place it on the whole sequence or inside one
//! document of the documents grid ([`KeyGrid::values`]).

/// Window mode: the query steps a key tile sees, computed from the bounds.
///
/// The walk of the whole sequence ([`KeyGrid::Global`]) and of one document
/// ([`KeyGrid::Documents`]) is this one text; the global walk's is the window kernel's as
/// it was.
pub const WINDOW: &str = r#"// ---- schedule: window mode (causal / sliding window / none)$WALK_TITLE ----
// Query i sees key j iff i + diag_offset - window_left <= j <= i + diag_offset + window_right and j < seqlen_k.
// Keys n0..n_end of this CTA are seen by queries j - diag_offset - window_right ..= j - diag_offset + window_left
// of each key j: one interval over the CTA, walked in FM_STEP_M-query steps from the lowest.
struct fm_schedule {
    int num_steps;   // steps visited
    int m_first;     // first step (query rows FM_STEP_M * m_first ..)
    int n0;          // first key of the CTA
    int full_begin;  // steps kk in full_begin .. full_end - 1 see every (query, key) pair of the CTA
    int full_end;
$WALK_FIELDS};

// floor(a / FM_STEP_M) for any sign of a.
__device__ __forceinline__ long long fm_floor_steps(long long a) {
    return a >= 0 ? a / FM_STEP_M : -((-a + FM_STEP_M - 1) / FM_STEP_M);
}

// The key tile of the x-th CTA: index order (no lists to order by); in the deterministic mode, from the last tile
// down, so that the tiles fm_step_rank makes a CTA wait for have all launched before it (docs/backward.md,
// "Deterministic mode"; the documents grid has no deterministic mode).
__device__ __forceinline__ int fm_cta_of_block(const fm_bwd_params& p, int, int, int x) {
#if FM_DETERMINISTIC
    return p.n_ctas - 1 - x;
#else
    (void)p;
    return x;
#endif
}

__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_bwd_params& p, int batch, int head, int n_cta$WALK_ITEM_PARAM) {
    fm_schedule s;
    s.n0 = $WALK_KEY0n_cta * FM_CTA_N;
    const long long n_end = min(s.n0 + FM_CTA_N, $WALK_KEY_END) - 1;
    const long long lo = p.window_right >= $WINDOW_INFINITE ? $WALK_Q_FIRST : max($WALK_Q_FIRST_LL, (long long)s.n0 - p.diag_offset - p.window_right);
    const long long hi = p.window_left >= $WINDOW_INFINITE ? $WALK_Q_LAST
                                                          : min($WALK_Q_LAST, n_end - p.diag_offset + p.window_left);
    s.full_begin = 0;
    s.full_end = 0;
    if (lo > hi) { s.num_steps = 0; s.m_first = 0; return s; }
    s.m_first = (int)(lo / FM_STEP_M);
    s.num_steps = (int)(hi / FM_STEP_M) - s.m_first + 1;
    // The steps that need no mask, once per schedule (fm_step_at's test per step is kk in this range):
    // rows i0 = FM_STEP_M m .. i1 = i0 + FM_STEP_M - 1 see all keys n0 .. n0 + FM_CTA_N - 1 iff
    //   left:  i1 + diag_offset - window_left <= n0, i.e. m <= floor((n0 - (FM_STEP_M - 1) - diag_offset + window_left) / FM_STEP_M);
    //   right: n0 + FM_CTA_N - 1 <= i0 + diag_offset + window_right, i.e. m >= -floor(-(n0 + FM_CTA_N - 1 - diag_offset - window_right) / FM_STEP_M);
    //   and the CTA's last key is below seqlen_k.
    if (s.n0 + FM_CTA_N <= $WALK_KEY_END) {
        const long long m_last = $WALK_M_LAST;
        const long long m_hi = p.window_left >= $WINDOW_INFINITE ? m_last
            : min(m_last, fm_floor_steps((long long)s.n0 - (FM_STEP_M - 1) - p.diag_offset + p.window_left));
        const long long m_lo = p.window_right >= $WINDOW_INFINITE ? $WALK_M_FIRST
            : max($WALK_M_FIRST, -fm_floor_steps(-((long long)s.n0 + FM_CTA_N - 1 - p.diag_offset - p.window_right)));
        if (m_lo <= m_hi) {
            s.full_begin = (int)(m_lo - s.m_first);
            s.full_end = (int)(m_hi - s.m_first) + 1;
        }
    }
$WALK_PLACE    return s;
}

struct fm_step {
    int m;           // query step: rows FM_STEP_M * m ..
    int mask_tile;   // -1: no mask words (window mode)
    int word;        // unused in window mode
    int partial;     // 1: some pair of the step is not visible (or a key is past seqlen_k)
};

__device__ __forceinline__ fm_step fm_step_at(const fm_bwd_params& p, const fm_schedule& s, int batch, int head, int kk) {
    fm_step t;
    t.m = s.m_first + kk;
    t.mask_tile = -1;
    t.word = 0;
    t.partial = (kk >= s.full_begin && kk < s.full_end) ? 0 : 1;
    return t;
}

$WALK_RANK"#;

/// [`LISTS`]' `$LISTS_DENSE` ([`super::ListEntries::dense_expr`]): nonzero where the
/// deterministic rank is computed, not counted; and `$LISTS_ENTRIES_COMPUTED`: 1 where a
/// step's entries are computed, not read, which only [`super::ListEntries::Dense`] does,
/// outside the deterministic mode. There computing them gains about 1%; in the
/// deterministic mode, beside the computed rank, reading them measured 7% faster (random
/// 50%, S=16384: 11.59 against 12.47 ms), and a branch per step on them at run time cost the
/// read path 3% (docs/masks.md, "Dense lists checked at run time").
pub fn list_values(
    entries: super::ListEntries,
    deterministic: bool,
) -> [(&'static str, String); 2] {
    [
        ("LISTS_DENSE", entries.dense_expr().to_string()),
        (
            "LISTS_ENTRIES_COMPUTED",
            u8::from(entries == super::ListEntries::Dense && !deterministic).to_string(),
        ),
    ]
}

/// The window walk's deterministic rank on the whole sequence (`$WALK_RANK` of
/// [`KeyGrid::Global`]; the documents grid has no deterministic order).
const WINDOW_RANK: &str = r#"// Deterministic order: this CTA's rank among the key tiles (of one column group) that visit step m, in the order
// they reach it (docs/backward.md, "Deterministic mode"), so that no CTA waits for one that arrives after it.
// A walk starts at its tile's first step and ascends, so the higher tile reaches a step first: the visitors are
// the tiles up to the one holding the last key the step's rows see, ranked from it down. A CTA waits only for
// higher tiles, which fm_cta_of_block launches first, so it never waits for a CTA that is not yet running.
// Its mirror in the host's tests (choice::deterministic, with the walk's) is property-tested: every step's ranks count
// 0, 1, .. in arrival order.
__device__ __forceinline__ int fm_step_rank(const fm_bwd_params& p, const fm_schedule&, int, int, int n_cta, const fm_step& t) {
    const long long i1 = min((long long)t.m * FM_STEP_M + FM_STEP_M - 1, (long long)p.seqlen_q - 1);
    const long long last_key = p.window_right >= $WINDOW_INFINITE ? (long long)p.seqlen_k - 1
                                                                   : min((long long)p.seqlen_k - 1, i1 + p.diag_offset + p.window_right);
    return (int)(last_key / FM_CTA_N) - n_cta;
}
"#;

/// The documents grid's work item of a CTA (FlashAttention's varlen grid over
/// `cu_seqlens`, on the key side): `BackwardParams::doc_items` holds, per work item, the
/// document's first token, its length, the key tile within the document and the
/// document; the host writes them most query steps first. Fills `$CTA_ITEM` of the
/// backward's kernel.
pub const DOCUMENTS_ITEM: &str = r#"    // Documents grid: work item blockIdx.x / FM_GRID_SPLIT = p.doc_items[4 x .. 4 x + 3] = (first token of its
    // document, the document's length, the key tile within the document, the document), one 16-byte load. The
    // key tile's keys are doc_item.x + FM_CTA_N * doc_item.z ..; its walk is the document's (the window schedule).
    const int4 doc_item = __ldg(reinterpret_cast<const int4*>(p.doc_items) + blockIdx.x / FM_GRID_SPLIT);
"#;

/// The grid a key-tile window walk runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyGrid {
    /// Key tiles of the whole sequence (`n_cta` from the grid).
    Global,
    /// (document, key tile of the document) work items ([`DOCUMENTS_ITEM`]): the key
    /// tile starts at the document's first token and sees the document's keys; the query
    /// steps stay the sequence's 64-row steps (so lse, Dsum and the dQ accumulator are
    /// addressed as in every other mode), from the document's first to its last, and a
    /// step straddling the document's edge is partial (its other rows are masked).
    Documents,
}

/// Where a key-tile walk's keys and queries sit, as the expressions the backward's
/// kernel pastes: the CTA's work item (`cta_item`, a statement or nothing), the `x`
/// argument of `fm_cta_of_block` (`cta_block`), the schedule's extra argument
/// (`schedule_item`), the key row of the tile's key 0 (`key_row0`, beside the kernel's
/// `n_cta`) and the keys below which gradients are written (`key_end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyPlacement {
    /// Statements run once per CTA before `n_cta` (the documents grid's item load).
    pub cta_item: &'static str,
    /// The `x` of `fm_cta_of_block`.
    pub cta_block: &'static str,
    /// Appended to `fm_make_schedule`'s arguments.
    pub schedule_item: &'static str,
    /// Global key of the tile's key 0 (TMA row of K and V, dK/dV rows).
    pub key_row0: &'static str,
    /// dK/dV rows written: `key < key_end`.
    pub key_end: &'static str,
}

impl KeyGrid {
    /// The values of [`WINDOW`]'s `$WALK_*` placeholders.
    pub fn values(self) -> Vec<(&'static str, String)> {
        let v: [(&'static str, &'static str); 12] = match self {
            KeyGrid::Global => [
                ("WALK_TITLE", ""),
                ("WALK_FIELDS", ""),
                ("WALK_ITEM_PARAM", ""),
                ("WALK_KEY0", ""),
                ("WALK_KEY_END", "p.seqlen_k"),
                ("WALK_Q_FIRST", "0"),
                ("WALK_Q_FIRST_LL", "0LL"),
                ("WALK_Q_LAST", "(long long)p.seqlen_q - 1"),
                ("WALK_M_LAST", "(long long)s.m_first + s.num_steps - 1"),
                ("WALK_M_FIRST", "(long long)s.m_first"),
                ("WALK_PLACE", ""),
                ("WALK_RANK", WINDOW_RANK),
            ],
            KeyGrid::Documents => [
                ("WALK_TITLE", " inside each document of the documents grid"),
                (
                    "WALK_FIELDS",
                    "    int q0;          // the document's first token (global query and key)\n    int end;         // one past its last token\n",
                ),
                ("WALK_ITEM_PARAM", ", int4 item"),
                ("WALK_KEY0", "item.x + "),
                ("WALK_KEY_END", "(item.x + item.y)"),
                ("WALK_Q_FIRST", "(long long)item.x"),
                ("WALK_Q_FIRST_LL", "(long long)item.x"),
                ("WALK_Q_LAST", "((long long)item.x + item.y - 1)"),
                // Full steps lie inside the document: rows from its first token (ceil) to its
                // last (floor); a step straddling an edge holds another document's rows.
                (
                    "WALK_M_LAST",
                    "min((long long)s.m_first + s.num_steps - 1, ((long long)item.x + item.y) / FM_STEP_M - 1)",
                ),
                (
                    "WALK_M_FIRST",
                    "max((long long)s.m_first, ((long long)item.x + FM_STEP_M - 1) / FM_STEP_M)",
                ),
                ("WALK_PLACE", "    s.q0 = item.x;\n    s.end = item.x + item.y;\n"),
                (
                    "WALK_RANK",
                    "// (No deterministic rank: a step straddling two documents has no fixed order of visitors.)\n",
                ),
            ],
        };
        v.into_iter().map(|(k, x)| (k, x.to_string())).collect()
    }

    /// Where the grid's keys sit ([`KeyPlacement`]).
    pub fn placement(self) -> KeyPlacement {
        match self {
            KeyGrid::Global => KeyPlacement {
                cta_item: "",
                cta_block: "(int)(cta.x / FM_GRID_SPLIT)",
                schedule_item: "",
                key_row0: "n_cta * FM_CTA_N",
                key_end: "p.seqlen_k",
            },
            KeyGrid::Documents => KeyPlacement {
                cta_item: DOCUMENTS_ITEM,
                cta_block: "doc_item.z",
                schedule_item: ", doc_item",
                key_row0: "(doc_item.x + n_cta * FM_CTA_N)",
                key_end: "(doc_item.x + doc_item.y)",
            },
        }
    }

    /// The values of the window mask's (`family::mask::KEY_TILE_WINDOW`) bounds: the
    /// keys (`$KEY_BOUND`) and, inside a document, the queries (`$QUERY_BOUNDS`).
    pub fn mask_values(self) -> Vec<(&'static str, String)> {
        let (key_bound, query_bounds) = match self {
            KeyGrid::Global => ("p.seqlen_k", ""),
            KeyGrid::Documents => (
                "sched.end",
                "        // Queries outside the document (a straddling step's other rows) see nothing.\n        l = max(l, (long long)sched.q0 - base);\n        h = min(h, (long long)sched.end - 1 - base);\n",
            ),
        };
        vec![
            ("KEY_BOUND", key_bound.to_string()),
            ("QUERY_BOUNDS", query_bounds.to_string()),
        ]
    }
}

/// The backward's launch order off sections (the window walk on the whole sequence, and the
/// tile lists in the deterministic mode): the grid (x the key tiles, longest first under a
/// causal mask, y the KV heads, z the batch) read off [`super::SECTION_TILE`]'s sections of
/// `head_section` (KV head, batch) planes (`p.head_section`; in the deterministic mode 1
/// where lists built on the GPU turn out dense when the kernel runs, as the host gives
/// lists it knows are dense). The window walk's sections make the longest key
/// tiles of every plane of a section start before any shorter one and keep a section's
/// queries in L2 (FlashAttention-4's `SingleTileLPTBwdScheduler`, which it runs only in its
/// deterministic mode). In the deterministic mode they interleave the planes, so that a
/// plane's key tiles start spread over the launch and the ones a CTA waits for are ahead of
/// it; a plane's own order is kept, so no CTA waits for one launched after it. The host's
/// mirror is `attention::persistent::grid_tile`.
pub const SECTION_ORDER: &str = r#"// The CTA's (x, KV head, batch) in the launch order of head_section planes per section (1: the grid's own).
__device__ __forceinline__ uint3 fm_backward_cta(const fm_bwd_params&, int head_section) {
    const uint2 at = fm_section_tile(head_section);
    return make_uint3(at.x, at.y % gridDim.y, at.y / gridDim.y);
}
"#;

/// Listed blocks: the mask's transposed lists (partial query tiles, then full ones),
/// each tile taken in `block_m / 64` steps.
pub const LISTS: &str = r#"// ---- schedule: the mask's transposed lists (q_indices then full_q_indices), FM_HALVES steps per tile ----
// Mask plane of (batch, head): batch * mask_batch_heads + head * mask_has_heads (0 where the mask broadcasts);
// transposed rows are [plane, mask_n_blocks], forward rows [plane, mask_m_blocks].
struct fm_schedule {
    int num_steps;
    int num_partial;   // partial tiles of this key tile
    long long row;     // transposed list row (plane * mask_n_blocks + mask key tile)
    int n0;            // first key of the CTA
    int dense;         // 1: dense lists, the deterministic rank computed (family::schedule::ListEntries)
};

__device__ __forceinline__ int fm_plane(const fm_bwd_params& p, int batch, int head) {
    return batch * p.mask_batch_heads + head * p.mask_has_heads;
}

// The key tile of the x-th CTA: in the mask's key tiles by their query-tile count, largest first (tile_order,
// fragmask_masks::tile_order, from the host or the GPU transposer: the long CTAs start first and the short
// ones fill the tail), sub-tile x % FM_SUB of the (x / FM_SUB)-th; -1 past the keys. Index order without it.
__device__ __forceinline__ int fm_cta_of_block(const fm_bwd_params& p, int batch, int head, int x) {
    if (!p.tile_order) return x;
    const long long at = (long long)fm_plane(p, batch, head) * p.mask_n_blocks + x / FM_SUB;
    const int n = __ldg(p.tile_order + at) * FM_SUB + x % FM_SUB;
    return n < p.n_ctas ? n : -1;
}

__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_bwd_params& p, int batch, int head, int n_cta) {
    fm_schedule s;
    s.n0 = n_cta * FM_CTA_N;
    s.row = (long long)fm_plane(p, batch, head) * p.mask_n_blocks + n_cta / FM_SUB;
    s.num_partial = __ldg(p.q_num_blocks + s.row);
    s.num_steps = (s.num_partial + __ldg(p.full_q_num_blocks + s.row)) * FM_HALVES;
    s.dense = $LISTS_DENSE;
    return s;
}

struct fm_step {
    int m;           // query step: rows FM_STEP_M * m ..
    int mask_tile;   // index along dim 0 of q_words; -1: full tile
    int word;        // the step's word of a thread: query half of the mask tile
    int partial;     // 1: apply the words or the key bound
};

__device__ __forceinline__ fm_step fm_step_at(const fm_bwd_params& p, const fm_schedule& s, int batch, int head, int kk) {
    fm_step t;
    const int e = kk / FM_HALVES;
    t.word = kk % FM_HALVES;
    const long long base = s.row * p.mask_m_blocks;
    if (e < s.num_partial) {
        if ($LISTS_ENTRIES_COMPUTED) {   // dense lists: entry e is query block e, its words tile base + e (no list read)
            t.m = e * FM_HALVES + t.word;
            t.mask_tile = (int)(base + e);
        } else {
            t.m = __ldg(p.q_indices + base + e) * FM_HALVES + t.word;
            t.mask_tile = __ldg(p.q_tile_offsets + base + e);
        }
    } else {
        t.m = __ldg(p.full_q_indices + base + (e - s.num_partial)) * FM_HALVES + t.word;
        t.mask_tile = -1;
    }
    t.partial = (t.mask_tile >= 0 || s.n0 + FM_CTA_N > p.seqlen_k) ? 1 : 0;
    return t;
}

// Deterministic order: the key tiles visiting step m are the entries of its forward row (partial and full, each
// ascending); this CTA's rank is the number of entries below its mask key tile, times FM_SUB, plus its sub-tile.
// Called by a whole warp: lanes read the row 32 entries at a time (coalesced) and count with a ballot.
__device__ __forceinline__ int fm_step_rank(const fm_bwd_params& p, const fm_schedule& s, int batch, int head,
                                            int n_cta, const fm_step& t) {
    const int m = t.m;
    // Dense lists: every forward row holds every key tile, so the entries below this CTA's are its tile's. (The
    // schedule's flag: a run-time check read once per CTA, not before every step's count.)
    if (s.dense) return n_cta;
    const long long row = (long long)fm_plane(p, batch, head) * p.mask_m_blocks + m / FM_HALVES;
    const int nb = n_cta / FM_SUB;
    const int lane = (int)(threadIdx.x % 32u);
    int below = 0;
    const int np = __ldg(p.kv_num_blocks + row), nf = __ldg(p.full_kv_num_blocks + row);
    for (int j = 0; j < np; j += 32) {
        const bool lt = j + lane < np && __ldg(p.kv_indices + row * p.mask_n_blocks + j + lane) < nb;
        below += __popc(__ballot_sync(0xffffffffu, lt));
    }
    for (int j = 0; j < nf; j += 32) {
        const bool lt = j + lane < nf && __ldg(p.full_kv_indices + row * p.mask_n_blocks + j + lane) < nb;
        below += __popc(__ballot_sync(0xffffffffu, lt));
    }
    return below * FM_SUB + n_cta % FM_SUB;
}
"#;

/// Paired key blocks (`BackwardKernel::with_paired_keys`): the CTA's two consumer
/// warpgroups own one 64-key block each and walk the union of the two blocks' transposed
/// lists, from the host's table (`BackwardParams::key_pairs`, built by the host's
/// `attention::backward::key_pairs`; `p.n_ctas` pairs per mask plane).
pub const PAIRED_LISTS: &str = r#"// ---- schedule: paired key blocks, the union of two 64-key blocks' transposed lists ----
// p.key_pairs: per (mask plane, pair x < p.n_ctas) a header int4 (key block of warpgroup 0, of warpgroup 1 or -1,
// the int4 index of the pair's first step, its steps), then per step an int4 (query tile, warpgroup 0's tile,
// warpgroup 1's tile, rank): a tile >= 0 is partial (index along dim 0 of q_words), FM_FULL full, FM_NOT_MINE not in
// that warpgroup's list (the warpgroup skips the step); the rank is the number of the plane's pairs before this one
// (in launch order) that visit the query tile, the deterministic mode's dQ turn. Steps ascend in the query tile
// (in the deterministic mode: the host's walk order, docs/backward.md "Walk orders").
#define FM_FULL (-1)
#define FM_NOT_MINE (-2)
struct fm_schedule {
    int num_steps;
    int first;   // int4 index of the pair's first step
    int wg;      // the calling thread's consumer warpgroup (0 for the producer warpgroup's threads)
    int n0;      // the key of CTA row 0 as that warpgroup sees it: its own 64 rows are its block's
};

__device__ __forceinline__ int fm_plane(const fm_bwd_params& p, int batch, int head) {
    return batch * p.mask_batch_heads + head * p.mask_has_heads;
}

// The header of pair x of (batch, head)'s mask plane.
__device__ __forceinline__ int4 fm_pair_of_cta(const fm_bwd_params& p, int batch, int head, int x) {
    return __ldg(reinterpret_cast<const int4*>(p.key_pairs) + (long long)fm_plane(p, batch, head) * p.n_ctas + x);
}

// The key of CTA row 0 as warpgroup wg sees it (pair header h): its own 64 rows are its block's; a missing
// block's rows lie past every key (nothing of them is written).
__device__ __forceinline__ int fm_pair_key0(const fm_bwd_params& p, int4 h, int wg) {
    return (wg == 0 ? h.x * 64 : (h.y >= 0 ? h.y * 64 : p.seqlen_k)) - 64 * wg;
}

// The pair of the x-th CTA (the host sorted each plane's pairs longest first); -1 past the pairs.
__device__ __forceinline__ int fm_cta_of_block(const fm_bwd_params& p, int, int, int x) { return x < p.n_ctas ? x : -1; }

__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_bwd_params& p, int batch, int head, int n_cta) {
    const int4 h = fm_pair_of_cta(p, batch, head, n_cta);
    fm_schedule s;
    s.num_steps = h.w;
    s.first = h.z;
    s.wg = threadIdx.x >= 256u ? 1 : 0;
    s.n0 = fm_pair_key0(p, h, s.wg);
    return s;
}

struct fm_step {
    int m;           // query step: rows FM_STEP_M * m ..
    int mask_tile;   // the calling warpgroup's tile: >= 0 partial, FM_FULL, FM_NOT_MINE
    int word;        // 0: a 64x64 mask tile is one step
    int partial;     // 1: apply the words or the key bound
    int key_half;    // -1: both warpgroups' blocks see the step; else the one warpgroup whose block does (the dQ
                     // chunks then sum over its 64 keys only)
    int rank;        // the pair's dQ turn at the step (the deterministic mode)
};

__device__ __forceinline__ fm_step fm_step_at(const fm_bwd_params& p, const fm_schedule& s, int, int, int kk) {
    const int4 e = __ldg(reinterpret_cast<const int4*>(p.key_pairs) + s.first + kk);
    fm_step t;
    t.m = e.x;
    t.mask_tile = s.wg == 0 ? e.y : e.z;
    t.word = 0;
    t.partial = (t.mask_tile >= 0 || s.n0 + 64 * s.wg + 64 > p.seqlen_k) ? 1 : 0;
    t.key_half = e.y == FM_NOT_MINE ? 1 : (e.z == FM_NOT_MINE ? 0 : -1);
    t.rank = e.w;
    return t;
}

// Deterministic order: the pair's rank among the plane's pairs that visit the step, in launch order (the host's
// table, key_pairs.rs). A pair waits only for pairs of lower x in its plane, which the grid launches before it.
__device__ __forceinline__ int fm_step_rank(const fm_bwd_params&, const fm_schedule&, int, int, int, const fm_step& t) {
    return t.rank;
}
"#;

/// The paired key blocks' CTA item: the pair's header, read once per CTA (its key blocks
/// place K and V and the dK/dV rows). Fills `$CTA_ITEM`.
pub const PAIRED_ITEM: &str = "    // Paired key blocks: the pair's header (key block of warpgroup 0, of warpgroup 1 or -1, first step, steps).\n    const int4 pair_item = fm_pair_of_cta(p, batch, kv_head * group, (int)cta.x);\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::template::fill;

    fn walk(grid: KeyGrid) -> String {
        let mut values = grid.values();
        values.push(("WINDOW_INFINITE", super::super::WINDOW_INFINITE.to_string()));
        fill(WINDOW, &values).unwrap()
    }

    #[test]
    fn the_key_tile_walk_is_the_call_s_or_a_document_s() {
        let global = walk(KeyGrid::Global);
        assert!(global.contains("int n_cta) {\n    fm_schedule s;\n    s.n0 = n_cta * FM_CTA_N;"));
        assert!(global.contains("min(s.n0 + FM_CTA_N, p.seqlen_k) - 1"));
        assert!(!global.contains("item"));
        let documents = walk(KeyGrid::Documents);
        // Keys from the document's first token, bounded by its end; queries from its first
        // token to its last; a step straddling either edge is not full.
        assert!(documents.contains("int n_cta, int4 item) {"));
        assert!(documents.contains("s.n0 = item.x + n_cta * FM_CTA_N;"));
        assert!(documents.contains("min(s.n0 + FM_CTA_N, (item.x + item.y)) - 1"));
        assert!(documents.contains("max((long long)item.x, (long long)s.n0 - p.diag_offset"));
        assert!(documents.contains("((long long)item.x + item.y) / FM_STEP_M - 1"));
        assert!(documents.contains("((long long)item.x + FM_STEP_M - 1) / FM_STEP_M"));
        assert!(
            documents.contains("    s.q0 = item.x;\n    s.end = item.x + item.y;\n    return s;")
        );
        assert!(!documents.contains("p.seqlen_q") && !documents.contains("p.seqlen_k"));
        let place = KeyGrid::Documents.placement();
        assert!(place.cta_item.contains("p.doc_items") && place.cta_block == "doc_item.z");
        assert_eq!(KeyGrid::Global.placement().key_end, "p.seqlen_k");
        let (g, d) = (
            KeyGrid::Global.mask_values(),
            KeyGrid::Documents.mask_values(),
        );
        assert_eq!(g[1].1, "");
        assert!(d[1].1.contains("sched.q0") && d[0].1 == "sched.end");
    }
}
