//! The shared-memory operand component: a wgmma operand tile as a gmma-frag layout
//! (`SmemAtom<K|MN, SW128, 16>` tiled over the tile), its descriptor's constant bits and
//! the byte offsets of its k-step slices, read off the layout and checked
//! (docs/architecture.md, "The attention kernel family", shared memory). The forward
//! (`attention::smem::Operands`) and the backward (`attention::backward`) build their
//! tiles from it.
//!
//! One wgmma reads a `rows x 16` slice; [`GmmaDescriptor::from_layout`] checks that the
//! slice is canonical and gives LBO and SBO; the slice of k-step `j` starts at the
//! layout's offset of `(0, 16 j)`.

use fragmask_gmma_frag::{GmmaDescriptor, Major, SmemAtom, SmemSwizzle};
use fragmask_layout::{composition_by_mode, Layout, SwizzledLayout};

use super::LayoutError;

/// Bytes of a bf16 element.
const ELEMENT_BYTES: u32 = 2;
/// K extent of one dense bf16 wgmma.
const K_STEP: u32 = 16;

/// One operand tile in shared memory.
#[derive(Debug, Clone)]
pub struct OperandTile {
    /// `Q`, `K` or `V`.
    pub name: &'static str,
    major: Major,
    rows_per_mma: u32,
    layout: SwizzledLayout,
    extent: (u32, u32),
    descriptor: GmmaDescriptor,
}

fn layout_err(what: &str, e: impl core::fmt::Debug) -> LayoutError {
    LayoutError(format!("{what}: {e:?}"))
}

