//! The backward's generated pieces: operand tiles and GEMMs from the shared-memory
//! component, fragment index expressions from [`FragmentMap`], the mask words' slot check,
//! and the template fill.

use std::fmt::Write as _;

use fragmask_gmma_frag::TiledAccumulator;

use super::config::P_EXCHANGE_BYTES;
use super::dq::dq_pieces;
use super::template::TEMPLATE;
use super::{
    BackwardKernel, BackwardMask, BackwardParams, DQ_CHUNK_ROWS, KERNEL_NAME, POST_KERNEL_NAME,
    POST_KV_KERNEL_NAME, PRE_KERNEL_NAME, ROWS_PER_BLOCK,
};
use crate::attention::ConfigError;
use crate::cuda::PRELUDE;
use crate::family::epilogue;
use crate::family::fragment::FragmentMap;
use crate::family::mask;
use crate::family::ptx::{self, wgmma_rs, wgmma_rs_k_major, wgmma_ss_name, wgmma_ss_trans};
use crate::family::schedule::key_tile::{self, KeyGrid, KeyPlacement};
use crate::family::schedule::{ListEntries, LISTS_DENSE_AT_RUN_TIME, WINDOW_INFINITE};
use crate::family::smem::OperandTile;
use crate::family::softmax;
use crate::family::template::fill;

fn layout_err(e: impl core::fmt::Display) -> ConfigError {
    ConfigError::Layout(e.to_string())
}

/// The shared-memory tiles of the backward, each read through the views its GEMMs need.
struct Tiles {
    /// K and V of the CTA, K-major: the A operand of `Sᵀ = K Qᵀ` / `dPᵀ = V dOᵀ`
    /// (64 rows per warpgroup).
    kv: OperandTile,
    /// K as the MN-major B operand of `dQ = dS K` (N = 64 columns of D, K = the CTA's keys).
    k_mn: OperandTile,
    /// Q and dO of a step, K-major: the B operand of `Sᵀ` / `dPᵀ` (N = the step's queries).
    q: OperandTile,
    /// Q and dO as the MN-major B operand of `dK += dSᵀ Q` / `dV += Pᵀ dO` (N = dK/dV columns).
    q_mn: OperandTile,
    /// dS, MN-major (queries contiguous; atoms along the keys first, so each 64-query half
    /// is one tile of its own): the A operand of `dQ = dS K`, 64 queries per wgmma.
    ds: OperandTile,
}

impl Tiles {
    fn new(k: &BackwardKernel) -> Result<Self, ConfigError> {
        let (d, n, dkv, sm) = (k.head_dim(), k.cta_n(), k.dkv(), k.step_m());
        let t = Tiles {
            kv: OperandTile::k_major("K", n, d, 64)?,
            k_mn: OperandTile::mn_major("K_MN", d, n, 64)?,
            q: OperandTile::k_major("Q", sm, d, sm)?,
            q_mn: OperandTile::mn_major("Q_MN", d, sm, dkv)?,
            ds: OperandTile::mn_major("DS", sm, n, DQ_CHUNK_ROWS)?,
        };
        // One set of bytes, two views: the MN-major views read exactly the bytes TMA wrote
        // for the K-major tiles.
        for (kmaj, mn, rows) in [(&t.kv, &t.k_mn, n), (&t.q, &t.q_mn, sm)] {
            for r in 0..rows {
                for c in 0..d {
                    if kmaj.swizzled_bytes(r, c)? != mn.swizzled_bytes(c, r)? {
                        return Err(ConfigError::Layout(format!(
                            "{} ({r}, {c}) is not {} ({c}, {r})",
                            kmaj.name, mn.name
                        )));
                    }
                }
            }
        }
        // Every column group's and dQ chunk's slice takes the same descriptor bits.
        for split in 0..k.d_split() {
            t.q_mn.check_start(t.q_mn.bytes(split * dkv, 0)?)?;
        }
        for c in 0..d / 64 {
            t.k_mn.check_start(t.k_mn.bytes(64 * c, 0)?)?;
        }
        for wg in 0..k.warpgroups() {
            t.kv.check_start(t.kv.bytes(64 * wg, 0)?)?;
        }
        // Each 64-query half of dS is the A operand of a dQ chunk.
        for half in 0..sm / DQ_CHUNK_ROWS {
            t.ds.check_start(t.ds.bytes(DQ_CHUNK_ROWS * half, 0)?)?;
        }
        Ok(t)
    }
}

/// The dQ postprocess stages value pairs `(2j, 2j + 1)` of a dQ chunk as one bf16x2 word at
/// word column `col / 2`: every pair must start on an even column, for every thread.
fn check_even_pairs(map: &FragmentMap) -> Result<(), ConfigError> {
    for thread in 0..128 {
        for value in (0..map.values()).step_by(2) {
            let (row, col) = map.coord(thread, value);
            if col % 2 != 0 {
                return Err(ConfigError::Layout(format!(
                    "dQ chunk: thread {thread} value {value} at ({row}, {col}) starts a pair on an odd column"
                )));
            }
        }
    }
    Ok(())
}

/// The dS store by `stmatrix.m8n8.x4`: the Sᵀ fragment's pairs are stmatrix matrices
/// ([`FragmentMap::check_stmatrix`]) and a matrix row (8 queries of one key) is 16
/// contiguous bytes of the dS tile (`q_bytes` 2, from a multiple of 8, which the 128-byte
/// swizzle keeps contiguous).
fn check_stmatrix(st: &FragmentMap, ds: &DsAffine) -> Result<(), ConfigError> {
    st.check_stmatrix()
        .map_err(|e| ConfigError::Layout(format!("dS store: {}", e.0)))?;
    if ds.q_bytes != 2 {
        return Err(ConfigError::Layout(format!(
            "dS store: {} bytes per query do not make 16-byte stmatrix rows",
            ds.q_bytes
        )));
    }
    Ok(())
}

/// The dS stores of a thread, `g = 0 .. values / 8`, as one offset, an XOR and the half's
/// offset: the kernel computes store 0's swizzled byte once and takes store `g` at
/// `(that ^ (x · (g mod per_half))) + ⌊g / per_half⌋ · half_bytes`, `per_half` being the
/// stores of one 64-query half of the step. Checked for every warpgroup, thread and store
/// against the affine formula and the swizzle; `x · g` stays below 1024, the dS buffers' and
/// halves' alignment, so the XOR commutes with adding their addresses. Returns
/// `(x, per_half)`.
fn ds_store_xor(
    st: &FragmentMap,
    ds: &DsAffine,
    warpgroups: u32,
) -> Result<(u32, u32), ConfigError> {
    let stores = st.values() / 8;
    let per_half = stores / (st.n() / DQ_CHUNK_ROWS);
    let byte = |wg: u32, lt: u32, g: u32| -> u32 {
        // The template's stmatrix row: register m = 4g + lane / 8 of thread sm_lt (the warp's
        // thread whose fragment row is lane % 8 at column 0), values 2m, 2m + 1.
        let sm_lt = (lt & !31) | (4 * (lt & 7));
        let m = 4 * g + (lt % 32) / 8;
        let (key, q) = st.coord(sm_lt, 2 * m);
        let linear = (q % DQ_CHUNK_ROWS) * ds.q_bytes + (64 * wg + key) * ds.key_bytes;
        (q / DQ_CHUNK_ROWS) * ds.half_bytes + (linear ^ (((linear >> 7) & 7) << 4))
    };
    let x = if per_half > 1 {
        byte(0, 0, 1) ^ byte(0, 0, 0)
    } else {
        0
    };
    for wg in 0..warpgroups {
        for lt in 0..128 {
            for g in 0..stores {
                let (half, gh) = (g / per_half, g % per_half);
                let want = byte(wg, lt, g);
                let got = (byte(wg, lt, 0) ^ (x * gh)) + half * ds.half_bytes;
                if want != got || x * gh >= 1024 {
                    return Err(ConfigError::Layout(format!(
                        "dS store {g} of warpgroup {wg} thread {lt} is at byte {want}, not {got} \
                         (store 0 XOR {x} * {gh}, below the 1024-byte buffer alignment, plus half \
                         {half})"
                    )));
                }
            }
        }
    }
    Ok((x, per_half))
}

