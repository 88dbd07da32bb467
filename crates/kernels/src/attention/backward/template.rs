//! The CUDA text of the backward kernels; `$NAME` placeholders are filled by
//! [`crate::family::template::fill`] with the values and the generated pieces of
//! `source.rs` (GEMMs, fragment index expressions, schedule, mask).

/// The three kernels.
pub(super) const TEMPLATE: &str = r#"
#define FM_D $D                      // head dim
#define FM_D_CHUNKS $D_CHUNKS             // 64-column chunks (TMA boxes, 128-byte swizzle rows) of D
#define FM_WG $WARPGROUPS                  // consumer warpgroups, 64 keys each
#define FM_CTA_N $CTA_N                // keys per CTA
#define FM_STEP_M $STEP_M               // queries per step
#define FM_DQ_ROWS $DQ_CHUNK_ROWS              // query rows of a dQ chunk (the m64n64 dQ GEMM)
#define FM_DQ_HALVES $DQ_HALVES              // 64-query halves of a step (FM_STEP_M / FM_DQ_ROWS)
#define FM_DQ_ITEMS $DQ_ITEMS               // dQ chunks of a step: halves x FM_DKV / 64 column chunks
#define FM_DS_HALF_BYTES $DS_HALF_BYTES     // one 64-query half of a dS buffer
#define FM_DKV $DKV                  // dK/dV columns per CTA (D / FM_DSPLIT)
#define FM_DSPLIT $DSPLIT                // dK/dV column groups
#define FM_PAIR $PAIR                  // the column groups of a key tile in FM_CWG warpgroups of one CTA (BackwardKernel::with_pair)
#define FM_CWG $CWG                   // consumer warpgroups per 64-key group (column halves)
#define FM_CONSUMERS $CONSUMERS            // consumer threads (128 * FM_WG * FM_CWG)
#define FM_GRID_SPLIT $GRID_SPLIT            // CTAs per key tile (FM_DSPLIT / FM_CWG)
#define FM_GROUP_SLICES $GROUP_SLICES          // CTAs per key tile sharing the GQA group's query heads (BackwardKernel::with_group_slices)
#define FM_PAIRED_KEYS $PAIRED_KEYS           // each consumer warpgroup owns its own 64-key block, walking the pair's union (BackwardKernel::with_paired_keys)
#define FM_PX_BYTES $PX_BYTES           // the pair mode's P exchange (f32, [FM_STEP_M * 64 / 4][128 threads][4]); 0 otherwise
#define FM_STAGES $STAGES                // Q/dO stages
#define FM_SUB $SUB                   // CTAs per mask key tile
#define FM_HALVES $HALVES                // steps per mask query tile (its block_m / FM_STEP_M)
#define FM_MASK_THREADS $MASK_THREADS        // threads of the mask's backward accumulator
#define FM_MASK_WORDS $MASK_WORDS            // words per thread per mask tile
#define FM_DETERMINISTIC $DETERMINISTIC
#define FM_KV_REGISTERS $KV_REGISTERS         // K and V of the warpgroup's keys as RS A fragments (S^T, dP^T)
#define FM_KV_OWN_BARRIER $KV_OWN_BARRIER       // K and V load first on a barrier of their own (else with the first step's Q and dO)
#define FM_LSE_PAIRS $LSE_PAIRS               // lse and Dsum read as column pairs (8-byte loads); see docs/backward.md
#define FM_Q_CHUNK_BYTES $Q_CHUNK_BYTES      // one 64-column chunk of a Q/dO tile: Q(0, 64) of its layout
#define FM_KV_CHUNK_BYTES $KV_CHUNK_BYTES     // one 64-column chunk of K/V: K(0, 64)
#define FM_Q_TILE_BYTES $Q_TILE_BYTES      // FM_STEP_M x D
#define FM_KV_TILE_BYTES $KV_TILE_BYTES     // FM_CTA_N x D
#define FM_DS_BYTES $DS_BYTES           // one dS buffer, FM_STEP_M x FM_CTA_N
#define FM_DQ_BUFS $DQ_BUFS                // dQ staging buffers per warpgroup (bulk reduction; 0: atomics)
#define FM_DQ_WRITER $DQ_WRITER              // a writer warp issues the bulk dQ reductions (BackwardKernel::with_dq_writer)
// The deterministic dQ turns (docs/backward.md, "Deterministic mode"): the writer warp takes them where it runs, else the
// consumers.
#define FM_DET_CONSUMERS (FM_DETERMINISTIC && !FM_DQ_WRITER)
#define FM_RELEASE_PER_STAGE $RELEASE_PER_STAGE     // each stage released at its own constant barrier address (FM_RELEASE_STAGE)
$NEG_INF
#define FM_POS_INF (__int_as_float(0x7f800000u))

$TENSOR_MAP
$PARAMS_STRUCT
$PTX_HELPERS
$GLOBAL_REDUCE
$MATH
$GRID_DEPENDENCY
$ACT2
__device__ __forceinline__ float fm_act_to_f32(unsigned short h) {
$ACT_TO_F32
}
$STMATRIX_SW128
$LDS128
$LDS64
$LDMATRIX_X4
$NAMED_BARRIERS
// Every consumer thread arrives (release) on the stage's empty barrier after its last read of the stage (Q, dO
// through wgmma; lse and Dsum through plain loads), so each thread's own reads are released before the producer
// (acquire) refills the stage. compute-sanitizer racecheck reports lanes 1-31's reads when only lane 0 of a warp
// arrives, after __syncwarp and also after a bar.sync of every consumer, and also with lse/Dsum brought in by
// cp.async.bulk (FlashAttention-4's formulation); the last two, timed, were not faster on every row (docs/backward.md).
__device__ __forceinline__ void fm_consumer_release(unsigned bar) { fm_mbar_arrive(bar); }

