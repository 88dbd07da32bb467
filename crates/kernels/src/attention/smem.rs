//! The shared-memory component: the Q, K and V tiles as gmma-frag operand layouts, and
//! the wgmma descriptors and per-k-step byte offsets read off them
//! (docs/architecture.md, "The attention kernel family", shared memory).
//!
//! TMA writes each tile as chunks of 64 bf16 columns of D (one 128-byte swizzle row):
//! - Q (`block_m x D`) and K (`block_n x D`) are the K-major operands of `S = Q K^T`:
//!   `SmemAtom<K, SW128, 16>` tiled over `(rows, D)` with atoms along the rows first
//!   (CuTe `tile_to_shape`), so one chunk holds every row of 64 columns;
//! - V (`block_n x D`, D contiguous) is the MN-major B operand of `O = P V` (N = D,
//!   K = keys): `SmemAtom<MN, SW128, 16>` tiled over `(D, keys)` with atoms along the keys
//!   first, the same bytes as K's chunks.
//!
//! One wgmma reads a `rows x 16` slice; [`GmmaDescriptor::from_layout`] checks that the
//! slice is canonical and gives LBO and SBO; the slice of k-step `j` starts at the
//! layout's offset of `(0, 16 j)`.

use fragmask_gmma_frag::{GmmaDescriptor, Major, SmemAtom, SmemSwizzle};
use fragmask_layout::{composition_by_mode, Layout, SwizzledLayout};

use super::{ConfigError, Geometry};

/// Bytes of a bf16 element.
const ELEMENT_BYTES: u32 = 2;
/// K extent of one dense bf16 wgmma.
const K_STEP: u32 = 16;

/// One operand tile in shared memory.
#[derive(Debug, Clone)]
pub(super) struct OperandTile {
    /// `Q`, `K` or `V`.
    pub name: &'static str,
    major: Major,
    rows_per_mma: u32,
    layout: SwizzledLayout,
    extent: (u32, u32),
    descriptor: GmmaDescriptor,
}

fn layout_err(what: &str, e: impl core::fmt::Debug) -> ConfigError {
    ConfigError::Layout(format!("{what}: {e:?}"))
}

impl OperandTile {
    fn new(
        name: &'static str,
        major: Major,
        layout: SwizzledLayout,
        extent: (u32, u32),
        rows_per_mma: u32,
    ) -> Result<Self, ConfigError> {
        let slice = composition_by_mode(
            &layout.layout,
            &[
                Layout::leaf(i64::from(rows_per_mma), 1).map_err(|e| layout_err(name, e))?,
                Layout::leaf(i64::from(K_STEP), 1).map_err(|e| layout_err(name, e))?,
            ],
        )
        .map_err(|e| layout_err(name, e))?;
        let descriptor = GmmaDescriptor::from_layout(major, SmemSwizzle::B128, 16, &slice, 0)
            .map_err(|e| layout_err(name, e))?;
        let tile = OperandTile {
            name,
            major,
            rows_per_mma,
            layout,
            extent,
            descriptor,
        };
        // Every k-step slice starts where the 128-byte swizzle pattern is in phase (base
        // offset 0), so one descriptor constant serves them all.
        for j in 0..tile.k_steps() {
            let start = tile.k_step_bytes(j)?;
            let d = GmmaDescriptor::from_layout(major, SmemSwizzle::B128, 16, &slice, start)
                .map_err(|e| layout_err(name, e))?;
            if d.base_offset != 0 {
                return Err(ConfigError::Layout(format!(
                    "{name}: k-step {j} at byte {start} needs base offset {}",
                    d.base_offset
                )));
            }
        }
        Ok(tile)
    }

    /// A K-major `rows x cols` tile (K = `cols`, contiguous), one wgmma reading
    /// `rows_per_mma x 16`: `SmemAtom<K, SW128, 16>` tiled over `(rows, cols)`.
    pub fn k_major(
        name: &'static str,
        rows: u32,
        cols: u32,
        rows_per_mma: u32,
    ) -> Result<Self, ConfigError> {
        let atom =
            SmemAtom::new(Major::K, SmemSwizzle::B128, 16).map_err(|e| layout_err(name, e))?;
        let layout = atom.tile(rows, cols).map_err(|e| layout_err(name, e))?;
        Self::new(name, Major::K, layout, (rows, cols), rows_per_mma)
    }

    /// An MN-major `(mn, k)` tile (MN contiguous), atoms along K first
    /// (`SmemAtom<MN, SW128, 16>::tile_k_first`), one wgmma reading `mn_per_mma x 16`.
    pub fn mn_major(
        name: &'static str,
        mn: u32,
        k: u32,
        mn_per_mma: u32,
    ) -> Result<Self, ConfigError> {
        let atom =
            SmemAtom::new(Major::Mn, SmemSwizzle::B128, 16).map_err(|e| layout_err(name, e))?;
        let layout = atom.tile_k_first(mn, k).map_err(|e| layout_err(name, e))?;
        Self::new(name, Major::Mn, layout, (mn, k), mn_per_mma)
    }