/// The query-column pairs of a thread's Sᵀ values, where the kernel reads lse and Dsum 8 bytes
/// at a time: `cols[k]` is slot k's first column relative to the thread's first column
/// (even), `slot_of_value[i]` the slot holding value i's column. Checked for every thread:
/// value i's column is `first + cols[slot] + col % 2`, and the first column is even.
struct ColumnPairs {
    cols: Vec<u32>,
    slot_of_value: Vec<u32>,
}

fn column_pairs(st: &FragmentMap) -> Result<ColumnPairs, ConfigError> {
    let rel = |t: u32, i: u32| st.coord(t, i).1 - st.coord(t, 0).1;
    let mut cols: Vec<u32> = (0..st.values()).map(|i| rel(0, i) & !1).collect();
    cols.sort_unstable();
    cols.dedup();
    let slot_of_value: Vec<u32> = (0..st.values())
        .map(|i| {
            cols.iter()
                .position(|&c| c == rel(0, i) & !1)
                .map_or(0, |p| p as u32)
        })
        .collect();
    for t in 0..128 {
        let first = st.coord(t, 0).1;
        for i in 0..st.values() {
            let col = st.coord(t, i).1;
            let want = first + cols[slot_of_value[i as usize] as usize] + col % 2;
            if first % 2 != 0 || col != want {
                return Err(ConfigError::Layout(format!(
                    "lse/Dsum pairs: thread {t} value {i} is at column {col}, not {want} (first column {first})"
                )));
            }
        }
    }
    Ok(ColumnPairs {
        cols,
        slot_of_value,
    })
}

/// The pair mode's P exchange ([`BackwardKernel::with_pair`]): value `i` of consumer thread
/// `lt` (the m64n64 `Sᵀ` fragment, identical in both halves, so the writer's value `i` is the
/// reader's value `i`) at byte `16 (128 ⌊i / 4⌋ + lt) + 4 (i mod 4)`: four values per 16-byte
/// access, consecutive threads at consecutive 16 bytes. Checked one-to-one onto the
/// [`P_EXCHANGE_BYTES`] buffer with 16-byte aligned quads. Returns the emitted byte
/// expression of value `i` (a multiple of 4) of thread `lt`.
fn p_exchange(st: &FragmentMap) -> Result<String, ConfigError> {
    let byte = |lt: u32, i: u32| 16 * (128 * (i / 4) + lt) + 4 * (i % 4);
    let mut seen = vec![false; (P_EXCHANGE_BYTES / 4) as usize];
    for lt in 0..128 {
        if byte(lt, 0) % 16 != 0 {
            return Err(ConfigError::Layout(format!(
                "P exchange: thread {lt}'s first quad is not 16-byte aligned"
            )));
        }
        for i in 0..st.values() {
            let b = byte(lt, i);
            let slot = seen.get_mut((b / 4) as usize).ok_or_else(|| {
                ConfigError::Layout(format!(
                    "P exchange: thread {lt} value {i} at byte {b} is past {P_EXCHANGE_BYTES}"
                ))
            })?;
            if *slot || (i % 4 != 0 && b != byte(lt, i - i % 4) + 4 * (i % 4)) {
                return Err(ConfigError::Layout(format!(
                    "P exchange: thread {lt} value {i} at byte {b} overlaps or leaves its quad"
                )));
            }
            *slot = true;
        }
    }
    if seen.iter().any(|&s| !s) {
        return Err(ConfigError::Layout(
            "P exchange: the buffer is not covered".into(),
        ));
    }
    Ok("16u * (128u * (unsigned)(i / 4) + (unsigned)lt)".into())
}

/// The producer lane's copy of the step's lse and Dsum rows into the stage: `step_m / 32`
/// consecutive floats per lane, one vector load and one vector store each (`float2` at 64
/// queries, `float4` at 128: the rows are 16-byte aligned, padded to 128 queries).
fn lse_copy(step_m: u32) -> Result<String, ConfigError> {
    let (ty, regs) = match step_m / 32 {
        2 => ("float2", ["x", "y"].as_slice()),
        4 => ("float4", ["x", "y", "z", "w"].as_slice()),
        n => {
            return Err(ConfigError::Layout(format!(
                "lse/Dsum copy: {n} floats per producer lane"
            )))
        }
    };
    let n = regs.len();
    let operands: Vec<String> = (1..=n).map(|i| format!("%{i}")).collect();
    let rows = [
        ("l", "p.lse_log2", "smem_lse"),
        ("d", "p.dsum", "smem_dsum"),
    ];
    let mut s = String::new();
    // Both loads before the stores (each store's "memory" clobber orders it after them).
    for (var, src, _) in rows {
        let _ = writeln!(
            s,
            "                    const {ty} {var} = __ldg(reinterpret_cast<const {ty}*>({src} + row0) + lane);"
        );
    }
    for (var, _, dst) in rows {
        let args: Vec<String> = regs.iter().map(|r| format!("\"f\"({var}.{r})")).collect();
        let _ = writeln!(
            s,
            "                    asm volatile(\"st.shared.v{n}.f32 [%0], {{{ops}}};\" :: \"r\"({dst} + stage * FM_STEP_M * 4 + {b} * lane), {args} : \"memory\");",
            ops = operands.join(", "),
            b = 4 * n,
            args = args.join(", ")
        );
    }
    Ok(s)
}

/// `{a, b, ...}`: a C array initialiser.
fn brace_list(v: &[u32]) -> String {
    let items: Vec<String> = v.iter().map(u32::to_string).collect();
    format!("{{{}}}", items.join(", "))
}