// ---------------- preprocess: Dsum, lse in log2, zeroing (one warp per padded query row) ----------------
extern "C" __global__ void __launch_bounds__(32 * $ROWS_PER_BLOCK)
$PRE_KERNEL(const __grid_constant__ fm_bwd_params p)
{
    // Programmatic dependent launch (PTX ISA 9.7.13.11 griddepcontrol): the main kernel may
    // launch now; it waits for this grid's writes before reading them.
    fm_launch_dependents();
    const int row = (int)(blockIdx.x * $ROWS_PER_BLOCK + threadIdx.x / 32u);
    const int lane = (int)(threadIdx.x % 32u);
    const int head = (int)blockIdx.y, batch = (int)blockIdx.z;
    if (row >= p.seqlen_q_pad) return;
    const long long bh = (long long)batch * p.heads + head;
    float acc = 0.f;
    if (row < p.seqlen_q) {
        // Pairs of elements (one 32-bit load each; D contiguous and even, rows 4-byte aligned: checked by the host).
        const unsigned* o = reinterpret_cast<const unsigned*>(p.o + batch * p.o_stride_b + head * p.o_stride_h + row * p.o_stride_s);
        const unsigned* d_o = reinterpret_cast<const unsigned*>(p.d_o + batch * p.do_stride_b + head * p.do_stride_h + row * p.do_stride_s);
        for (int c = lane; c < FM_D / 2; c += 32) {
            const unsigned a = o[c], b = d_o[c];
            acc += fm_act_to_f32((unsigned short)(a & 0xffffu)) * fm_act_to_f32((unsigned short)(b & 0xffffu))
                 + fm_act_to_f32((unsigned short)(a >> 16)) * fm_act_to_f32((unsigned short)(b >> 16));
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    float2* dq = reinterpret_cast<float2*>(p.dq_accum + (bh * p.seqlen_q_pad + row) * FM_D);
    for (int c = lane; c < FM_D / 2; c += 32) dq[c] = make_float2(0.f, 0.f);
    if (lane == 0) {
        p.dsum[bh * p.seqlen_q_pad + row] = acc;
        const float l = row < p.seqlen_q ? p.lse[bh * p.seqlen_q + row] : FM_NEG_INF;
        // A row with no visible key (lse = -inf) and a padding row get +inf: P = exp2(s - inf) = 0.
        p.lse_log2[bh * p.seqlen_q_pad + row] = l == FM_NEG_INF ? FM_POS_INF : l * 1.4426950408889634f;
    }
    if (lane < FM_DSPLIT && row % FM_STEP_M == 0)
        p.sem[(bh * (p.seqlen_q_pad / FM_STEP_M) + row / FM_STEP_M) * FM_DSPLIT + lane] = 0;
}

$POSTPROCESS
$POST_KV
$CTA_ORDER
$SCHEDULE
$MASK_APPLY
$GEMMS

// The dS stmatrix address of x4 store g of a thread whose store 0 is at ds_st (ds_st0 below).
#define FM_DS_ST_ADDR(ds_st, g) \
    (((ds_st) ^ ($DS_G_XORu * ((g) % $DS_G_PER_HALF))) + (unsigned)((g) / $DS_G_PER_HALF) * FM_DS_HALF_BYTES)

// Pairs (2m, 2m+1) of an m64n64 accumulator -> $ACTx2 register m: the RS A operand (docs/architecture.md fact 5).
__device__ __forceinline__ void fm_convert_a(const float (&s)[$ST_VALUES], unsigned (&a)[$A_REGS]) {
#pragma unroll
    for (int m = 0; m < $A_REGS; ++m) a[m] = fm_act2(s[2 * m], s[2 * m + 1]);
}

// ---------------- main kernel ----------------
extern "C" __global__ void __launch_bounds__($THREADS, 1)
$KERNEL(const __grid_constant__ fm_tensor_map tma_q, const __grid_constant__ fm_tensor_map tma_k,
        const __grid_constant__ fm_tensor_map tma_v, const __grid_constant__ fm_tensor_map tma_do,
        const __grid_constant__ fm_bwd_params p)
{
    extern __shared__ __align__(1024) unsigned char fm_smem_raw[];
    // K | V | Q[stages] | dO[stages] | dS[2] | lse[stages] | Dsum[stages] | dQ staging | P exchange | barriers; tiles 1024-byte aligned.
    const unsigned smem_raw_u32 = fm_smem_u32(fm_smem_raw);
    const unsigned smem_k = (smem_raw_u32 + 1023u) & ~1023u;
    const unsigned smem_v = smem_k + FM_KV_TILE_BYTES;
    const unsigned smem_q = smem_v + FM_KV_TILE_BYTES;
    const unsigned smem_do = smem_q + FM_STAGES * FM_Q_TILE_BYTES;
    const unsigned smem_ds = smem_do + FM_STAGES * FM_Q_TILE_BYTES;
    const unsigned smem_lse = smem_ds + 2 * FM_DS_BYTES;                 // lse (log2) of each stage's queries
    const unsigned smem_dsum = smem_lse + FM_STAGES * FM_STEP_M * 4;     // Dsum of each stage's queries
    const unsigned smem_dqs = smem_dsum + FM_STAGES * FM_STEP_M * 4;     // dQ staging: [FM_WG * FM_CWG][FM_DQ_BUFS] chunks
    const unsigned smem_px = smem_dqs + FM_WG * FM_CWG * FM_DQ_BUFS * $DQ_CHUNK_BYTES;   // P exchange (pair mode)
    const unsigned bars = smem_px + FM_PX_BYTES;
    (void)smem_px;
#define FM_BAR_Q_FULL(s) (bars + 8u * (unsigned)(s))
#define FM_BAR_DO_FULL(s) (bars + 8u * (FM_STAGES + (unsigned)(s)))
#define FM_BAR_EMPTY(s) (bars + 8u * (2u * FM_STAGES + (unsigned)(s)))
// A consumer's release of stage `st`: at the stage's constant address where that measured faster
// (FM_RELEASE_PER_STAGE; fm_release_stage, docs/backward.md "The stage release").
#if FM_RELEASE_PER_STAGE
#define FM_RELEASE_STAGE(st) fm_release_stage<FM_STAGES>(fm_consumer_release, FM_BAR_EMPTY(0), (st))
#else
#define FM_RELEASE_STAGE(st) fm_consumer_release(FM_BAR_EMPTY(st))
#endif
#if FM_KV_OWN_BARRIER
#define FM_BAR_KV (bars + 8u * (3u * FM_STAGES))   // K and V held in registers: loaded first, on a barrier of their own
#endif
#if FM_DQ_WRITER
    // The writer warp's named barriers, per staging buffer b = cw * FM_DQ_BUFS + u (at most 2): a consumer
    // warpgroup's 128 threads and the writer's 32.
#define FM_BAR_DQ_EMPTY 9    // + b: the writer has read the staging buffer
#define FM_BAR_DQ_FULL 11    // + b: the chunk is staged
#endif

    // The consumer warpgroup's column group: the CTA's (x % FM_GRID_SPLIT) and, in the pair mode, its half.
#if FM_PAIR
    const int half = threadIdx.x < 128u ? 0 : (int)((threadIdx.x / 128u - 1u) % FM_CWG);
#else
    const int half = 0;
#endif
    // The CTA's place (x, KV head, batch): $CTA_PLACE_DOC.
#if FM_GROUP_SLICES > 1
    // Group slices: x is slice * (the key tiles' x extent) + x of the tile, so each slice's key tiles run in the
    // launch order one after another (the query heads of a KV head one slice at a time, as separate heads are).
    const uint3 cta_slice = $CTA_PLACE;
    const unsigned tiles_x = gridDim.x / FM_GROUP_SLICES;
    const uint3 cta = make_uint3(cta_slice.x % tiles_x, cta_slice.y, cta_slice.z);
    const int slice = (int)(cta_slice.x / tiles_x);
#else
    const uint3 cta = $CTA_PLACE;
    const int slice = 0;
#endif
    const int split = (int)(cta.x % FM_GRID_SPLIT) * FM_CWG + half;
    const int kv_head = (int)cta.y;
    const int batch = (int)cta.z;
    const int group = p.heads / p.kv_heads;   // query heads per K/V head (GQA / MQA)
    // The query heads this CTA walks: its slice of the group.
    const int slice_heads = group / FM_GROUP_SLICES;
    const int g0 = slice * slice_heads, g1 = g0 + slice_heads;
    // The key tile (the dispatch order of the group's first head; uniform over the CTA).
$CTA_ITEM    const int n_cta = fm_cta_of_block(p, batch, kv_head * group, $CTA_BLOCK);
    if (n_cta < 0) return;
    const unsigned warpgroup = fm_warpgroup_index();

    if (threadIdx.x == 0) {
        fm_prefetch_tensormap(&tma_q);
        fm_prefetch_tensormap(&tma_k);
        fm_prefetch_tensormap(&tma_v);
        fm_prefetch_tensormap(&tma_do);
#if FM_KV_OWN_BARRIER
        fm_mbar_init(FM_BAR_KV, 1);
#endif
#pragma unroll
        for (int s = 0; s < FM_STAGES; ++s) {
            fm_mbar_init(FM_BAR_Q_FULL(s), 1 + 32);    // lane 0's transaction arrival + the 32 lse/Dsum copies
            fm_mbar_init(FM_BAR_DO_FULL(s), 1 + 32);
            fm_mbar_init(FM_BAR_EMPTY(s), FM_CONSUMERS);   // one arrival per consumer thread
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    // Programmatic dependent launch: the postprocess may launch; the preprocess's writes
    // (lse in log2, Dsum, the zeroed dQ accumulator and semaphores) are complete and
    // visible after the wait, before any thread reads or reduces into them.
    fm_launch_dependents();
    fm_wait_prior_grids();

    if (warpgroup == 0u) {
        // ---------------- producer: warp 0; lane 0 issues every TMA load, the 32 lanes copy lse and Dsum ----------------
        asm volatile("setmaxnreg.dec.sync.aligned.u32 $PRODUCER_REGS;\n" ::: "memory");
        if (threadIdx.x < 32u) {
            const int lane = (int)threadIdx.x;
            unsigned it = 0;
            bool kv_loaded = false;
            for (int gi = g0; gi < g1; ++gi) {
                const int head = kv_head * group + gi;
                const long long bh = (long long)batch * p.heads + head;
                const fm_schedule sched = fm_make_schedule(p, batch, head, n_cta$SCHEDULE_ITEM);
                for (int kk = 0; kk < sched.num_steps; ++kk, ++it) {
                    const fm_step t = fm_step_at(p, sched, batch, head, kk);
                    // K and V of the CTA come with its first step (only when some step is visited, so no load outlives
                    // the CTA), in the order that step reads them: K and Q on the stage's Q barrier (S^T = K Q^T), then
                    // V and dO on its dO barrier (dP^T = V dO^T). The first S^T waits for K and Q only, and the
                    // consumers' waits for the stage cover K and V with no wait of their own. Held in registers
                    // (head dim 64) or with tile lists, K and V load first on their own barrier (FM_KV_OWN_BARRIER;
                    // A/B on the H100: the shared barriers were 2-4% slower there).
#if FM_KV_OWN_BARRIER
                    if (!kv_loaded && lane == 0) {
                        fm_mbar_expect_tx(FM_BAR_KV, 2 * FM_KV_TILE_BYTES);
#pragma unroll
                        for (int c = 0; c < FM_D_CHUNKS; ++c) {
#if FM_PAIRED_KEYS
                            // Paired key blocks: warpgroup w's 64 rows (byte $KV_WG_STRIDE w of each chunk) from its own
                            // block, 64-row boxes; a missing block (-1) starts at row -64, which TMA fills with zeros.
#pragma unroll
                            for (int w = 0; w < 2; ++w) {
                                const int key0 = 64 * (w == 0 ? pair_item.x : pair_item.y);
                                fm_tma_load_4d(smem_k + c * FM_KV_CHUNK_BYTES + w * $KV_WG_STRIDEu, &tma_k, FM_BAR_KV, 64 * c, key0, kv_head, batch);
                                fm_tma_load_4d(smem_v + c * FM_KV_CHUNK_BYTES + w * $KV_WG_STRIDEu, &tma_v, FM_BAR_KV, 64 * c, key0, kv_head, batch);
                            }
#else
                            fm_tma_load_4d(smem_k + c * FM_KV_CHUNK_BYTES, &tma_k, FM_BAR_KV, 64 * c, $KEY_ROW0, kv_head, batch);
                            fm_tma_load_4d(smem_v + c * FM_KV_CHUNK_BYTES, &tma_v, FM_BAR_KV, 64 * c, $KEY_ROW0, kv_head, batch);
#endif
                        }
                    }
                    const bool first = false;
#else
                    const bool first = !kv_loaded;
#endif
                    kv_loaded = true;
                    const unsigned kv_bytes = first ? FM_KV_TILE_BYTES : 0u;
                    const unsigned stage = it % FM_STAGES;
                    const unsigned phase = (it / FM_STAGES) & 1u;
                    fm_mbar_wait(FM_BAR_EMPTY(stage), phase ^ 1u);
                    if (lane == 0) {
                        fm_mbar_expect_tx(FM_BAR_Q_FULL(stage), FM_Q_TILE_BYTES + kv_bytes);
#if !FM_KV_OWN_BARRIER
                        if (first) {
#pragma unroll
                            for (int c = 0; c < FM_D_CHUNKS; ++c)
                                fm_tma_load_4d(smem_k + c * FM_KV_CHUNK_BYTES, &tma_k, FM_BAR_Q_FULL(stage), 64 * c, $KEY_ROW0, kv_head, batch);
                        }
#endif
#pragma unroll
                        for (int c = 0; c < FM_D_CHUNKS; ++c)
                            fm_tma_load_4d(smem_q + stage * FM_Q_TILE_BYTES + c * FM_Q_CHUNK_BYTES, &tma_q, FM_BAR_Q_FULL(stage),
                                           64 * c, t.m * FM_STEP_M, head, batch);
                        fm_mbar_expect_tx(FM_BAR_DO_FULL(stage), FM_Q_TILE_BYTES + kv_bytes);
#if !FM_KV_OWN_BARRIER
                        if (first) {
#pragma unroll
                            for (int c = 0; c < FM_D_CHUNKS; ++c)
                                fm_tma_load_4d(smem_v + c * FM_KV_CHUNK_BYTES, &tma_v, FM_BAR_DO_FULL(stage), 64 * c, $KEY_ROW0, kv_head, batch);
                        }
#endif
#pragma unroll
                        for (int c = 0; c < FM_D_CHUNKS; ++c)
                            fm_tma_load_4d(smem_do + stage * FM_Q_TILE_BYTES + c * FM_Q_CHUNK_BYTES, &tma_do, FM_BAR_DO_FULL(stage),
                                           64 * c, t.m * FM_STEP_M, head, batch);
                    }
                    // lse (log2) and Dsum of the step's FM_STEP_M queries: lane l copies the FM_STEP_M / 32 consecutive
                    // queries from FM_STEP_M / 32 * l of the preprocess's padded rows with one vector load and store each,
                    // then arrives (release) on the full barriers, which count the TMA transaction arrival and these 32.
                    const long long row0 = bh * p.seqlen_q_pad + (long long)t.m * FM_STEP_M;
$LSE_COPY
                    fm_mbar_arrive(FM_BAR_Q_FULL(stage));
                    fm_mbar_arrive(FM_BAR_DO_FULL(stage));
                }
            }
$DQ_WRITER_WARP        }
    } else {
        // ---------------- consumers: warpgroup cw owns keys 64*wg .. 64*wg+63 of the CTA, columns of group `split` ----------------
        asm volatile("setmaxnreg.inc.sync.aligned.u32 $CONSUMER_REGS;\n" ::: "memory");
        const int cw = (int)warpgroup - 1;   // consumer warpgroup
        const int wg = cw / FM_CWG;          // its 64-key group
        const int lt = (int)(threadIdx.x % 128u);
        const int ct = (int)threadIdx.x - 128;
        (void)ct;   // the deterministic dQ order's (FM_DETERMINISTIC)
        // Thread of the mask's backward accumulator: key group (n_cta % FM_SUB) * FM_WG + wg of the mask tile.
#if FM_PAIRED_KEYS
        // Paired key blocks: each warpgroup's words are its own 64-key mask tile's (threads 0..127).
        const int mask_thread = lt;
        // The key of this warpgroup's CTA row 0 (the schedule's s.n0, from the same header).
        const int pair_key0 = fm_pair_key0(p, pair_item, wg);
#else
        const int mask_thread = 128 * ((n_cta % FM_SUB) * FM_WG + wg) + lt;
#endif
        (void)mask_thread;
        // $LAYOUT_ST thread mode: this thread's first key row (of the CTA's keys) and query column of S^T.
        const int key_row = 64 * wg + $THREAD_ROW_ST;
        const int q_col = $THREAD_COL_ST;
        // The thread of this warp whose S^T fragment row is lane % 8 at column 0 (the dS stmatrix rows).
        const int sm_lt = (lt & ~31) | (4 * (lt & 7));
        // $LAYOUT_DKV thread mode (dK, dV: keys x FM_DKV columns).
        const int kv_row = $THREAD_ROW_DKV;
        const int kv_col = $THREAD_COL_DKV;
        // $LAYOUT_DQ thread mode (a dQ chunk: queries x 64 columns).
        const int dq_row = $THREAD_ROW_DQ;
        const int dq_col = $THREAD_COL_DQ;
        (void)dq_row;   // the row-major dQ atomics' (DqReduce::Atomics)
        (void)dq_col;
        const int d0 = split * FM_DKV;   // first dK/dV/dQ column of this CTA
        float dv_acc[$DKV_VALUES], dk_acc[$DKV_VALUES];
#pragma unroll
        for (int i = 0; i < $DKV_VALUES; ++i) { dv_acc[i] = 0.f; dk_acc[i] = 0.f; }
        // The GEMMs' shared-memory descriptors, once (fm_desc; a slice adds its offset in 16-byte units):
        // this warpgroup's 64 keys start at byte K(64 * wg, 0) of the K and V tiles; Q, dO and dS at their
        // first stage and buffer.
        const unsigned long long desc_k = fm_desc(smem_k + (unsigned)wg * $KV_WG_STRIDEu, FM_DESC_K);
        const unsigned long long desc_v = fm_desc(smem_v + (unsigned)wg * $KV_WG_STRIDEu, FM_DESC_K);
        const unsigned long long desc_k_mn = fm_desc(smem_k, FM_DESC_K_MN);
        const unsigned long long desc_q = fm_desc(smem_q, FM_DESC_Q), desc_do = fm_desc(smem_do, FM_DESC_Q);
        const unsigned long long desc_q_mn = fm_desc(smem_q, FM_DESC_Q_MN) + $DKV_OFFSET16_EXPR;
        const unsigned long long desc_do_mn = fm_desc(smem_do, FM_DESC_Q_MN) + $DKV_OFFSET16_EXPR;
        const unsigned long long desc_ds = fm_desc(smem_ds, FM_DESC_DS);
        // This thread's dS stmatrix address for g = 0 within a dS buffer (the generator checks that store g is at
        // this offset XOR $DS_G_XOR * (g % $DS_G_PER_HALF), plus its 64-query half's $DS_HALF_BYTES * (g / $DS_G_PER_HALF);
        // the buffers and halves are 1024-byte aligned, so the XOR commutes with the adds).
        // Store g = 0: register sm_m = (lt % 32) / 8, values 2 sm_m, 2 sm_m + 1 of thread sm_lt: key row
        // 64 * wg + $THREAD_ROW_ST_SM + $VALUE_ROW_ST_2M, query column $THREAD_COL_ST_SM + $VALUE_COL_ST_2M ($LAYOUT_ST).
        const int sm_m = (lt % 32) / 8;
#if FM_KV_REGISTERS
        unsigned k_frag[$KV_FRAG_REGS], v_frag[$KV_FRAG_REGS];   // loaded once K and V are in shared memory
#endif
        const unsigned ds_st0 = fm_sw128((unsigned)($THREAD_COL_ST_SM + $VALUE_COL_ST_2M) * $DS_Q_BYTES
                                         + (unsigned)(64 * wg + $THREAD_ROW_ST_SM + $VALUE_ROW_ST_2M) * $DS_KEY_BYTES);
        unsigned it = 0;
#if FM_DET_CONSUMERS
        // The dQ turn (docs/backward.md, "Deterministic mode"). A step's reductions are passed on to the next CTA
        // under this CTA's next step's first GEMMs (or after its walk), once complete, by one release add after a
        // barrier of the consumers; the step's own turn is read there too, ahead of the dS barrier that needs it.
        long long det_prev = -1;   // the semaphore of the step whose turn this CTA holds; -1: none
        int det_seen = -1;         // this step's semaphore as read under its GEMMs
#if FM_PAIR || FM_PAIRED_KEYS
#define FM_DET_SYNC(id) fm_named_sync_divergent<FM_CONSUMERS>(id)   // reached from each half's own GEMMs, or a skipped step
#else
#define FM_DET_SYNC(id) fm_named_sync<FM_CONSUMERS>(id)
#endif
#define FM_DET_RELEASE()                                                                                            \
    do {                                                                                                          \
        if (det_prev >= 0) {                                                                                      \
            $DQ_DRAIN                                 /* the bulk reductions of that step have completed */      \
            FM_DET_SYNC(2);                           /* every consumer's reductions of that step are done */    \
            if (ct == 128 * half) fm_red_release_add(p.sem + det_prev, 1);                                        \
        }                                                                                                         \
    } while (0)
#define FM_DET_PASS_AND_READ()                                                                                      \
    do {                                                                                                          \
        FM_DET_RELEASE();                                                                                         \
        if (ct == 128 * half) det_seen = fm_ld_relaxed(p.sem + sem_index);                                        \
    } while (0)
// The step's turn: the column group's first consumer warp takes the rank (warp-wide), then lane 0 waits for it. A
// read ahead that saw the turn needs no acquire: this CTA reads nothing the others write, and its reductions, issued
// once that value is back (a control dependency, then the dS barrier), reach L2 after the ones the value's release
// add followed.
#define FM_DET_WAIT_TURN()                                                                                          \
    do {                                                                                                          \
        if (ct - 128 * half < 32) {                                                                               \
            const int rank = fm_step_rank(p, sched, batch, head, n_cta, t);                                       \
            if (ct == 128 * half && det_seen != rank) while (fm_ld_acquire(p.sem + sem_index) != rank) { }        \
            __syncwarp();                                                                                         \
        }                                                                                                         \
    } while (0)
#else
#define FM_DET_PASS_AND_READ() do { } while (0)
#endif
        for (int gi = g0; gi < g1; ++gi) {
            const int head = kv_head * group + gi;
            const long long bh = (long long)batch * p.heads + head;
            (void)bh;   // the consumers' dQ addresses (the writer warp's own with DQ_WRITER) and FM_DETERMINISTIC's order
            const fm_schedule sched = fm_make_schedule(p, batch, head, n_cta$SCHEDULE_ITEM);
            $KEY_KEEP
            for (int kk = 0; kk < sched.num_steps; ++kk, ++it) {
                const fm_step t = fm_step_at(p, sched, batch, head, kk);
                $LOAD_WORD
                const unsigned stage = it % FM_STAGES;
                const unsigned phase = (it / FM_STAGES) & 1u;
#if FM_KV_OWN_BARRIER
                if (it == 0) {
                    fm_mbar_wait(FM_BAR_KV, 0u);   // K and V, loaded first on their own barrier
#if FM_KV_REGISTERS
                    // The RS A fragments of K and V by ldmatrix.x4 from the warpgroup's 64 key rows (wg * $KV_WG_BYTES
                    // bytes into every 64-column chunk; fm_ldmatrix_a_offset, both proven by the generator).
#pragma unroll
                    for (int j = 0; j < FM_D / 16; ++j) {
                        const unsigned b = (unsigned)wg * $KV_WG_BYTESu + fm_ldmatrix_a_offset(lt, j, FM_KV_CHUNK_BYTES);
                        fm_ldmatrix_x4(smem_k + b, k_frag[4 * j], k_frag[4 * j + 1], k_frag[4 * j + 2], k_frag[4 * j + 3]);
                        fm_ldmatrix_x4(smem_v + b, v_frag[4 * j], v_frag[4 * j + 1], v_frag[4 * j + 2], v_frag[4 * j + 3]);
                    }
#endif
                }
#endif
#if FM_DET_CONSUMERS
                const long long sem_index = (bh * (p.seqlen_q_pad / FM_STEP_M) + t.m) * FM_DSPLIT + split;   // this step's dQ turn
#endif
                const unsigned long long q_off16 = stage * (FM_Q_TILE_BYTES / 16);   // the stage's Q / dO tile
                const unsigned ds_buf = it & 1u;
                const unsigned ds_s = smem_ds + ds_buf * FM_DS_BYTES;
#if FM_PAIRED_KEYS
                if (t.mask_tile == FM_NOT_MINE) {
                    // Paired key blocks: this warpgroup's block does not see the step's queries. Its dK and dV are
                    // unchanged and its dS^T rows are not written; it reads nothing of the stage, computes its dQ chunks
                    // over the other warpgroup's 64 keys (t.key_half) and releases the stage. Every wgmma it issues
                    // completes inside this branch.
$PAIRED_SKIP
                    continue;
                }
#endif
                float s_acc[$ST_VALUES], dp_acc[$ST_VALUES];
#if FM_PAIR
                unsigned p_a[$A_REGS], ds_a[$A_REGS];
                const unsigned ds_st = ds_s + ds_st0;
                // Pair mode: half 0 computes S^T and P^T, half 1 dP^T and dS^T (each GEMM once per step); P^T (f32) goes
                // through the exchange buffer to half 1 and dS^T through the dS buffer to half 0 (named barriers 7 and 8 of
                // both halves' 256 threads). Then each half adds its own columns of dV, dK and its dQ chunks.
                // The exchange: value i of thread lt ($LAYOUT_ST, the same fragment in both halves) at byte $PX_BYTE_EXPR.
                if (half == 0) {
                    fm_mbar_wait(FM_BAR_Q_FULL(stage), phase);
                    fm_keys_queries_t(s_acc, desc_k, desc_q + q_off16);    // S^T = K Q^T
                    FM_DET_PASS_AND_READ();
                    fm_wgmma_wait<0>();
                    fm_fence_array(s_acc);
                    if (t.partial) fm_apply_mask(s_acc, p, sched, t, word, key_row, q_col);
                    const float* lse_s = reinterpret_cast<const float*>(fm_smem_raw + (smem_lse + stage * FM_STEP_M * 4 - smem_raw_u32));
#pragma unroll
                    for (int i = 0; i < $ST_VALUES; ++i) {
                        const float lse = lse_s[q_col + $VALUE_COL_ST];   // $LAYOUT_ST value mode: query column
                        s_acc[i] = $P_RECOMPUTE;   // P^T
                    }
#pragma unroll
                    for (int i = 0; i < $ST_VALUES; i += 4)
                        asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" :: "r"(smem_px + (unsigned)($PX_BYTE_EXPR)),
                                     "f"(s_acc[i]), "f"(s_acc[i + 1]), "f"(s_acc[i + 2]), "f"(s_acc[i + 3]) : "memory");
                    fm_named_arrive<FM_CONSUMERS>(7);   // P^T is in the exchange
                    fm_convert_a(s_acc, p_a);
                    fm_mbar_wait(FM_BAR_DO_FULL(stage), phase);
                    fm_kv_grad(dv_acc, p_a, desc_do_mn + q_off16);   // dV += P^T dO (this half's columns)
                    fm_named_sync<FM_CONSUMERS>(8);   // half 1's dS^T is in the dS buffer
                    // dV has run under half 1's dS^T: complete it here, so that P^T's registers are free for the dQ chunks.
                    fm_wgmma_wait<0>();
                    fm_fence_array(dv_acc);
                    fm_fence_array(p_a);
                    // dS^T back into the RS A registers: ldmatrix at the stmatrix addresses (the inverse of the store).
#pragma unroll
                    for (int g = 0; g < $X4_STORES; ++g)
                        fm_ldmatrix_x4(FM_DS_ST_ADDR(ds_st, g),
                                       ds_a[4 * g], ds_a[4 * g + 1], ds_a[4 * g + 2], ds_a[4 * g + 3]);
                } else {
                    fm_mbar_wait(FM_BAR_DO_FULL(stage), phase);
                    fm_keys_queries_t(dp_acc, desc_v, desc_do + q_off16);  // dP^T = V dO^T
                    FM_DET_PASS_AND_READ();
                    fm_mbar_wait(FM_BAR_Q_FULL(stage), phase);             // Q (dK), covered for half 0 above
                    fm_wgmma_wait<0>();
                    fm_fence_array(dp_acc);
                    const float* dsum_s = reinterpret_cast<const float*>(fm_smem_raw + (smem_dsum + stage * FM_STEP_M * 4 - smem_raw_u32));
                    fm_named_sync<FM_CONSUMERS>(7);   // half 0's P^T is in the exchange
                    // Four values at a time: P^T into the A registers (pairs 2m, 2m + 1 -> register m, as fm_convert_a) and
                    // dS^T = P^T o (dP^T - Dsum) ($LAYOUT_ST value mode: query column q_col + $VALUE_COL_ST).
#pragma unroll
                    for (int i = 0; i < $ST_VALUES; i += 4) {
                        const uint4 v = fm_lds128(smem_px + (unsigned)($PX_BYTE_EXPR));
                        const float pv[4] = {__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w)};
                        p_a[i / 2] = fm_act2(pv[0], pv[1]);
                        p_a[i / 2 + 1] = fm_act2(pv[2], pv[3]);
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int j = i + e;
                            dp_acc[j] = pv[e] * (dp_acc[j] - dsum_s[q_col + $VALUE_COL_ST_J]);   // dS^T
                        }
                    }
                    fm_convert_a(dp_acc, ds_a);
#pragma unroll
                    for (int g = 0; g < $X4_STORES; ++g)
                        fm_stmatrix_x4(FM_DS_ST_ADDR(ds_st, g),
                                       ds_a[4 * g], ds_a[4 * g + 1], ds_a[4 * g + 2], ds_a[4 * g + 3]);
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // generic-proxy stores -> wgmma reads
                    fm_named_arrive<FM_CONSUMERS>(8);   // dS^T is in the dS buffer
                    fm_kv_grad(dv_acc, p_a, desc_do_mn + q_off16);   // dV += P^T dO (this half's columns)
                }
#else
                fm_mbar_wait(FM_BAR_Q_FULL(stage), phase);
#if FM_KV_REGISTERS
                fm_keys_queries_rs(s_acc, k_frag, desc_q + q_off16);    // S^T = K Q^T
#else
                fm_keys_queries_t(s_acc, desc_k, desc_q + q_off16);    // S^T = K Q^T
#endif
                fm_mbar_wait(FM_BAR_DO_FULL(stage), phase);
#if FM_KV_REGISTERS
                fm_keys_queries_rs(dp_acc, v_frag, desc_do + q_off16);  // dP^T = V dO^T
#else
                fm_keys_queries_t(dp_acc, desc_v, desc_do + q_off16);  // dP^T = V dO^T
#endif
                FM_DET_PASS_AND_READ();
                fm_wgmma_wait<1>();
                fm_fence_array(s_acc);
                if (t.partial) fm_apply_mask(s_acc, p, sched, t, word, key_row, q_col);
                // lse (log2) and Dsum of the step's queries (copied by the producer warp before its full-barrier
                // arrivals), read after the waits above.
#if FM_LSE_PAIRS
                // As this thread's $ST_PAIRS column pairs: value i's columns q_col + $VALUE_COL_ST and its pair
                // partner's are adjacent, from an even column, pair slot fm_st_pair_slot[i] at column
                // q_col + fm_st_pair_col[slot] (the generator derives both from $LAYOUT_ST and checks them), so
                // each pair is one 8-byte load.
                constexpr int fm_st_pair_slot[$ST_VALUES] = $ST_PAIR_SLOTS;
                constexpr int fm_st_pair_col[$ST_PAIRS] = $ST_PAIR_COLS;
                const unsigned lse_row = smem_lse + stage * FM_STEP_M * 4 + (unsigned)q_col * 4u;
                const unsigned dsum_row = smem_dsum + stage * FM_STEP_M * 4 + (unsigned)q_col * 4u;
                float2 lse_p[$ST_PAIRS];
#pragma unroll
                for (int k = 0; k < $ST_PAIRS; ++k) lse_p[k] = fm_lds64_f2(lse_row + 4u * fm_st_pair_col[k]);
#pragma unroll
                for (int i = 0; i < $ST_VALUES; ++i) {
                    const float2 l2 = lse_p[fm_st_pair_slot[i]];
                    const float lse = ($VALUE_COL_ST) % 2 ? l2.y : l2.x;
                    s_acc[i] = $P_RECOMPUTE;   // P^T
                }
                fm_wgmma_wait<0>();
                fm_fence_array(dp_acc);
                float2 dsum_p[$ST_PAIRS];
#pragma unroll
                for (int k = 0; k < $ST_PAIRS; ++k) dsum_p[k] = fm_lds64_f2(dsum_row + 4u * fm_st_pair_col[k]);
#pragma unroll
                for (int i = 0; i < $ST_VALUES; ++i) {
                    const float2 d2 = dsum_p[fm_st_pair_slot[i]];
                    dp_acc[i] = s_acc[i] * (dp_acc[i] - (($VALUE_COL_ST) % 2 ? d2.y : d2.x));   // dS^T
                }
#else
                // Through generic pointers, one float per value; equal columns share a load.
                const float* lse_s = reinterpret_cast<const float*>(fm_smem_raw + (smem_lse + stage * FM_STEP_M * 4 - smem_raw_u32));
                const float* dsum_s = reinterpret_cast<const float*>(fm_smem_raw + (smem_dsum + stage * FM_STEP_M * 4 - smem_raw_u32));
#pragma unroll
                for (int i = 0; i < $ST_VALUES; ++i) {
                    const float lse = lse_s[q_col + $VALUE_COL_ST];   // $LAYOUT_ST value mode: query column
                    s_acc[i] = $P_RECOMPUTE;   // P^T
                }
                fm_wgmma_wait<0>();
                fm_fence_array(dp_acc);
#pragma unroll
                for (int i = 0; i < $ST_VALUES; ++i) dp_acc[i] = s_acc[i] * (dp_acc[i] - dsum_s[q_col + $VALUE_COL_ST]);   // dS^T
#endif
                unsigned p_a[$A_REGS], ds_a[$A_REGS];
                fm_convert_a(s_acc, p_a);
                fm_convert_a(dp_acc, ds_a);
                // dS^T -> shared memory as the MN-major A operand of dQ = dS K: $DS_LAYOUT_DOC.
                // stmatrix.m8n8.x4 (PTX ISA 9.7.14.5.16): registers 4g..4g+3 of the warp are four 8x8 matrices
                // (checked by the generator); lane 8j + r gives row r of matrix j = register m = 4g + j: the 8
                // queries of one key, at the pair 2m of the warp's thread 4r.
                const unsigned ds_st = ds_s + ds_st0;
#pragma unroll
                for (int g = 0; g < $X4_STORES; ++g)
                    fm_stmatrix_x4(FM_DS_ST_ADDR(ds_st, g),
                                   ds_a[4 * g], ds_a[4 * g + 1], ds_a[4 * g + 2], ds_a[4 * g + 3]);
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // generic-proxy stores -> wgmma reads
                fm_kv_grad(dv_acc, p_a, desc_do_mn + q_off16);   // dV += P^T dO
#endif
#if FM_DET_CONSUMERS
                FM_DET_WAIT_TURN();
#endif
                $DQ_BEFORE_SYNC
                $DS_SYNC
                $DQ_ROWS
$DQ_CHUNKS_AND_DK
                fm_wgmma_wait<0>();
                fm_fence_array(dv_acc);
                fm_fence_array(dk_acc);
                fm_fence_array(p_a);
                fm_fence_array(ds_a);
                FM_RELEASE_STAGE(stage);
#if FM_DET_CONSUMERS
                det_prev = sem_index;   // released by FM_DET_RELEASE under the next step's GEMMs
#endif
            }
        }
#if FM_DET_CONSUMERS
        FM_DET_RELEASE();   // the walk's last step
#endif
        $DQ_DRAIN_READ   // no bulk read of the staging buffers outlives the CTA (their global writes need not complete here)
#if FM_GROUP_SLICES > 1
$GROUP_ADD
#else
        // ---- epilogue: dK * scale and dV, $ACT, keys < $KEY_END$DKV_NOTE ----
        $DKV_BASE
        if (((reinterpret_cast<unsigned long long>(p.dk) | reinterpret_cast<unsigned long long>(p.dv)) & 15ull) == 0ull) {
            // dK and dV through shared memory: once every consumer's last dQ GEMM (which reads all of the
            // CTA's K rows) is complete, each warpgroup's own K and V rows take its dK and dV, then whole rows
            // go to global memory in 16-byte pieces.
            fm_named_sync<FM_CONSUMERS>(1);   // no wgmma reads K or V any more
$KV_STAGED        } else {
$DKV_PAIRS_CAST
        }
#endif
    }
}
"#;

/// The row-major postprocess (atomics mode): one warp per query row.
pub(super) const POST_ROWS: &str = r#"// ---------------- postprocess: dQ = scale * accumulator ([B, H, Sq_pad, D] row-major), cast ----------------
extern "C" __global__ void __launch_bounds__(32 * $ROWS_PER_BLOCK)
$POST_KERNEL(const __grid_constant__ fm_bwd_params p)
{
    fm_wait_prior_grids();   // the main kernel's dQ reductions
    const int row = (int)(blockIdx.x * $ROWS_PER_BLOCK + threadIdx.x / 32u);
    const int lane = (int)(threadIdx.x % 32u);
    const int head = (int)blockIdx.y, batch = (int)blockIdx.z;
    if (row >= p.seqlen_q) return;
    const long long bh = (long long)batch * p.heads + head;
    const float* acc = p.dq_accum + (bh * p.seqlen_q_pad + row) * FM_D;
    unsigned* dq = reinterpret_cast<unsigned*>(p.dq + $DQ_ROW_AT);
    for (int c = lane; c < FM_D / 2; c += 32) dq[c] = fm_act2(acc[2 * c] * p.scale, acc[2 * c + 1] * p.scale);
}
"#;

/// The fragment-order postprocess (`DqReduce::Bulk`, `DqReduce::FragmentAtomics`): one block
/// per (64-query step, 64-column chunk), thread `lt` reads the values it added
/// (`$POST_READ`: [`POST_READ_PAIRS`] or [`POST_READ_QUADS`]) and writes them where the
/// accumulator layout puts them.
pub(super) const POST_FRAGMENT: &str = r#"// ---------------- postprocess: dQ = scale * accumulator (chunks in $LAYOUT_DQ register order), cast ----------------
// Chunk (rows FM_DQ_ROWS * m.., columns 64*chunk..) of (batch, head): $POST_CHUNK_ORDER.
extern "C" __global__ void __launch_bounds__(128)
$POST_KERNEL(const __grid_constant__ fm_bwd_params p)
{
    fm_wait_prior_grids();   // the main kernel's dQ reductions
    const int m = (int)(blockIdx.x / FM_D_CHUNKS), chunk = (int)(blockIdx.x % FM_D_CHUNKS);
    const int head = (int)blockIdx.y, batch = (int)blockIdx.z;
    const int lt = (int)threadIdx.x;
    const long long bh = (long long)batch * p.heads + head;
    const float* chunk_src = p.dq_accum + ((bh * (p.seqlen_q_pad / FM_DQ_ROWS) + m) * FM_D_CHUNKS + chunk) * (FM_DQ_ROWS * 64);
    // The chunk's 64 x 64 values as bf16/fp16 pairs, staged so that the stores below fill whole
    // 32-byte sectors (a thread's pairs sit four lanes to a row in the accumulator layout).
    // One word of padding per row keeps the register-order writes off a single bank.
    __shared__ unsigned fm_dq_tile[FM_DQ_ROWS][33];
    // $LAYOUT_DQ thread mode: base row and column of thread lt within the chunk.
    const int trow = $THREAD_ROW_DQ;
    const int tcol = $THREAD_COL_DQ;
$POST_READ    __syncthreads();
    // Row-major write-out: warp w stores rows w, w + 4, ...; lane c the pair at columns 2c, 2c + 1,
    // so each warp store is one row's 128 contiguous bytes.
    const int warp = lt / 32, lane = lt % 32;
    for (int r = warp; r < FM_DQ_ROWS; r += 4) {
        const int row = m * FM_DQ_ROWS + r;
        if (row < p.seqlen_q) {
            unsigned* dst = reinterpret_cast<unsigned*>(p.dq + $DQ_ROW_AT + chunk * 64);
            dst[lane] = fm_dq_tile[r][lane];
        }
    }
}
"#;

/// The postprocess's read of a chunk in pairs (`DqReduce::Bulk`: pair j of thread lt at `[j][lt]`).
pub(super) const POST_READ_PAIRS: &str = r#"    const float2* src = reinterpret_cast<const float2*>(chunk_src);
#pragma unroll
    for (int j = 0; j < $DQ_VALUES / 2; ++j) {
        const float2 v = src[j * 128 + lt];
        // $LAYOUT_DQ value mode: values 2j, 2j+1 at row offset $VALUE_ROW_DQ_2J, columns $VALUE_COL_DQ_2J (+1, checked adjacent; even)
        fm_dq_tile[trow + $VALUE_ROW_DQ_2J][(tcol + $VALUE_COL_DQ_2J) / 2] = fm_act2(v.x * p.scale, v.y * p.scale);
    }
"#;

/// The postprocess's read of a chunk in quads (`DqReduce::FragmentAtomics`: values 4q..4q+3
/// of thread lt at `[q][lt]`), each quad two pairs of the same mapping.
pub(super) const POST_READ_QUADS: &str = r#"    const float4* src = reinterpret_cast<const float4*>(chunk_src);
#pragma unroll
    for (int q = 0; q < $DQ_VALUES / 4; ++q) {
        const float4 quad = src[q * 128 + lt];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int j = 2 * q + h;
            const float2 v = h == 0 ? make_float2(quad.x, quad.y) : make_float2(quad.z, quad.w);
            // $LAYOUT_DQ value mode: values 2j, 2j+1 at row offset $VALUE_ROW_DQ_2J, columns $VALUE_COL_DQ_2J (+1, checked adjacent; even)
            fm_dq_tile[trow + $VALUE_ROW_DQ_2J][(tcol + $VALUE_COL_DQ_2J) / 2] = fm_act2(v.x * p.scale, v.y * p.scale);
        }
    }
"#;