    /// Q: `block_m x head_dim`, K-major.
    pub fn q(g: &Geometry, head_dim: u32) -> Result<Self, ConfigError> {
        Self::k_major("Q", g.block_m(), head_dim, 64)
    }

    /// K: `step_n x head_dim`, K-major (the B operand of `Q K^T`, N = the step's keys).
    pub fn k(g: &Geometry, head_dim: u32) -> Result<Self, ConfigError> {
        Self::k_major("K", g.step_n(), head_dim, g.step_n())
    }

    /// V: `(head_dim, step_n)` MN-major (the B operand of `P V`, N = D, K = the step's keys).
    pub fn v(g: &Geometry, head_dim: u32) -> Result<Self, ConfigError> {
        Self::mn_major("V", head_dim, g.step_n(), head_dim)
    }

    /// Checks that a slice starting at byte `start` (an operand at an offset inside the
    /// tile, e.g. a later 64-column chunk) takes the same descriptor constant bits.
    pub fn check_start(&self, start: u32) -> Result<(), ConfigError> {
        let slice = composition_by_mode(
            &self.layout.layout,
            &[
                Layout::leaf(i64::from(self.rows_per_mma), 1)
                    .map_err(|e| layout_err(self.name, e))?,
                Layout::leaf(i64::from(K_STEP), 1).map_err(|e| layout_err(self.name, e))?,
            ],
        )
        .map_err(|e| layout_err(self.name, e))?;
        let d = GmmaDescriptor::from_layout(self.major, SmemSwizzle::B128, 16, &slice, start)
            .map_err(|e| layout_err(self.name, e))?;
        let fields = |g: &GmmaDescriptor| {
            (
                g.leading_byte_offset,
                g.stride_byte_offset,
                g.base_offset,
                g.swizzle,
            )
        };
        if d.base_offset != 0 || fields(&d) != fields(&self.descriptor) {
            return Err(ConfigError::Layout(format!(
                "{}: a slice at byte {start} needs other descriptor bits",
                self.name
            )));
        }
        Ok(())
    }

    /// The swizzled byte of `(mn, k)`: what the hardware reads (the layout's swizzle
    /// applied to the element offset).
    pub fn swizzled_bytes(&self, mn: u32, k: u32) -> Result<u32, ConfigError> {
        let index = i64::from(mn) + i64::from(self.extent.0) * i64::from(k);
        let e = self
            .layout
            .eval(index)
            .map_err(|e| layout_err(self.name, e))?;
        u32::try_from(e * i64::from(ELEMENT_BYTES)).map_err(|e| layout_err(self.name, e))
    }

    /// Element offset of `(mn, k)` before the swizzle (the layout's colexicographic index).
    fn element(&self, mn: u32, k: u32) -> Result<u32, ConfigError> {
        let index = i64::from(mn) + i64::from(self.extent.0) * i64::from(k);
        let e = self
            .layout
            .layout
            .eval(index)
            .map_err(|e| layout_err(self.name, e))?;
        u32::try_from(e).map_err(|e| layout_err(self.name, e))
    }

    /// Byte offset of `(mn, k)` before the swizzle.
    pub fn bytes(&self, mn: u32, k: u32) -> Result<u32, ConfigError> {
        Ok(self.element(mn, k)? * ELEMENT_BYTES)
    }

    /// wgmma k-steps along the tile's K extent.
    pub fn k_steps(&self) -> u32 {
        self.extent.1 / K_STEP
    }

    /// Start byte of k-step `j`'s slice: `bytes(0, 16 j)`.
    pub fn k_step_bytes(&self, j: u32) -> Result<u32, ConfigError> {
        self.bytes(0, K_STEP * j)
    }

    /// The descriptor's constant bits (LBO, SBO, swizzle; start address 0).
    pub fn descriptor_bits(&self) -> u64 {
        self.descriptor.encode()
    }

    /// Bytes of the tile.
    pub fn tile_bytes(&self) -> u32 {
        self.extent.0 * self.extent.1 * ELEMENT_BYTES
    }

    /// A comment block naming the layout and the descriptor fields.
    pub fn describe(&self) -> String {
        let major = match self.major {
            Major::K => "K",
            Major::Mn => "MN",
        };
        format!(
            "// {name}: gmma-frag SmemAtom<{major}, SW128, bf16> over ({m}, {k}) = {layout};\n\
             //   one wgmma reads {rows} x 16: GmmaDescriptor LBO {lbo}, SBO {sbo}, 128B swizzle \
             -> constant bits {bits:#018x}.\n",
            name = self.name,
            m = self.extent.0,
            k = self.extent.1,
            layout = self.layout,
            rows = self.rows_per_mma,
            lbo = self.descriptor.leading_byte_offset,
            sbo = self.descriptor.stride_byte_offset,
            bits = self.descriptor_bits(),
        )
    }
}

/// The three operand tiles of one kernel.
#[derive(Debug, Clone)]
pub(super) struct Operands {
    pub q: OperandTile,
    pub k: OperandTile,
    pub v: OperandTile,
}