impl OperandTile {
    fn new(
        name: &'static str,
        major: Major,
        layout: SwizzledLayout,
        extent: (u32, u32),
        rows_per_mma: u32,
    ) -> Result<Self, LayoutError> {
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
                return Err(LayoutError(format!(
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
    ) -> Result<Self, LayoutError> {
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
    ) -> Result<Self, LayoutError> {
        let atom =
            SmemAtom::new(Major::Mn, SmemSwizzle::B128, 16).map_err(|e| layout_err(name, e))?;
        let layout = atom.tile_k_first(mn, k).map_err(|e| layout_err(name, e))?;
        Self::new(name, Major::Mn, layout, (mn, k), mn_per_mma)
    }

    /// Checks that a slice starting at byte `start` (an operand at an offset inside the
    /// tile, e.g. a later 64-column chunk) takes the same descriptor constant bits.
    pub fn check_start(&self, start: u32) -> Result<(), LayoutError> {
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
            return Err(LayoutError(format!(
                "{}: a slice at byte {start} needs other descriptor bits",
                self.name
            )));
        }
        Ok(())
    }

    /// The swizzled byte of `(mn, k)`: what the hardware reads (the layout's swizzle
    /// applied to the element offset).
    pub fn swizzled_bytes(&self, mn: u32, k: u32) -> Result<u32, LayoutError> {
        let index = i64::from(mn) + i64::from(self.extent.0) * i64::from(k);
        let e = self
            .layout
            .eval(index)
            .map_err(|e| layout_err(self.name, e))?;
        u32::try_from(e * i64::from(ELEMENT_BYTES)).map_err(|e| layout_err(self.name, e))
    }

    /// Element offset of `(mn, k)` before the swizzle (the layout's colexicographic index).
    fn element(&self, mn: u32, k: u32) -> Result<u32, LayoutError> {
        let index = i64::from(mn) + i64::from(self.extent.0) * i64::from(k);
        let e = self
            .layout
            .layout
            .eval(index)
            .map_err(|e| layout_err(self.name, e))?;
        u32::try_from(e).map_err(|e| layout_err(self.name, e))
    }

    /// Byte offset of `(mn, k)` before the swizzle.
    pub fn bytes(&self, mn: u32, k: u32) -> Result<u32, LayoutError> {
        Ok(self.element(mn, k)? * ELEMENT_BYTES)
    }

    /// wgmma k-steps along the tile's K extent.
    pub fn k_steps(&self) -> u32 {
        self.extent.1 / K_STEP
    }

    /// Start byte of k-step `j`'s slice: `bytes(0, 16 j)`.
    pub fn k_step_bytes(&self, j: u32) -> Result<u32, LayoutError> {
        self.bytes(0, K_STEP * j)
    }

    /// [`Self::k_step_bytes`] in 16-byte units, what `fm_desc_at` adds to a descriptor's
    /// start address (errors unless 16-byte aligned).
    pub fn k_step_offset16(&self, j: u32) -> Result<u32, LayoutError> {
        self.offset16(0, K_STEP * j)
    }

    /// [`Self::bytes`] of `(mn, k)` in 16-byte units, what a slice starting there adds to the
    /// tile's descriptor (errors unless 16-byte aligned).
    pub fn offset16(&self, mn: u32, k: u32) -> Result<u32, LayoutError> {
        let bytes = self.bytes(mn, k)?;
        if bytes % 16 == 0 {
            Ok(bytes / 16)
        } else {
            Err(LayoutError(format!(
                "{}: ({mn}, {k}) starts at byte {bytes}, not 16-byte aligned (wgmma descriptor start address)",
                self.name
            )))
        }
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

    /// [`Self::describe`] followed by `#define FM_DESC_<name> <descriptor bits>ull`, the
    /// constant the kernel's `fm_desc_at(start, offset16, FM_DESC_<name>)` calls complete.
    pub fn declare_descriptor(&self) -> String {
        format!(
            "{}#define FM_DESC_{} {:#018x}ull\n",
            self.describe(),
            self.name,
            self.descriptor_bits()
        )
    }

    /// The tile's `(mn, k)` extent.
    pub fn extent(&self) -> (u32, u32) {
        self.extent
    }

    /// The descriptor the layout gives (start address 0).
    pub fn descriptor(&self) -> &GmmaDescriptor {
        &self.descriptor
    }
}

/// Bytes of one warpgroup's 64 rows in a 64-column chunk of a K-major SW128 tile (64
/// rows of one 128-byte swizzle row each): warpgroup `wg`'s rows start at `wg` times this
/// in every chunk, which [`OperandTile::check_ldmatrix_a`] proves with the fragments.
pub const WARPGROUP_ROWS_BYTES: u32 = 64 * 128;

/// The RS A fragment of a K-major operand tile's 64-row warpgroup slices by
/// `ldmatrix.x4` (CUDA text, needs `fm_sw128`): the byte offset, within warpgroup `wg`'s
/// rows, that lane `lt % 32` of warp `lt / 32` gives for k-step `j`: row
/// `16 (lt / 32) + l % 8 + 8 ((l / 8) % 2)`, column `16 j + 8 (l / 16)`, in the 64-column
/// chunks of `chunk` bytes. [`OperandTile::check_ldmatrix_a`] proves the bytes and the
/// registers.
pub const LDMATRIX_A_OFFSET: &str = r#"// The RS A fragment of k-step j by ldmatrix.x4: lane l of warp lt / 32 gives row 16 (lt / 32) + l % 8 + 8 ((l / 8) % 2)
// of the warpgroup's 64 rows, column 16 j + 8 (l / 16); registers 0..3 are A registers 4 j .. 4 j + 3 (family/smem.rs:
// OperandTile::check_ldmatrix_a proves the bytes against the tile's layout and the registers against the RS A operand).
__device__ __forceinline__ unsigned fm_ldmatrix_a_offset(int lt, int j, unsigned chunk) {
    const int lane = lt % 32;
    const unsigned row = (unsigned)(16 * (lt / 32) + lane % 8 + 8 * ((lane / 8) % 2));
    const unsigned col = (unsigned)(16 * j + 8 * (lane / 16));
    return (col / 64u) * chunk + fm_sw128(128u * row + 2u * (col % 64u));
}
"#;

impl OperandTile {
    /// Proves [`LDMATRIX_A_OFFSET`] for this K-major tile of `64 * warpgroups` rows:
    /// the bytes lane `l` of warp `w` of warpgroup `wg` addresses for k-step `j`
    /// (`wg` times [`WARPGROUP_ROWS_BYTES`], a multiple of the 1024-byte swizzle atom, plus
    /// the helper's offset) hold that row's 8 columns in this layout, and `ldmatrix`'s
    /// register `r` of thread `t` (matrix r's row t / 4, columns 2 (t % 4), + 1) is
    /// register `4 j + r` of the RS A operand: the pair `(2m, 2m + 1)`, m = 4 j + r, of the
    /// m64n{cols} accumulator layout (docs/architecture.md fact 5). Every element.
    pub fn check_ldmatrix_a(&self, warpgroups: u32) -> Result<(), LayoutError> {
        let (rows, cols) = self.extent;
        if self.major != Major::K || rows != 64 * warpgroups || cols % 16 != 0 {
            return Err(LayoutError(format!(
                "{}: ldmatrix A fragments need a K-major tile of 64 rows per warpgroup, not {rows}x{cols}",
                self.name
            )));
        }
        let acc = super::fragment::FragmentMap::new(cols).map_err(|e| LayoutError(e.0))?;
        let chunk = rows * 128;
        for wg in 0..warpgroups {
            for w in 0..4 {
                for j in 0..cols / 16 {
                    for l in 0..32 {
                        let r = 16 * w + l % 8 + 8 * ((l / 8) % 2);
                        let col = 16 * j + 8 * (l / 16);
                        let linear = 128 * r + 2 * (col % 64);
                        let emitted = wg * WARPGROUP_ROWS_BYTES
                            + (col / 64) * chunk
                            + (linear ^ (((linear >> 7) & 7) << 4));
                        for c in 0..8 {
                            if self.swizzled_bytes(64 * wg + r, col + c)? != emitted + 2 * c {
                                return Err(LayoutError(format!(
                                    "{}: A fragment ({}, {}) is not at byte {}",
                                    self.name,
                                    64 * wg + r,
                                    col + c,
                                    emitted + 2 * c
                                )));
                            }
                        }
                    }
                    for t in 0..32 {
                        for r in 0..4 {
                            let m = 4 * j + r;
                            let got = (
                                16 * w + 8 * (r % 2) + t / 4,
                                16 * j + 8 * (r / 2) + 2 * (t % 4),
                            );
                            let (want_row, want_col) = acc.coord(32 * w + t, 2 * m);
                            let hi = acc.coord(32 * w + t, 2 * m + 1);
                            if got != (want_row, want_col) || hi != (want_row, want_col + 1) {
                                return Err(LayoutError(format!(
                                    "{}: ldmatrix register {r} of thread {} at {got:?} is not A register {m} at ({want_row}, {want_col})",
                                    self.name,
                                    32 * w + t
                                )));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldmatrix_a_fragments_are_the_rs_a_operand_of_every_k_major_tile() {
        for warpgroups in 1..=3 {
            for cols in [64, 128, 256] {
                let tile = OperandTile::k_major("Q", 64 * warpgroups, cols, 64).unwrap();
                tile.check_ldmatrix_a(warpgroups).unwrap();
                // A tile whose rows are not the warpgroups' is refused, not misread.
                assert!(tile.check_ldmatrix_a(warpgroups + 1).is_err());
            }
        }
        let v = OperandTile::mn_major("V", 128, 64, 128).unwrap();
        assert!(v.check_ldmatrix_a(1).is_err());
    }
}
