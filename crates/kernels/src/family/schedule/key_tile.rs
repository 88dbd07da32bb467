//! Key-tile schedules: the query steps (`FM_STEP_M` rows) one key tile of the backward
//! visits. Placeholders: `$WINDOW_INFINITE` ([`super::WINDOW_INFINITE`]). Needs
//! `fm_bwd_params`, `FM_CTA_N`, `FM_STEP_M`, and for the lists `FM_SUB`, `FM_HALVES`.
//! Each defines `fm_cta_of_block` (the key tile of the x-th CTA: index order, or the
//! host's largest-first order) and `fm_step_rank` (the deterministic dQ order).

/// Window mode: the query steps a key tile sees, computed from the bounds.
pub const WINDOW: &str = r#"// ---- schedule: window mode (causal / sliding window / none) ----
// Query i sees key j iff i + diag_offset - window_left <= j <= i + diag_offset + window_right and j < seqlen_k.
// Keys n0..n_end of this CTA are seen by queries j - diag_offset - window_right ..= j - diag_offset + window_left
// of each key j: one interval over the CTA, walked in FM_STEP_M-query steps from the lowest.
struct fm_schedule {
    int num_steps;   // steps visited
    int m_first;     // first step (query rows FM_STEP_M * m_first ..)
    int n0;          // first key of the CTA
    int full_begin;  // steps kk in full_begin .. full_end - 1 see every (query, key) pair of the CTA
    int full_end;
};

// floor(a / FM_STEP_M) for any sign of a.
__device__ __forceinline__ long long fm_floor_steps(long long a) {
    return a >= 0 ? a / FM_STEP_M : -((-a + FM_STEP_M - 1) / FM_STEP_M);
}

// The key tile of the x-th CTA: index order (no lists to order by).
__device__ __forceinline__ int fm_cta_of_block(const fm_bwd_params&, int, int, int x) { return x; }

__device__ __forceinline__ fm_schedule fm_make_schedule(const fm_bwd_params& p, int batch, int head, int n_cta) {
    fm_schedule s;
    s.n0 = n_cta * FM_CTA_N;
    const long long n_end = min(s.n0 + FM_CTA_N, p.seqlen_k) - 1;
    const long long lo = p.window_right >= $WINDOW_INFINITE ? 0 : max(0LL, (long long)s.n0 - p.diag_offset - p.window_right);
    const long long hi = p.window_left >= $WINDOW_INFINITE ? (long long)p.seqlen_q - 1
                                                          : min((long long)p.seqlen_q - 1, n_end - p.diag_offset + p.window_left);
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
    if (s.n0 + FM_CTA_N <= p.seqlen_k) {
        const long long m_last = (long long)s.m_first + s.num_steps - 1;
        const long long m_hi = p.window_left >= $WINDOW_INFINITE ? m_last
            : min(m_last, fm_floor_steps((long long)s.n0 - (FM_STEP_M - 1) - p.diag_offset + p.window_left));
        const long long m_lo = p.window_right >= $WINDOW_INFINITE ? (long long)s.m_first
            : max((long long)s.m_first, -fm_floor_steps(-((long long)s.n0 + FM_CTA_N - 1 - p.diag_offset - p.window_right)));
        if (m_lo <= m_hi) {
            s.full_begin = (int)(m_lo - s.m_first);
            s.full_end = (int)(m_hi - s.m_first) + 1;
        }
    }
    return s;
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

// Deterministic order: the CTAs (of one column group) that visit step m are the key tiles from the one holding
// the first key its rows see, upwards; this CTA's rank among them.
__device__ __forceinline__ int fm_step_rank(const fm_bwd_params& p, int batch, int head, int n_cta, int m) {
    const long long i0 = (long long)m * FM_STEP_M;
    const long long first_key = p.window_left >= $WINDOW_INFINITE ? 0 : max(0LL, i0 + p.diag_offset - p.window_left);
    return n_cta - (int)(first_key / FM_CTA_N);
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
};

__device__ __forceinline__ int fm_plane(const fm_bwd_params& p, int batch, int head) {
    return batch * p.mask_batch_heads + head * p.mask_has_heads;
}

// The key tile of the x-th CTA: in the host's order of the mask's key tiles by their query-tile count, largest
// first (tile_order: the long CTAs start first and the short ones fill the tail), sub-tile x % FM_SUB of the
// (x / FM_SUB)-th; -1 past the keys. Index order without tile_order.
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
        t.m = __ldg(p.q_indices + base + e) * FM_HALVES + t.word;
        t.mask_tile = __ldg(p.q_tile_offsets + base + e);
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
__device__ __forceinline__ int fm_step_rank(const fm_bwd_params& p, int batch, int head, int n_cta, int m) {
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
