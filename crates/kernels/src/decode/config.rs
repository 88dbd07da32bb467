//! The geometry of the split-KV decode kernel: one value from which the source takes
//! every number (threads, launch bounds, stages, tile sizes, shared-memory bytes).

use crate::family::dtype::ActDtype;

/// Keys per warp tile: one k16 step of the `P·V` product (`mma.sync.m16n8k16`).
pub const TILE_KEYS: u32 = 16;
/// Packed query rows per CTA: the M extent of one `m16n8k16` tile. Rows are
/// `(token, head in the KV head's group)`, heads fastest (packed GQA).
pub const TILE_ROWS: u32 = 16;
/// Bytes of one cp.async / shared-memory vector access.
pub const CHUNK_BYTES: u32 = 16;
/// Shared memory one CTA may use on sm_90 (CUDA Programming Guide, Table 21: 227 KB).
pub const MAX_SMEM_BYTES: u32 = crate::family::sm90::MAX_DYNAMIC_SMEM;
/// Shared memory per SM on sm_90 (228 KB), of which the driver reserves 1 KB per CTA.
pub const SM_SMEM_BYTES: u32 = 228 * 1024;
/// Largest supported page size (a power of two).
pub const MAX_PAGE_SIZE: u32 = 1024;

/// How the KV cache is laid out in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvLayout {
    /// `[B, capacity, Hkv, D]`, one contiguous run of keys per request.
    Contiguous,
    /// Pages `[num_pages, page_size, Hkv, D]` found through `block_table [B, max_pages]`.
    Paged {
        /// Keys per page: a power of two in `1..=MAX_PAGE_SIZE`.
        page_size: u32,
    },
}

impl KvLayout {
    /// Words for messages and comments.
    pub fn describe(self) -> String {
        match self {
            KvLayout::Contiguous => "contiguous [B, Sk, Hkv, D]".into(),
            KvLayout::Paged { page_size } => {
                format!("paged [num_pages, {page_size}, Hkv, D] through block_table [B, max_pages]")
            }
        }
    }
}

/// The geometry of one compiled decode kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodeConfig {
    /// `D`, the head size of q, k, v and o.
    pub head_dim: u32,
    /// Element type of q, k, v and o (bf16 or fp16: the MMA operand type).
    pub dtype: ActDtype,
    /// The KV cache's layout.
    pub kv: KvLayout,
    /// Warps per CTA; each walks its own share of the CTA's key tiles.
    pub warps: u32,
    /// cp.async stages per warp (tiles in flight: `stages - 1` ahead of the one used).
    pub stages: u32,
    /// Key columns of a block-sparse mask's tile (0: no mask). The kernel walks only the
    /// listed key blocks of each query block, in 16-key tiles (`mask_block_n / 16` per
    /// block), and applies the partial blocks' row bits per element (docs/decode.md,
    /// "Masks").
    pub mask_block_n: u32,
    /// Shared K/V (docs/decode.md, "Row-block CTAs"): the CTA holds `16 · warps` packed
    /// rows, warp w the m16 tile `w`, and every warp consumes every key tile from
    /// CTA-wide cp.async stages of [`Self::step_tiles`] tiles, so each K/V byte is read
    /// once per `16 · warps` rows. `false`: 16 rows per CTA, each warp walks its own
    /// share of the key tiles through its own stages (no CTA barrier in the key loop).
    pub shared_kv: bool,
}

/// Warps (m16 row tiles) of a shared-K/V CTA: 64 packed rows, one 64-token mask row block
/// of write-up 002 at G = 1.
pub const SHARED_WARPS: u32 = 4;
/// Whether shared-K/V plans of 2 to [`MAX_CLUSTER_SPLITS`] splits merge their splits
/// through distributed shared memory inside one thread-block cluster (no partials in
/// global memory, no combine kernel; docs/decode.md, "Cluster merge").
pub const CLUSTER_MERGE: bool = true;
/// Most splits one cluster merges: the largest (non-portable) cluster of sm_90 (CUDA
/// Programming Guide, "Thread Block Clusters").
pub const MAX_CLUSTER_SPLITS: u32 = 16;
/// List entries of a split a shared-K/V masked CTA stages in shared memory at its start
/// (entries past it are read from global memory).
pub const LIST_CAP: u32 = 256;