pub(super) fn generate(k: &BackwardKernel) -> Result<String, ConfigError> {
    k.check_smem()?;
    k.check_step()?;
    k.check_dq_writer()?;
    k.check_group_slices()?;
    // Where the key tiles sit: the call's own keys, or a document's (family::schedule::key_tile).
    let grid = match k.mask() {
        BackwardMask::Documents => {
            if k.deterministic() {
                return Err(ConfigError::Layout(
                    "the documents grid has no deterministic dQ order (a query step straddling two \
                     documents is visited by the key tiles of both)"
                        .into(),
                ));
            }
            KeyGrid::Documents
        }
        BackwardMask::Window | BackwardMask::Blocks { .. } => KeyGrid::Global,
    };
    let place = if k.paired_keys() {
        KeyPlacement {
            cta_item: key_tile::PAIRED_ITEM,
            key_row0: "pair_key0",
            ..grid.placement()
        }
    } else {
        grid.placement()
    };
    let key_row0 = format!("{} + (int)row", place.key_row0);
    let d = k.head_dim();
    let dkv = k.dkv();
    // Sᵀ and dPᵀ: m64n{step_m} accumulators; a dQ chunk m64n64; dK and dV: m64n{dkv}.
    let sm = k.step_m();
    let st = FragmentMap::new(sm).map_err(|e| ConfigError::Layout(e.0))?;
    let dq_map = FragmentMap::new(DQ_CHUNK_ROWS).map_err(|e| ConfigError::Layout(e.0))?;
    let dkv_map = FragmentMap::new(dkv).map_err(|e| ConfigError::Layout(e.0))?;
    st.check_adjacent_pairs()?;
    dq_map.check_adjacent_pairs()?;
    dkv_map.check_adjacent_pairs()?;
    check_even_pairs(&dq_map)?;
    let tiles = Tiles::new(k)?;
    // Paired key blocks: key 64's offsets in the dQ GEMM's operands (unused otherwise).
    let key64 = if k.paired_keys() {
        paired_key64_offsets(&tiles)?
    } else {
        (0, 0)
    };
    let ds = ds_affine(&tiles.ds, sm, k.cta_n())?;
    check_stmatrix(&st, &ds)?;
    let (ds_g_xor, ds_g_per_half) = ds_store_xor(&st, &ds, k.warpgroups())?;
    let pairs = column_pairs(&st)?;
    if k.kv_registers() {
        // K/V rows as RS A fragments by ldmatrix (family/smem.rs, `LDMATRIX_A_OFFSET`).
        tiles
            .kv
            .check_ldmatrix_a(k.warpgroups())
            .map_err(layout_err)?;
    }
    // The epilogue stages dK and dV in each warpgroup's own K and V rows (family::epilogue).
    epilogue::check_tile(&tiles.kv, k.cta_n(), d, k.cta_n() * 128, "dK/dV").map_err(layout_err)?;
    let kv_staged = epilogue::emit(
        &dkv_map,
        &epilogue::Staging {
            tensors: &[
                epilogue::StagedTensor {
                    smem: "smem_k",
                    pack: "fm_act2(dk_acc[2 * mi] * p.scale, dk_acc[2 * mi + 1] * p.scale)",
                    dst: "p.dk",
                },
                epilogue::StagedTensor {
                    smem: "smem_v",
                    pack: "fm_act2(dv_acc[2 * mi], dv_acc[2 * mi + 1])",
                    dst: "p.dv",
                },
            ],
            pair_prelude: "",
            row0: "64 * wg",
            col0: "d0",
            cols: "FM_DKV",
            chunk_bytes: "FM_KV_CHUNK_BYTES",
            barrier_id: "5 + cw",
            global_row: &key_row0,
            row_limit: place.key_end,
            dst_offset: if k.strided_grads() {
                "kv_out0 + (long long)grow * p.dkv_stride_s + col"
            } else {
                "(kv_row0 + grow) * FM_D + col"
            },
        },
        "            ",
    )
    .map_err(|e| ConfigError::Layout(format!("dK/dV staging: {}", e.0)))?;
    let (mask_threads, mask_words, halves, sub) = match k.mask() {
        BackwardMask::Window | BackwardMask::Documents => (128 * k.warpgroups(), 1, 1, 1),
        BackwardMask::Blocks { block_m, block_n } => {
            let (threads, words) = check_mask_words(&st, block_m, block_n)?;
            // Paired key blocks: each warpgroup's own 64-key mask tile.
            let sub = if k.paired_keys() {
                1
            } else {
                block_n / k.cta_n()
            };
            (threads, words, block_m / sm, sub)
        }
    };
    let ty = k.dtype().mma_ptx_type();
    let act_to_f32 = k.dtype().bits16_to_f32_body();

    let mut src = String::with_capacity(64 * 1024);
    let _ = writeln!(
        src,
        "// fragmask attention backward, SM90 (sm_90a): TMA + wgmma + mbarrier, warp-specialised.\n\
         // Generated by fragmask-kernels (crates/kernels/src/attention/backward). Do not edit by hand.\n\
         // {label}.\n\
         // dV = P^T dO, dP = dO V^T, dS = P o (dP - Dsum), dQ = scale dS K, dK = scale dS^T Q (docs/backward.md).",
        label = k.label()
    );
    src.push_str(PRELUDE);
    let mut values: Vec<(&str, String)> = vec![
        ("D", d.to_string()),
        ("D_CHUNKS", (d / 64).to_string()),
        ("WARPGROUPS", k.warpgroups().to_string()),
        ("CTA_N", k.cta_n().to_string()),
        ("STEP_M", sm.to_string()),
        ("DQ_CHUNK_ROWS", DQ_CHUNK_ROWS.to_string()),
        ("LSE_COPY", lse_copy(sm)?),
        ("DQ_HALVES", (sm / DQ_CHUNK_ROWS).to_string()),
        ("DQ_ITEMS", (sm / DQ_CHUNK_ROWS * (dkv / 64)).to_string()),
        ("DKV", dkv.to_string()),
        ("DSPLIT", k.d_split().to_string()),
        ("PAIR", u32::from(k.pair()).to_string()),
        ("CWG", k.column_warpgroups().to_string()),
        (
            "CONSUMERS",
            (128 * k.warpgroups() * k.column_warpgroups()).to_string(),
        ),
        ("GRID_SPLIT", k.grid_split().to_string()),
        ("GROUP_SLICES", k.group_slices().to_string()),
        ("PAIRED_KEYS", u32::from(k.paired_keys()).to_string()),
        (
            "PAIRED_SKIP",
            if k.paired_keys() {
                [
                    PAIRED_SKIP_BEFORE_CHUNKS,
                    &dq_chunks(false, "                    "),
                    PAIRED_SKIP_AFTER_CHUNKS,
                ]
                .join("\n")
            } else {
                String::new()
            },
        ),
        // The step's dS barrier: with paired key blocks a warpgroup skipping the step reaches
        // it from PAIRED_SKIP while the other computes, so it is not the aligned form there.
        (
            "DS_SYNC",
            if k.paired_keys() {
                "fm_named_sync_divergent<FM_CONSUMERS>(1);   // every warpgroup's dS is in shared memory \
                 (reached from the own and the skipped steps' branches)"
            } else {
                "fm_named_sync<FM_CONSUMERS>(1);   // every warpgroup's dS is in shared memory"
            }
            .to_string(),
        ),
        ("DQ_CHUNK_GEMM", DQ_CHUNK_GEMM.to_string()),
        ("DQ_CHUNKS_AND_DK", dq_chunks(true, "                ")),
        ("DS_KEY64_OFFSET16", key64.0.to_string()),
        ("K_MN_KEY64_OFFSET16", key64.1.to_string()),
        (
            "GROUP_ADD",
            if k.group_slices() > 1 { GROUP_ADD } else { "" }.to_string(),
        ),
        (
            "POST_KV",
            if k.group_slices() > 1 { POST_KV } else { "" }.to_string(),
        ),
        (
            "PX_BYTES",
            if k.pair() { P_EXCHANGE_BYTES } else { 0 }.to_string(),
        ),
        (
            "PX_BYTE_EXPR",
            if k.pair() {
                p_exchange(&st)?
            } else {
                "0u /* no P exchange outside the pair mode */".into()
            },
        ),
        ("STAGES", k.stages().to_string()),
        ("SUB", sub.to_string()),
        ("HALVES", halves.to_string()),
        ("MASK_THREADS", mask_threads.to_string()),
        ("MASK_WORDS", mask_words.to_string()),
        ("DETERMINISTIC", u32::from(k.deterministic()).to_string()),
        ("KV_REGISTERS", u32::from(k.kv_registers()).to_string()),
        (
            "KV_WG_BYTES",
            crate::family::smem::WARPGROUP_ROWS_BYTES.to_string(),
        ),
        // K and V ride on the first step's Q/dO barriers only where that measured faster: the window and
        // documents walks at head dims 128 and 256 (docs/backward.md, "Causal and window rows").
        (
            "KV_OWN_BARRIER",
            u32::from(k.kv_registers() || matches!(k.mask(), BackwardMask::Blocks { .. }))
                .to_string(),
        ),
        // The stage release at a constant address per stage (FM_RELEASE_STAGE) where it measured faster:
        // head dim 128, 128 keys per CTA, one GQA slice, the window walk or mask tiles (unpaired);
        // A/B and the rows it slowed in docs/backward.md, "The stage release".
        (
            "RELEASE_PER_STAGE",
            u32::from(
                k.head_dim() == 128
                    && k.cta_n() == 128
                    && k.group_slices() == 1
                    && !k.paired_keys()
                    && k.mask() != BackwardMask::Documents,
            )
            .to_string(),
        ),
        // Column-pair loads of lse and Dsum pay off where K and V sit in registers (head dim 64):
        // A/B on the H100, docs/backward.md.
        ("LSE_PAIRS", u32::from(k.kv_registers()).to_string()),
        ("KV_FRAG_REGS", (d / 4).to_string()),
        (
            "Q_CHUNK_BYTES",
            tiles.q.bytes(0, 64).map_or(0, |b| b).to_string(),
        ),
        ("KV_CHUNK_BYTES", (k.cta_n() * 128).to_string()),
        ("Q_TILE_BYTES", tiles.q.tile_bytes().to_string()),
        ("KV_TILE_BYTES", tiles.kv.tile_bytes().to_string()),
        ("DS_BYTES", tiles.ds.tile_bytes().to_string()),
        ("PARAMS_STRUCT", BackwardParams::ABI.cuda()),
        ("PTX_HELPERS", ptx::TMA_WGMMA.to_string()),
        ("MATH", ptx::MATH.to_string()),
        ("GRID_DEPENDENCY", ptx::GRID_DEPENDENCY.to_string()),
        ("TENSOR_MAP", ptx::TENSOR_MAP.to_string()),
        ("NEG_INF", ptx::NEG_INF.to_string()),
        ("GLOBAL_REDUCE", ptx::GLOBAL_REDUCE.to_string()),
        (
            "P_RECOMPUTE",
            softmax::probability("s_acc[i]", "p.scale_log2", "lse"),
        ),
        ("NAMED_BARRIERS", ptx::NAMED_BARRIERS.to_string()),
        ("STMATRIX_SW128", ptx::STMATRIX_SW128.to_string()),
        ("LDS128", ptx::LDS128.to_string()),
        ("LDS64", ptx::LDS64.to_string()),
        (
            "LDMATRIX_X4",
            [ptx::LDMATRIX_X4, crate::family::smem::LDMATRIX_A_OFFSET].concat(),
        ),
        ("ACT2", ptx::act2(ty)),
        ("ACT", ty.to_string()),
        ("ACT_TO_F32", act_to_f32.to_string()),
        ("ROWS_PER_BLOCK", ROWS_PER_BLOCK.to_string()),
        ("PRE_KERNEL", PRE_KERNEL_NAME.to_string()),
        ("POST_KERNEL", POST_KERNEL_NAME.to_string()),
        ("KERNEL", KERNEL_NAME.to_string()),
        ("THREADS", k.threads().to_string()),
        ("PRODUCER_REGS", k.producer_regs().to_string()),
        ("CONSUMER_REGS", k.consumer_regs().to_string()),
        ("GEMMS", gemms(k, &tiles, ty)?),
        ("ST_VALUES", st.values().to_string()),
        ("DQ_VALUES", dq_map.values().to_string()),
        ("A_REGS", (st.values() / 2).to_string()),
        ("DKV_VALUES", dkv_map.values().to_string()),
        (
            "LAYOUT_ST",
            format!("CLayout_64x{} = {}", st.n(), st.layout_text()),
        ),
        (
            "LAYOUT_DKV",
            format!("CLayout_64x{} = {}", dkv_map.n(), dkv_map.layout_text()),
        ),
        (
            "LAYOUT_DQ",
            format!("CLayout_64x{} = {}", dq_map.n(), dq_map.layout_text()),
        ),
        ("THREAD_ROW_ST", st.thread_row_expr("lt")),
        ("THREAD_COL_ST", st.thread_col_expr("lt")),
        ("THREAD_ROW_DKV", dkv_map.thread_row_expr("lt")),
        ("THREAD_COL_DKV", dkv_map.thread_col_expr("lt")),
        ("THREAD_ROW_DQ", dq_map.thread_row_expr("lt")),
        ("THREAD_COL_DQ", dq_map.thread_col_expr("lt")),
        ("VALUE_ROW_ST_2M", st.value_row_expr("(2 * sm_m)")),
        ("VALUE_COL_ST_2M", st.value_col_expr("(2 * sm_m)")),
        ("THREAD_ROW_ST_SM", st.thread_row_expr("sm_lt")),
        ("THREAD_COL_ST_SM", st.thread_col_expr("sm_lt")),
        ("X4_STORES", (st.values() / 8).to_string()),
        ("VALUE_COL_ST", st.value_col_expr("i")),
        ("VALUE_COL_ST_J", st.value_col_expr("j")),
        ("VALUE_ROW_DKV", dkv_map.value_row_expr("i")),
        ("VALUE_COL_DKV", dkv_map.value_col_expr("i")),
        ("KV_STAGED", kv_staged),
        ("KV_WG_STRIDE", tiles.kv.bytes(64, 0)?.to_string()),
        (
            "DKV_OFFSET16_EXPR",
            format!(
                "(unsigned long long)split * {}ull",
                if k.d_split() > 1 {
                    tiles.q_mn.offset16(dkv, 0)?
                } else {
                    0
                }
            ),
        ),
        ("DS_LAYOUT_DOC", ds.doc),
        ("DS_Q_BYTES", ds.q_bytes.to_string()),
        ("DS_KEY_BYTES", ds.key_bytes.to_string()),
        ("DS_G_XOR", ds_g_xor.to_string()),
        ("DS_G_PER_HALF", ds_g_per_half.to_string()),
        ("DS_HALF_BYTES", ds.half_bytes.to_string()),
        ("ST_PAIRS", pairs.cols.len().to_string()),
        ("ST_PAIR_SLOTS", brace_list(&pairs.slot_of_value)),
        ("ST_PAIR_COLS", brace_list(&pairs.cols)),
    ];
    values.extend(dq_pieces(k, &dq_map));
    values.push((
        "DKV_PAIRS_CAST",
        dkv_pairs(
            if k.strided_grads() {
                DKV_OUT_OFFSET
            } else {
                DKV_ACCUM_OFFSET
            },
            "DKV_STORE_CAST",
        ),
    ));
    values.extend(grad_addresses(k.strided_grads(), k.group_slices() > 1));
    values.push(("DKV_STORE_CAST", DKV_STORE_CAST.to_string()));
    if k.group_slices() > 1 {
        values.push(("POST_KV_KERNEL", POST_KV_KERNEL_NAME.to_string()));
        values.push((
            "DKV_PAIRS_ADD",
            dkv_pairs(DKV_ACCUM_OFFSET, "DKV_STORE_ADD"),
        ));
        values.push(("DKV_STORE_ADD", DKV_STORE_ADD.to_string()));
    }
    // The window walk on the whole sequence, and the tile lists in the deterministic mode, read
    // their CTA's place off the launch order's sections; the other lists (their own dispatch
    // order) and the documents grid take the grid's (docs/backward.md, "Deterministic mode").
    let sections = match k.mask() {
        BackwardMask::Window => true,
        BackwardMask::Blocks { .. } => k.deterministic(),
        BackwardMask::Documents => false,
    };
    // Dense lists keep the grid's order (the host gives them one plane per section; those
    // built on the GPU are found dense when the kernel runs).
    let section = match (k.mask(), k.list_entries()) {
        (BackwardMask::Blocks { .. }, ListEntries::DenseAtRunTime) => {
            "fm_lists_dense_at_run_time(p) ? 1 : p.head_section"
        }
        _ => "p.head_section",
    };
    let (cta_order, cta_place, cta_place_doc) = match sections {
        true => (
            [
                crate::family::schedule::SECTION_TILE,
                key_tile::SECTION_ORDER,
            ]
            .concat(),
            format!("fm_backward_cta(p, {section})"),
            "the launch order's sections of p.head_section planes (fm_backward_cta)",
        ),
        false => (
            String::new(),
            "make_uint3(blockIdx.x, blockIdx.y, blockIdx.z)".to_string(),
            "the grid's",
        ),
    };
    values.push(("CTA_ORDER", cta_order));
    values.push(("CTA_PLACE", cta_place));
    values.push(("CTA_PLACE_DOC", cta_place_doc.to_string()));
    values.push(("CTA_ITEM", place.cta_item.to_string()));
    values.push(("CTA_BLOCK", place.cta_block.to_string()));
    values.push(("SCHEDULE_ITEM", place.schedule_item.to_string()));
    values.push(("KEY_ROW0", place.key_row0.to_string()));
    values.push(("KEY_END", place.key_end.to_string()));
    match k.mask() {
        BackwardMask::Window | BackwardMask::Documents => {
            values.extend(grid.values());
            values.extend(grid.mask_values());
            values.push(("VALUE_ROW_SLOT_ST", st.value_row_slot_expr("i")));
            values.push(("ROW_SLOT_STRIDE", st.row_slot_stride()?.to_string()));
            values.push(("SCHEDULE", key_tile::WINDOW.to_string()));
            values.push(("MASK_APPLY", mask::KEY_TILE_WINDOW.to_string()));
            values.push(("WINDOW_INFINITE", WINDOW_INFINITE.to_string()));
            values.push((
                "LOAD_WORD",
                "const unsigned word = 0xffffffffu;   // window mode reads no words".to_string(),
            ));
            values.push(("KEY_KEEP", String::new()));
        }
        BackwardMask::Blocks { .. } => {
            values.push((
                "KEY_BOUND_CLEAR",
                mask::key_bound_clear(&st, "    ").map_err(layout_err)?,
            ));
            values.push((
                "SCHEDULE",
                if k.paired_keys() {
                    key_tile::PAIRED_LISTS.to_string()
                } else if k.list_entries() == ListEntries::DenseAtRunTime {
                    [LISTS_DENSE_AT_RUN_TIME, key_tile::LISTS].concat()
                } else {
                    key_tile::LISTS.to_string()
                },
            ));
            values.push(("MASK_APPLY", mask::KEY_TILE_WORDS.to_string()));
            if !k.paired_keys() {
                values.extend(key_tile::list_values(k.list_entries(), k.deterministic()));
            }
            values.extend(mask::key_tile_word_values(st.values()).map_err(layout_err)?);
            values.push((
                "KEY_KEEP",
                "const $MASK_WORD_T key_keep = fm_key_keep(p, sched, key_row);   // this thread's keys below seqlen_k"
                    .to_string(),
            ));
            // A 64-query step reads one word of the thread's words, a 128-query step two.
            values.push((
                "LOAD_WORD",
                if st.values() <= 32 {
                    "// One load per thread per partial step: word t.word of this thread's FragmentNative words\n\
                     \x20               // ([tiles, FM_MASK_THREADS, FM_MASK_WORDS], masks::TransposedLists::q_words).\n\
                     \x20               // Keys past seqlen_k cleared (key_keep, once per walk).\n\
                     \x20               const unsigned word = (t.mask_tile >= 0\n\
                     \x20                   ? __ldg(p.q_words + ((long long)t.mask_tile * FM_MASK_THREADS + mask_thread) * FM_MASK_WORDS + t.word)\n\
                     \x20                   : 0xffffffffu) & key_keep;"
                } else {
                    "// Two loads per thread per partial step: words 2 t.word, 2 t.word + 1 of this thread's FragmentNative\n\
                     \x20               // words ([tiles, FM_MASK_THREADS, FM_MASK_WORDS], masks::TransposedLists::q_words).\n\
                     \x20               // Keys past seqlen_k cleared (key_keep, once per walk).\n\
                     \x20               uint2 word = key_keep;\n\
                     \x20               if (t.mask_tile >= 0) {\n\
                     \x20                   const unsigned* w = p.q_words + ((long long)t.mask_tile * FM_MASK_THREADS + mask_thread) * FM_MASK_WORDS + 2 * t.word;\n\
                     \x20                   word.x &= __ldg(w);\n\
                     \x20                   word.y &= __ldg(w + 1);\n\
                     \x20               }"
                }
                .to_string(),
            ));
        }
    }
    let body = fill(TEMPLATE, &values).map_err(layout_err)?;
    src.push_str(&body);
    Ok(src)
}

