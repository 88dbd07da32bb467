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
pub const MAX_SMEM_BYTES: u32 = 227 * 1024;
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
}

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
             page size a power of two in 1..={MAX_PAGE_SIZE}, mask tiles of a multiple of 16 key columns up to {MAX_MASK_BLOCK_N} (D <= 128), warps in {{1, 2, 4, 8}}, stages in 2..=8, \
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
        if self.mask_block_n > 0 && self.head_dim > 128 {
            // D = 256 already holds 254 of 255 registers (o alone is 128); the mask's
            // list pointer and row offsets make it spill (tests/decode_compile.rs).
            return err(format!(
                "a block-sparse mask at D = {} (masked decode takes D = 64 or 128)",
                self.head_dim
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
        }
        .validate()
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
        let stages = self.warps * self.stages * self.stage_bytes();
        let merge = self.merge_bytes();
        self.tile_bytes() + if stages > merge { stages } else { merge }
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