/// Largest mask tile width the kernel takes (the widest wgmma N).
pub const MAX_MASK_BLOCK_N: u32 = 256;

/// Why a geometry cannot be built; the message lists what is supported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "unsupported decode geometry: {}. Supported: D in {{64, 128, 256}}, dtype bf16 or f16, \
             page size a power of two in 1..={MAX_PAGE_SIZE}, mask tiles of a multiple of 16 key columns up to {MAX_MASK_BLOCK_N}, warps in {{1, 2, 4, 8}}, stages in 2..=8, \
             at most {} KB of shared memory",
            self.0,
            MAX_SMEM_BYTES / 1024
        )
    }
}

impl std::error::Error for ConfigError {}

impl DecodeConfig {
    /// Checks the geometry.
    pub fn validate(self) -> Result<Self, ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        if ![64, 128, 256].contains(&self.head_dim) {
            return err(format!("D = {}", self.head_dim));
        }
        if self.dtype == ActDtype::F32 {
            return err("dtype f32".into());
        }
        if let KvLayout::Paged { page_size } = self.kv {
            if !page_size.is_power_of_two() || page_size > MAX_PAGE_SIZE {
                return err(format!("page size {page_size}"));
            }
        }
        if ![1, 2, 4, 8].contains(&self.warps) {
            return err(format!("warps = {}", self.warps));
        }
        if !(2..=8).contains(&self.stages) {
            return err(format!("stages = {}", self.stages));
        }
        if self.shared_kv
            && (!(self.warps == 1 || self.warps == SHARED_WARPS)
                || (TILE_KEYS * self.step_tiles() * self.chunks_per_row()) % self.threads() != 0)
        {
            return err(format!(
                "shared K/V with {} warps (it takes 1 or {SHARED_WARPS})",
                self.warps
            ));
        }
        if self.shared_kv && (TILE_KEYS * self.chunks_per_row()) % self.threads() != 0 {
            return err(format!(
                "shared K/V with {} threads: a tile's copies must divide evenly",
                self.threads()
            ));
        }
        if self.mask_block_n % TILE_KEYS != 0 || self.mask_block_n > MAX_MASK_BLOCK_N {
            return err(format!(
                "mask tile of {} key columns (a multiple of {TILE_KEYS} up to {MAX_MASK_BLOCK_N})",
                self.mask_block_n
            ));
        }
        if self.smem_bytes() > MAX_SMEM_BYTES {
            return err(format!(
                "{} bytes of shared memory for D = {}, {} warps, {} stages",
                self.smem_bytes(),
                self.head_dim,
                self.warps,
                self.stages
            ));
        }
        Ok(self)
    }

    /// The default geometry for `D`, `dtype` and a cache layout: 4 warps (2 at D = 256)
    /// and as many stages as keep two or more CTAs on an SM with 48 KB or more of loads
    /// in flight per CTA.
    pub fn new(head_dim: u32, dtype: ActDtype, kv: KvLayout) -> Result<Self, ConfigError> {
        let (warps, stages) = match head_dim {
            64 => (4, 4),
            128 => (4, 3),
            _ => (2, 3),
        };
        DecodeConfig {
            head_dim,
            dtype,
            kv,
            warps,
            stages,
            mask_block_n: 0,
            shared_kv: false,
        }
        .validate()
    }

    /// The shared-K/V geometry for the same D, dtype and cache ([`Self::shared_kv`]):
    /// [`SHARED_WARPS`] warps and 4 stages of [`Self::step_tiles`] key tiles (16 KB of K
    /// and V each): 48 KB in flight per CTA while it computes a stage, two CTAs per SM.
    /// (Two 32 KB stages, one in flight, reached 0.41 of the copy roof on write-up
    /// 002's decode: the barrier between stages left the loads idle.)
    pub fn with_shared_kv(self) -> Result<Self, ConfigError> {
        self.with_shared_kv_warps(SHARED_WARPS)
    }

    /// Shared K/V with `warps` m16 row tiles per CTA (1 or [`SHARED_WARPS`]). One warp
    /// (16 rows) serves masked D = 256 with few rows: the mask's list entries and words
    /// staged in shared memory keep it within the registers where the 16-row kernel
    /// with per-warp key shares spills (tests/decode_compile.rs).
    pub fn with_shared_kv_warps(self, warps: u32) -> Result<Self, ConfigError> {
        DecodeConfig {
            warps,
            stages: 4,
            shared_kv: true,
            ..self
        }
        .validate()
    }

    /// Packed query rows per CTA: 16, or `16 · warps` with shared K/V.
    pub const fn cta_rows(self) -> u32 {
        if self.shared_kv {
            TILE_ROWS * self.warps
        } else {
            TILE_ROWS
        }
    }

    /// 16-key tiles per CTA stage with shared K/V: 16 KB of K and V (4 tiles at D = 64,
    /// 2 at 128, 1 at 256); 1 otherwise (each warp's stage is one tile).
    pub const fn step_tiles(self) -> u32 {
        if !self.shared_kv {
            1
        } else {
            256 / self.head_dim
        }
    }

    /// Whether the shared-K/V consumer takes its stage's tiles two at a time under one
    /// softmax update (an even [`Self::step_tiles`]: D = 64 and 128).
    pub const fn pairs_tiles(self) -> bool {
        self.shared_kv && self.step_tiles() % 2 == 0
    }

    /// Bytes of one shared-K/V CTA stage: `step_tiles` K/V tile pairs, then (masked) one
    /// mask word per tile and CTA row.
    pub const fn cta_stage_bytes(self) -> u32 {
        self.step_tiles() * self.stage_bytes() + self.mask_words_bytes()
    }

    /// Mask words of a shared-K/V stage: one 32-bit word per tile and row (0 otherwise).
    pub const fn mask_words_bytes(self) -> u32 {
        if self.shared_kv && self.mask_block_n > 0 {
            self.step_tiles() * self.cta_rows() * 4
        } else {
            0
        }
    }

    /// Bytes of the Q tiles (`cta_rows × D`).
    pub const fn q_bytes(self) -> u32 {
        self.cta_rows() / TILE_ROWS * self.tile_bytes()
    }

    /// Bytes of the staged list entries (shared K/V, masked): `LIST_CAP` int2.
    pub const fn list_bytes(self) -> u32 {
        if self.shared_kv && self.mask_block_n > 0 {
            LIST_CAP * 8
        } else {
            0
        }
    }

    /// Offset of the staged list entries: after the Q tiles and the stages (or merge area).
    pub const fn list_offset(self) -> u32 {
        self.smem_bytes() - self.list_bytes()
    }

    /// The same geometry walking a block-sparse mask of `block_n`-key tiles (0: none).
    pub fn with_mask_block_n(self, block_n: u32) -> Result<Self, ConfigError> {
        DecodeConfig {
            mask_block_n: block_n,
            ..self
        }
        .validate()
    }

    /// 32-bit words per row of a partial mask block (row-major bits, `mask_block_n` wide).
    pub const fn mask_row_words(self) -> u32 {
        self.mask_block_n.div_ceil(32)
    }

    /// Threads per CTA.
    pub const fn threads(self) -> u32 {
        32 * self.warps
    }

    /// 16-byte chunks per row of D elements: `D · 2 / 16`.
    pub const fn chunks_per_row(self) -> u32 {
        self.head_dim * 2 / CHUNK_BYTES
    }

    /// Bytes of one `[TILE_ROWS, D]` or `[TILE_KEYS, D]` tile of 16-bit elements.
    pub const fn tile_bytes(self) -> u32 {
        TILE_KEYS * self.head_dim * 2
    }

    /// Bytes of one warp stage: a K tile and a V tile.
    pub const fn stage_bytes(self) -> u32 {
        2 * self.tile_bytes()
    }

    /// Bytes of the fp32 merge area (per warp: `[16, D]` o and `[16, 2]` (m, l)), which
    /// reuses the stages once the key loop is over.
    pub const fn merge_bytes(self) -> u32 {
        self.warps * TILE_ROWS * (self.head_dim + 2) * 4
    }

    /// Dynamic shared memory of a CTA: the Q tile, then the warps' stages (or the
    /// merge area, whichever is larger).
    pub const fn smem_bytes(self) -> u32 {
        let stages = if self.shared_kv {
            self.stages * self.cta_stage_bytes()
        } else {
            self.warps * self.stages * self.stage_bytes()
        };
        let merge = self.merge_bytes();
        let body = if stages > merge { stages } else { merge };
        self.q_bytes() + body + self.list_bytes()
    }

    /// CTAs that fit on one SM by shared memory (the launch bounds' minimum, at most 4).
    pub const fn ctas_per_sm(self) -> u32 {
        let n = SM_SMEM_BYTES / (self.smem_bytes() + 1024);
        if n == 0 {
            1
        } else if n > 4 {
            4
        } else {
            n
        }
    }

    /// MMA n8 tiles across D (the o accumulator's n-tiles).
    pub const fn n_tiles(self) -> u32 {
        self.head_dim / 8
    }

    /// The page size (paged) or `None` (contiguous).
    pub const fn page_size(self) -> Option<u32> {
        match self.kv {
            KvLayout::Contiguous => None,
            KvLayout::Paged { page_size } => Some(page_size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_geometries_fit_two_ctas_per_sm() {
        for d in [64, 128, 256] {
            for kv in [KvLayout::Contiguous, KvLayout::Paged { page_size: 16 }] {
                let c = DecodeConfig::new(d, ActDtype::Bf16, kv).unwrap();
                assert!(c.ctas_per_sm() >= 2, "{c:?}: {} bytes", c.smem_bytes());
                assert!(c.smem_bytes() >= c.tile_bytes() + c.merge_bytes());
            }
        }
        let c = DecodeConfig::new(128, ActDtype::Bf16, KvLayout::Contiguous).unwrap();
        assert_eq!(c.smem_bytes(), 4096 + 4 * 3 * 8192);
        assert_eq!(c.chunks_per_row(), 16);
    }

    #[test]
    fn shared_kv_geometries_fit_two_ctas_per_sm_masked_or_not() {
        for d in [64, 128, 256] {
            for mask in [0, 64, 128] {
                for warps in [1, SHARED_WARPS] {
                    let c = DecodeConfig::new(d, ActDtype::Bf16, KvLayout::Paged { page_size: 1 })
                        .unwrap()
                        .with_mask_block_n(mask)
                        .unwrap()
                        .with_shared_kv_warps(warps)
                        .unwrap();
                    assert_eq!(c.cta_rows(), 16 * warps);
                    assert!(c.ctas_per_sm() >= 2, "{c:?}: {} bytes", c.smem_bytes());
                    // A stage's copies divide evenly over the CTA's threads.
                    assert_eq!(
                        (TILE_KEYS * c.step_tiles() * c.chunks_per_row()) % c.threads(),
                        0
                    );
                    assert!(c.list_offset() >= c.q_bytes() + c.stages * c.cta_stage_bytes());
                }
            }
        }
    }

    #[test]
    fn unsupported_geometries_are_config_errors_that_list_the_rules() {
        let bad = [
            DecodeConfig::new(96, ActDtype::Bf16, KvLayout::Contiguous),
            DecodeConfig::new(128, ActDtype::F32, KvLayout::Contiguous),
            DecodeConfig::new(128, ActDtype::Bf16, KvLayout::Paged { page_size: 24 }),
            DecodeConfig::new(128, ActDtype::Bf16, KvLayout::Paged { page_size: 2048 }),
            DecodeConfig {
                head_dim: 256,
                dtype: ActDtype::Bf16,
                kv: KvLayout::Contiguous,
                warps: 8,
                stages: 8,
                mask_block_n: 0,
                shared_kv: false,
            }
            .validate(),
            DecodeConfig::new(128, ActDtype::Bf16, KvLayout::Contiguous)
                .unwrap()
                .with_mask_block_n(72),
        ];
        for e in bad {
            let e = e.unwrap_err();
            assert!(e.to_string().contains("Supported:"), "{e}");
        }
    }
}
