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