/// The warpgroup's dQ chunks of a step, items `wg + FM_WG * u` of its `FM_DQ_ITEMS` (column
/// chunk `item % (FM_DKV / 64)` of query half `item / (FM_DKV / 64)`), each issued, waited and
/// staged in turn, the lines indented by `indent`. With `and_dk` (the computing step), the
/// warpgroup's `dK += dSᵀ Q` is issued behind its first chunk, or alone where it has none, so
/// the chunk's store runs under the dK GEMM (wgmma groups complete in order: `wait<1>` leaves
/// only dK in flight; FlashAttention-4's `flash_bwd_sm90` order). Without (a paired-key step
/// whose block sees no query), each chunk is waited whole.
fn dq_chunks(and_dk: bool, indent: &str) -> String {
    const DK: &str = "fm_kv_grad(dk_acc, ds_a, desc_q_mn + q_off16);   // dK += dS^T Q";
    let mut lines = Vec::new();
    if and_dk {
        lines.extend([
            "// dK += dS^T Q is issued behind this warpgroup's first dQ chunk, so the chunk's store runs".to_string(),
            "// under the dK GEMM (wgmma groups complete in order: wait<1> leaves only dK in flight;".to_string(),
            "// FlashAttention-4's flash_bwd_sm90 order).".to_string(),
            "// Chunks item = wg + FM_WG * u of the step's FM_DQ_ITEMS: column chunk c = item % (FM_DKV / 64) of".to_string(),
            "// query half qh = item / (FM_DKV / 64).".to_string(),
        ]);
    }
    lines.push("#pragma unroll 1".to_string());
    lines.push("for (int u = 0; u < (FM_DQ_ITEMS + FM_WG - 1) / FM_WG; ++u) {".to_string());
    lines.push("    const int item = wg + FM_WG * u;".to_string());
    if and_dk {
        lines.extend([
            "    if (item >= FM_DQ_ITEMS) {".to_string(),
            format!("        if (u == 0) {DK} (no dQ chunk here)"),
            "        break;".to_string(),
            "    }".to_string(),
        ]);
    } else {
        lines.push("    if (item >= FM_DQ_ITEMS) break;".to_string());
    }
    lines.push("$DQ_CHUNK_GEMM".to_string());
    if and_dk {
        lines.extend([
            "    if (u == 0) {".to_string(),
            format!("        {DK}"),
            "        fm_wgmma_wait<1>();".to_string(),
            "    } else {".to_string(),
            "        fm_wgmma_wait<0>();".to_string(),
            "    }".to_string(),
        ]);
    } else {
        lines.push("    fm_wgmma_wait<0>();".to_string());
    }
    lines.push("    fm_fence_array(dq_acc);".to_string());
    lines.push("$DQ_STORE".to_string());
    lines.push("}".to_string());
    lines
        .iter()
        .map(|l| {
            if l.starts_with('$') || l.starts_with('#') {
                l.clone()
            } else {
                format!("{indent}{l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One dQ chunk of the step (`item` of the warpgroup's): its column chunk `c`, query half
/// `qh` and first column, and the GEMM `dS(half qh) K(:, col0..)` into `dq_acc`, issued
/// (the caller waits).
const DQ_CHUNK_GEMM: &str = "                    // (one half: qh is 0 at compile time, and c the item)
                    const int c = FM_DQ_HALVES == 1 ? item : item % (FM_DKV / 64);
                    const int qh = FM_DQ_HALVES == 1 ? 0 : item / (FM_DKV / 64);
                    const int col0 = d0 + 64 * c;   // dQ columns col0 .. col0+63 of queries FM_DQ_ROWS * qh ..
                    float dq_acc[$DQ_VALUES];
                    // dQ chunk = dS(half qh) K(:, col0..)
                    const unsigned long long dq_a = desc_ds + ds_buf * (FM_DS_BYTES / 16) + (unsigned)qh * (FM_DS_HALF_BYTES / 16);
                    const unsigned long long dq_b = desc_k_mn + (unsigned)(col0 / 64) * (FM_KV_CHUNK_BYTES / 16);
#if FM_PAIRED_KEYS
                    // A step one warpgroup's block sees: the sum over its 64 keys (the other's dS rows are not written).
                    if (t.key_half >= 0)
                        fm_dq_keys64(dq_acc, dq_a + (unsigned)t.key_half * $DS_KEY64_OFFSET16u, dq_b + (unsigned)t.key_half * $K_MN_KEY64_OFFSET16u);
                    else
#endif
                        fm_dq(dq_acc, dq_a, dq_b);";

/// The step of a paired-key warpgroup whose block does not see the step's queries
/// (`BackwardKernel::with_paired_keys`): the consumers' dS barrier, its dQ chunks over the
/// other warpgroup's 64 keys (`dq_chunks` without dK: no wgmma outlives the branch), the
/// stage released.
const PAIRED_SKIP_BEFORE_CHUNKS: &str = r#"#if FM_DET_CONSUMERS
                    // The consumers' dQ turn, as the computing branch takes it: the step before's turn passed on
                    // (the other warpgroup meets this barrier from its GEMMs), then this step's rank and wait.
                    FM_DET_PASS_AND_READ();
                    FM_DET_WAIT_TURN();
#endif
                    $DQ_BEFORE_SYNC
                    $DS_SYNC
                    $DQ_ROWS"#;
const PAIRED_SKIP_AFTER_CHUNKS: &str = r#"                    FM_RELEASE_STAGE(stage);
#if FM_DET_CONSUMERS
                    det_prev = sem_index;
#endif"#;

/// The group slices' epilogue ([`BackwardKernel::with_group_slices`]), consumer threads:
/// this CTA's `dK · scale` and `dV` (its slice of the group's query heads) added into the
/// f32 accumulators `[B, Hkv, Sk, D]` from the registers (row-major, `red.global.add.v2.f32`),
/// which the kv postprocess ([`POST_KV`]) casts. (Staging both in shared memory for two TMA
/// bulk reductions ran the same: 64:8 causal 1.004, one H200, 2 rounds;
/// `session-2026-11-27r/gs-atomics/`.)
const GROUP_ADD: &str = r#"        // ---- epilogue (group slices): dK * scale and dV added into the f32 accumulators [B, Hkv, Sk, D], keys < $KEY_END ----
        const long long kv_row0 = ((long long)batch * p.kv_heads + kv_head) * p.seqlen_k;
$DKV_PAIRS_ADD"#;

/// The element offset of dK/dV's `(key, col)` in the outputs, in the caller's layout
/// (`dkv_stride_*`; `kv_out0` is the (batch, KV head)'s first element).
const DKV_OUT_OFFSET: &str = "kv_out0 + (long long)key * p.dkv_stride_s + col";

/// The element offset of `(key, col)` in contiguous `[B, Hkv, Sk, D]`: the group slices'
/// f32 accumulators, and dK and dV without [`BackwardKernel::with_strided_grads`]
/// (`kv_row0`: the (batch, KV head)'s first row).
const DKV_ACCUM_OFFSET: &str = "(kv_row0 + key) * FM_D + col";

/// Where the gradients' rows start, contiguous or through their strides
/// ([`BackwardKernel::with_strided_grads`]): `$DKV_BASE` (the epilogue's first element of the
/// (batch, KV head)), `$DKV_POST_OUT` (the kv postprocess's row, with `post_kv`: the group
/// slices), `$DQ_ROW_AT` (the dQ postprocesses' row; `bh` is `batch * H + head`).
fn grad_addresses(strided: bool, post_kv: bool) -> Vec<(&'static str, String)> {
    let (note, base, post, dq) = if strided {
        (
            ", in the caller's layout (dkv_stride_*)",
            "const long long kv_out0 = batch * p.dkv_stride_b + kv_head * p.dkv_stride_h;",
            "const long long out = batch * p.dkv_stride_b + kv_head * p.dkv_stride_h + row * p.dkv_stride_s;   // the caller's layout",
            "batch * p.dq_stride_b + head * p.dq_stride_h + row * p.dq_stride_s",
        )
    } else {
        (
            "",
            "const long long kv_row0 = ((long long)batch * p.kv_heads + kv_head) * p.seqlen_k;",
            "const long long out = off;   // contiguous, as the accumulators",
            "(bh * p.seqlen_q + row) * FM_D",
        )
    };
    let mut values = vec![
        ("DKV_NOTE", note.to_string()),
        ("DKV_BASE", base.to_string()),
        ("DQ_ROW_AT", dq.to_string()),
    ];
    if post_kv {
        values.push(("DKV_POST_OUT", post.to_string()));
    }
    values
}

/// The dK/dV epilogue's walk over a thread's value pairs from the registers: the key and
/// column of pair `i` ($LAYOUT_DKV), then, for the keys below the bound, the placeholder
/// `store` (`off`: the pair's element offset, `offset`): [`DKV_STORE_CAST`] to the outputs
/// ([`DKV_OUT_OFFSET`]), or the group slices' [`DKV_STORE_ADD`] into the f32 accumulators
/// ([`DKV_ACCUM_OFFSET`]).
fn dkv_pairs(offset: &str, store: &str) -> String {
    format!(
        r#"#pragma unroll
            for (int i = 0; i < $DKV_VALUES; i += 2) {{
                // $LAYOUT_DKV value mode: values i, i+1 are adjacent columns of one row (checked by the generator)
                const int key = $KEY_ROW0 + 64 * wg + kv_row + $VALUE_ROW_DKV;
                const int col = d0 + kv_col + $VALUE_COL_DKV;
                if (key < $KEY_END) {{
                    const long long off = {offset};
${store}
                }}
            }}"#
    )
}

/// [`dkv_pairs`]' store of the outputs: `dK · scale` and `dV` cast to the element type.
const DKV_STORE_CAST: &str = "                    *reinterpret_cast<unsigned*>(p.dk + off) = fm_act2(dk_acc[i] * p.scale, dk_acc[i + 1] * p.scale);
                    *reinterpret_cast<unsigned*>(p.dv + off) = fm_act2(dv_acc[i], dv_acc[i + 1]);";

/// [`dkv_pairs`]' store of the group slices: `dK · scale` and `dV` added into the f32
/// accumulators.
const DKV_STORE_ADD: &str = "                    fm_red_add2(p.dk_accum + off, dk_acc[i] * p.scale, dk_acc[i + 1] * p.scale);
                    fm_red_add2(p.dv_accum + off, dv_acc[i], dv_acc[i + 1]);";

/// The kv postprocess of the group slices ([`BackwardKernel::with_group_slices`]): dK and
/// dV cast from their f32 accumulators, one warp per key row.
const POST_KV: &str = r#"// ---------------- kv postprocess (group slices): dK, dV cast from the f32 accumulators [B, Hkv, Sk, D] ----------------
extern "C" __global__ void __launch_bounds__(32 * $ROWS_PER_BLOCK)
$POST_KV_KERNEL(const __grid_constant__ fm_bwd_params p)
{
    fm_wait_prior_grids();   // the main kernel's dK/dV reductions
    const int row = (int)(blockIdx.x * $ROWS_PER_BLOCK + threadIdx.x / 32u);
    const int lane = (int)(threadIdx.x % 32u);
    const int kv_head = (int)blockIdx.y, batch = (int)blockIdx.z;
    if (row >= p.seqlen_k) return;
    const long long off = (((long long)batch * p.kv_heads + kv_head) * p.seqlen_k + row) * FM_D;
    $DKV_POST_OUT
    const float2* dk = reinterpret_cast<const float2*>(p.dk_accum + off);
    const float2* dv = reinterpret_cast<const float2*>(p.dv_accum + off);
    for (int c = lane; c < FM_D / 2; c += 32) {
        const float2 k = dk[c], v = dv[c];
        reinterpret_cast<unsigned*>(p.dk + out)[c] = fm_act2(k.x, k.y);
        reinterpret_cast<unsigned*>(p.dv + out)[c] = fm_act2(v.x, v.y);
    }
}
"#;

/// The dS tile's byte of `(query, key)`, checked affine before the swizzle
/// (`q_bytes * q + key_bytes * key`) and checked against the layout's swizzle for every
/// element, so the kernel can store through `fm_sw128`.
struct DsAffine {
    q_bytes: u32,
    key_bytes: u32,
    /// Bytes of one 64-query half (its offset in the tile; a multiple of 1024).
    half_bytes: u32,
    doc: String,
}

fn ds_affine(ds: &OperandTile, step_m: u32, cta_n: u32) -> Result<DsAffine, ConfigError> {
    let q_bytes = ds.bytes(1, 0)?;
    let key_bytes = ds.bytes(0, 1)?;
    let half_bytes = DQ_CHUNK_ROWS * cta_n * 2;
    for q in 0..step_m {
        for key in 0..cta_n {
            let linear = (q % DQ_CHUNK_ROWS) * q_bytes + key * key_bytes;
            let half = (q / DQ_CHUNK_ROWS) * half_bytes;
            let sw = half + (linear ^ (((linear >> 7) & 7) << 4));
            if ds.bytes(q, key)? != half + linear || ds.swizzled_bytes(q, key)? != sw {
                return Err(ConfigError::Layout(format!(
                    "dS ({q}, {key}) is not at the affine swizzled byte {sw}"
                )));
            }
        }
    }
    Ok(DsAffine {
        q_bytes,
        key_bytes,
        half_bytes,
        doc: format!(
            "gmma-frag SmemAtom<MN, SW128> tile_k_first({step_m}, {cta_n}): (q, key) at byte \
             {half_bytes} (q / 64) + sw128({q_bytes} (q % 64) + {key_bytes} key)"
        ),
    })
}

/// The mask's backward accumulator (SwapAB, `block_n / 64` warpgroups) against the
/// kernel's steps: for key group `g` of the tile, query part `h` (a step's worth of the
/// tile's queries), thread `t` and value `i` of the `m64n{step}` `Sᵀ`, the tile element is
/// that of the mask accumulator's thread `128 g + t`, value `values · h + i`, i.e. bit
/// `i % 32` of word `(values · h + i) / 32`. Returns the mask's threads and words per
/// thread.
fn check_mask_words(
    st: &FragmentMap,
    block_m: u32,
    block_n: u32,
) -> Result<(u32, u32), ConfigError> {
    let warpgroups = if block_n % 128 == 0 { 2 } else { 1 };
    let acc = TiledAccumulator::new(block_m, block_n, warpgroups, true)
        .map_err(|e| ConfigError::Layout(format!("backward accumulator: {e:?}")))?;
    let (groups, parts, values) = (block_n / 64, block_m / st.n(), st.values());
    if acc.threads() != 128 * groups
        || acc.values_per_thread() != values * parts
        || values % 32 != 0
    {
        return Err(ConfigError::Layout(format!(
            "the {block_m}x{block_n} backward accumulator has {} threads x {} values, not one \
             64-key group per warpgroup and whole words per {}-query step",
            acc.threads(),
            acc.values_per_thread(),
            st.n()
        )));
    }
    for g in 0..groups {
        for h in 0..parts {
            for t in 0..128 {
                for i in 0..values {
                    let (key, q) = st.coord(t, i);
                    let found = acc
                        .coord(128 * g + t, values * h + i)
                        .map_err(|e| ConfigError::Layout(format!("{e:?}")))?;
                    if found != (st.n() * h + q, 64 * g + key) {
                        return Err(ConfigError::Layout(format!(
                            "mask thread {} value {} is {found:?}, the step's value is ({}, {})",
                            128 * g + t,
                            values * h + i,
                            st.n() * h + q,
                            64 * g + key
                        )));
                    }
                }
            }
        }
    }
    Ok((acc.threads(), acc.values_per_thread() / 32))
}

/// The five GEMMs, one wgmma per k-step written out with its operand bytes.
fn gemms(k: &BackwardKernel, t: &Tiles, ty: &str) -> Result<String, ConfigError> {
    let (d, dkv, n, sm) = (k.head_dim(), k.dkv(), k.cta_n(), k.step_m());
    let mut s = String::from(
        "// ---- the GEMMs; shared-memory operands from gmma-frag (family/smem.rs) ----\n",
    );
    for tile in [&t.kv, &t.k_mn, &t.q, &t.q_mn, &t.ds] {
        s.push_str(&tile.declare_descriptor());
    }
    s.push_str(&wgmma_ss_trans(sm, ty, false, false));
    s.push_str(&wgmma_ss_trans(DQ_CHUNK_ROWS, ty, true, true));
    s.push_str(&wgmma_rs(dkv, ty));
    if k.kv_registers() {
        s.push_str(&wgmma_rs_k_major(sm, ty));
        let _ = writeln!(
            s,
            "// S^T = K Q^T and dP^T = V dO^T with K / V from registers (RS mode; k-step j = a[4j..4j+3], the\n\
             // ldmatrix fragments checked by the generator): B = 64 queries, K-major, k-step j at byte B(0, 16j).\n\
             __device__ __forceinline__ void fm_keys_queries_rs(float (&acc)[{v}], const unsigned (&a)[{r}], unsigned long long b_desc) {{\n\
             \x20   fm_fence_array(acc);\n\
             \x20   fm_wgmma_fence();",
            v = sm / 2,
            r = d / 4
        );
        for j in 0..d / 16 {
            let (bb, b16) = (t.q.k_step_bytes(j)?, t.q.k_step_offset16(j)?);
            let _ = writeln!(
                s,
                "    fm_wgmma_m64n{sm}k16_rs_kb(acc, {a}, b_desc + {b16}ull, {sc});   // k-step {j}: B(0, {c}) = byte {bb}",
                a = ptx::rs_a_registers("a", j),
                sc = u32::from(j > 0),
                c = 16 * j
            );
        }
        s.push_str("    fm_wgmma_commit();\n    fm_fence_array(acc);\n}\n");
    }
    let ss = wgmma_ss_name(sm, false, false);
    // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: A = 64 keys (K-major), B = the step's queries (K-major), K = D.
    // One function for both: V and dO are tiles of K's and Q's layouts.
    {
        let _ = writeln!(
            s,
            "// S^T = K Q^T and dP^T = V dO^T (V, dO: the layouts of K, Q): A = 64 keys, B = {sm} queries, both\n\
             // K-major, K = D; k-step j reads A(.., 16j..) and B(.., 16j..) at bytes A(0, 16j), B(0, 16j).\n\
             // a_desc, b_desc: the descriptors of A(0, 0) and B(0, 0) (fm_desc, FM_DESC_K and FM_DESC_Q bits).\n\
             __device__ __forceinline__ void fm_keys_queries_t(float (&acc)[{v}], unsigned long long a_desc, unsigned long long b_desc) {{\n\
             \x20   fm_fence_array(acc);\n\
             \x20   fm_wgmma_fence();",
            v = sm / 2
        );
        for j in 0..d / 16 {
            let (ab, bb) = (t.kv.k_step_bytes(j)?, t.q.k_step_bytes(j)?);
            let (a16, b16) = (t.kv.k_step_offset16(j)?, t.q.k_step_offset16(j)?);
            let _ = writeln!(
                s,
                "    {ss}(acc, a_desc + {a16}ull, b_desc + {b16}ull, {sc});   // k-step {j}: A(0, {c}) = byte {ab}, B(0, {c}) = byte {bb}",
                sc = u32::from(j > 0),
                c = 16 * j
            );
        }
        s.push_str("    fm_wgmma_commit();\n    fm_fence_array(acc);\n}\n");
    }
    // dV += Pᵀ dO and dK += dSᵀ Q: A from registers (k-block j = queries 16j.. = values 8j..8j+7), B MN-major.
    // One function for both: dO is a tile of Q's layout.
    {
        let _ = writeln!(
            s,
            "// dV += P^T dO and dK += dS^T Q: A from registers (k-block j = queries 16j..16j+15 = values 8j..8j+7\n\
             // of the m64n{sm} accumulator, docs/architecture.md fact 5); B (dO or Q) MN-major, k-block j at byte B(0, 16j).\n\
             // b_desc: the descriptor of B(0, 0) (fm_desc, FM_DESC_Q_MN bits).\n\
             __device__ __forceinline__ void fm_kv_grad(float (&acc)[{v}], const unsigned (&a)[{r}], unsigned long long b_desc) {{\n\
             \x20   fm_fence_array(acc);\n\
             \x20   fm_wgmma_fence();",
            v = dkv / 2,
            r = sm / 4
        );
        for j in 0..sm / 16 {
            let (bb, b16) = (t.q_mn.k_step_bytes(j)?, t.q_mn.k_step_offset16(j)?);
            let _ = writeln!(
                s,
                "    fm_wgmma_m64n{dkv}k16_rs(acc, {a}, b_desc + {b16}ull);   // k-block {j}: B(0, {c}) = byte {bb}",
                a = ptx::rs_a_registers("a", j),
                c = 16 * j
            );
        }
        s.push_str("    fm_wgmma_commit();\n}\n");
    }
    // dQ chunk = dS K(:, chunk): A = dS MN-major (64 queries x CTA keys), B = K MN-major, K = the CTA's keys.
    s.push_str(&dq_gemm(
        t,
        "fm_dq",
        n,
        "// dQ(:, 64-column chunk) = dS K(:, chunk): A = dS (MN-major, queries contiguous), B = K (MN-major,\n\
         // D contiguous); k-step j = keys 16j..16j+15 at bytes dS(0, 16j) and K_MN(0, 16j).\n\
         // a_desc, b_desc: the descriptors of the query half's dS(0, 0) and K_MN(0, 0) (fm_desc, FM_DESC_DS and FM_DESC_K_MN bits).",
    )?);
    if k.paired_keys() {
        // Paired key blocks: the same GEMM over 64 keys; the caller adds $DS_KEY64_OFFSET16 /
        // $K_MN_KEY64_OFFSET16 for keys 64.. (paired_key64_offsets checks them).
        s.push_str(&dq_gemm(
            t,
            "fm_dq_keys64",
            64,
            "// dQ(:, chunk) over 64 of the keys: k-steps 0..3 of fm_dq from the descriptors of dS(0, k0) and K_MN(0, k0).",
        )?);
    }
    Ok(s)
}

/// The dQ chunk's GEMM `name` over `keys` keys (k-steps `0..keys / 16` of the dS and K_MN
/// operands from the caller's descriptors), after its `doc` comment.
fn dq_gemm(t: &Tiles, name: &str, keys: u32, doc: &str) -> Result<String, ConfigError> {
    let ta = wgmma_ss_name(DQ_CHUNK_ROWS, true, true);
    let mut s = format!(
        "{doc}\n__device__ __forceinline__ void {name}(float (&acc)[{v}], unsigned long long a_desc, unsigned long long b_desc) {{\n\
         \x20   fm_fence_array(acc);\n\
         \x20   fm_wgmma_fence();\n",
        v = DQ_CHUNK_ROWS / 2
    );
    for j in 0..keys / 16 {
        let (ab, bb) = (t.ds.k_step_bytes(j)?, t.k_mn.k_step_bytes(j)?);
        let (a16, b16) = (t.ds.k_step_offset16(j)?, t.k_mn.k_step_offset16(j)?);
        let _ = writeln!(
            s,
            "    {ta}(acc, a_desc + {a16}ull, b_desc + {b16}ull, {sc});   // k-step {j}: dS(0, {c}) = byte {ab}, K(0, {c}) = byte {bb}",
            sc = u32::from(j > 0),
            c = 16 * j
        );
    }
    s.push_str("    fm_wgmma_commit();\n}\n");
    Ok(s)
}

/// The 16-byte offsets of key 64 in the dQ GEMM's dS and K_MN operands, checked to shift
/// every k-step of the first 64 keys onto the same k-step of the next 64 (so that
/// `fm_dq_keys64` from a shifted descriptor is `fm_dq`'s k-steps 4..7).
fn paired_key64_offsets(t: &Tiles) -> Result<(u32, u32), ConfigError> {
    let a = t.ds.k_step_offset16(4)?;
    let b = t.k_mn.k_step_offset16(4)?;
    for j in 0..4 {
        if t.ds.k_step_offset16(j + 4)? != a + t.ds.k_step_offset16(j)?
            || t.k_mn.k_step_offset16(j + 4)? != b + t.k_mn.k_step_offset16(j)?
        {
            return Err(ConfigError::Layout(format!(
                "the dQ GEMM's k-step {j} of keys 64.. is not k-step {j} shifted by key 64's offset"
            )));
        }
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::super::DqReduce;
    use super::*;
    use crate::family::dtype::ActDtype;

    #[test]
    fn every_default_configuration_generates() {
        for d in [64, 128, 256] {
            for mask in super::super::config::SWEEP_MASKS {
                for det in [false, true] {
                    let k = BackwardKernel::default_for(d, mask)
                        .unwrap()
                        .with_deterministic(det);
                    let src = k.source().unwrap();
                    assert!(!src.contains('$'), "{k:?}");
                    assert!(src.contains(KERNEL_NAME) && src.contains(PRE_KERNEL_NAME));
                    let red = k.with_dq_reduce(DqReduce::Atomics).source().unwrap();
                    assert!(red.contains("red.global.add.v2.f32 [%0]") && !red.contains('$'));
                    let f16 = k.with_dtype(ActDtype::F16).unwrap().source().unwrap();
                    assert!(f16.contains(".f32.f16.f16") && !f16.contains("bf16.bf16"));
                }
            }
        }
    }
}