impl Operands {
    pub fn new(g: &Geometry, head_dim: u32) -> Result<Self, ConfigError> {
        Ok(Operands {
            q: OperandTile::q(g, head_dim)?,
            k: OperandTile::k(g, head_dim)?,
            v: OperandTile::v(g, head_dim)?,
        })
    }

    /// Byte offset of warpgroup `wg`'s 64 query rows in the Q tile: `bytes(64 wg, 0)`,
    /// checked linear in `wg` so the kernel can compute it as `wg * stride`.
    pub fn q_warpgroup_stride(&self, g: &Geometry) -> Result<u32, ConfigError> {
        let stride = self.q.bytes(64, 0)?;
        for wg in 0..g.consumer_warpgroups() {
            if self.q.bytes(64 * wg, 0)? != wg * stride {
                return Err(ConfigError::Layout(format!(
                    "Q rows of warpgroup {wg} are not {stride} bytes apart"
                )));
            }
        }
        Ok(stride)
    }

    /// Byte offset of slot `h`'s key block in every chunk of a step's K and V tiles:
    /// `K(h * block_n, 0)`, checked equal to `V(0, h * block_n)`.
    pub fn slot_bytes(&self, g: &Geometry, h: u32) -> Result<u32, ConfigError> {
        if h >= g.step_blocks() {
            return Err(ConfigError::Layout(format!(
                "slot {h} of a step of {} key block(s)",
                g.step_blocks()
            )));
        }
        let k = self.k.bytes(h * g.block_n(), 0)?;
        let v = self.v.bytes(0, h * g.block_n())?;
        if k != v {
            return Err(ConfigError::Layout(format!(
                "key block {h} starts at byte {k} of K but {v} of V"
            )));
        }
        Ok(k)
    }

    /// Bytes of one 64-column chunk (one TMA box) of the Q tile and of a K/V tile: the
    /// rows of a tile times one 128-byte swizzle row, checked against the layouts where the
    /// tile has a second chunk (`bytes(0, 64)` of Q and K, `bytes(64, 0)` of V).
    pub fn chunk_bytes(&self) -> Result<(u32, u32), ConfigError> {
        let q = self.q.extent.0 * 128;
        let kv = self.k.extent.0 * 128;
        if self.q.extent.1 > 64 {
            let found = [
                self.q.bytes(0, 64)?,
                self.k.bytes(0, 64)?,
                self.v.bytes(64, 0)?,
            ];
            if found != [q, kv, kv] {
                return Err(ConfigError::Layout(format!(
                    "64-column chunks of Q, K, V at bytes {found:?}, expected [{q}, {kv}, {kv}]"
                )));
            }
        }
        Ok((q, kv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_the_hand_checked_sw128_fields() {
        // The 128x128 kernel ran with LBO 16 / SBO 1024 for Q and K, and LBO = one
        // 16 KiB chunk / SBO 1024 for V, before the descriptors came from the layouts.
        let ops = Operands::new(&Geometry::TILE_128X128, 128).unwrap();
        assert_eq!(ops.q.descriptor.leading_byte_offset, 16);
        assert_eq!(ops.q.descriptor.stride_byte_offset, 1024);
        assert_eq!(ops.k.descriptor.stride_byte_offset, 1024);
        assert_eq!(ops.v.descriptor.leading_byte_offset, 128 * 128);
        assert_eq!(ops.v.descriptor.stride_byte_offset, 1024);
        let offsets: Vec<u32> = (0..8).map(|j| ops.k.k_step_bytes(j).unwrap()).collect();
        assert_eq!(offsets, [0, 32, 64, 96, 16384, 16416, 16448, 16480]);
        let v: Vec<u32> = (0..8).map(|j| ops.v.k_step_bytes(j).unwrap()).collect();
        assert_eq!(v, [0, 2048, 4096, 6144, 8192, 10240, 12288, 14336]);
        assert_eq!(
            ops.q_warpgroup_stride(&Geometry::TILE_128X128).unwrap(),
            8192
        );
        assert_eq!(ops.chunk_bytes().unwrap(), (16384, 16384));
    }

    #[test]
    fn every_geometry_and_head_dim_has_canonical_operands() {
        for g in Geometry::SUPPORTED {
            for d in [64, 128, 256] {
                let ops = Operands::new(&g, d).unwrap();
                let (q_chunk, kv_chunk) = ops.chunk_bytes().unwrap();
                assert_eq!(q_chunk, g.block_m() * 128, "{g} d{d}");
                assert_eq!(kv_chunk, g.step_n() * 128, "{g} d{d}");
                if g.step_blocks() > 1 {
                    assert_eq!(
                        ops.slot_bytes(&g, 1).unwrap(),
                        g.block_n() * 128,
                        "{g} d{d}"
                    );
                }
                assert_eq!(ops.q.tile_bytes(), g.q_tile_bytes(d));
                assert_eq!(ops.v.tile_bytes(), g.kv_tile_bytes(d));
                // LBO of V is one chunk when D spans more than one (unused otherwise).
                if d > 64 {
                    assert_eq!(ops.v.descriptor.leading_byte_offset, kv_chunk, "{g} d{d}");
                }
            }
        }
    }
}
