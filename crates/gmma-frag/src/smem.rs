//! wgmma shared-memory operand layouts (CuTe's `GMMA::Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom`)
//! and the matrix descriptor fields they imply.

use fragmask_layout::{blocked_product, Layout, Swizzle, SwizzledLayout};

use crate::error::{lay, FragError};

/// Which dimension is contiguous in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    /// K contiguous (a row of A, or of B as N × K, is contiguous): CuTe `GMMA::Major::K`.
    K,
    /// M (or N) contiguous: CuTe `GMMA::Major::MN`.
    Mn,
}

/// The descriptor's swizzle mode (PTX ISA, "Shared memory matrix layout"; CuTe
/// `GMMA::LayoutType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SmemSwizzle {
    /// No swizzle: 8 × 16-byte core matrices ("interleave").
    Interleave,
    /// 32-byte swizzle, `Swizzle<1,4,3>` on byte addresses.
    B32,
    /// 64-byte swizzle, `Swizzle<2,4,3>` on byte addresses.
    B64,
    /// 128-byte swizzle, `Swizzle<3,4,3>` on byte addresses.
    B128,
}

impl SmemSwizzle {
    /// Bytes of one swizzled row (16 for interleave).
    pub const fn width_bytes(&self) -> u32 {
        match self {
            SmemSwizzle::Interleave => 16,
            SmemSwizzle::B32 => 32,
            SmemSwizzle::B64 => 64,
            SmemSwizzle::B128 => 128,
        }
    }

    /// B of `Swizzle<B,4,3>`.
    pub const fn swizzle_bits(&self) -> u32 {
        match self {
            SmemSwizzle::Interleave => 0,
            SmemSwizzle::B32 => 1,
            SmemSwizzle::B64 => 2,
            SmemSwizzle::B128 => 3,
        }
    }

    /// The descriptor's 2-bit layout type: none 0, 128B 1, 64B 2, 32B 3
    /// (`cute/arch/mma_sm90_desc.hpp`, `GMMA::LayoutType`).
    pub const fn layout_type(&self) -> u8 {
        match self {
            SmemSwizzle::Interleave => 0,
            SmemSwizzle::B128 => 1,
            SmemSwizzle::B64 => 2,
            SmemSwizzle::B32 => 3,
        }
    }

    /// Bytes after which the swizzle pattern repeats: 8 rows of [`Self::width_bytes`].
    pub const fn repeat_bytes(&self) -> u32 {
        8 * self.width_bytes()
    }

    /// `Swizzle<B,4,3>` on byte addresses.
    pub const fn byte_swizzle(&self) -> Swizzle {
        match Swizzle::new(self.swizzle_bits(), 4, 3) {
            Ok(s) => s,
            Err(_) => panic!("B <= 3 always satisfies Swizzle's precondition"),
        }
    }
}

/// One canonical wgmma shared-memory atom: CuTe's `GMMA::Layout_<major>_<swizzle>_Atom<T>`
/// (`include/cute/atom/mma_traits_sm90_gmma.hpp`), for elements of `element_bits`
/// (8, 16 or 32).
///
/// - K-major: `(8, W/e) : (W/e, 1)` (8 MN rows of one swizzle width W of K),
/// - MN-major: `(W/e, 8) : (1, W/e)`,
///
/// with W the swizzle width in bytes (16 for interleave) and e the element bytes,
/// composed with the swizzle, which in element units is `Swizzle<B, 4 - log2(e), 3>`.
///
/// ```
/// use fragmask_gmma_frag::{Major, SmemAtom, SmemSwizzle};
/// let atom = SmemAtom::new(Major::K, SmemSwizzle::B128, 16).unwrap();
/// assert_eq!(atom.shape(), (8, 64));
/// assert_eq!(format!("{}", atom.layout()), "Sw<3,3,3> o (8,64):(64,1)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SmemAtom {
    major: Major,
    swizzle: SmemSwizzle,
    element_bits: u32,
}

impl SmemAtom {
    /// The atom; `element_bits` must be 8, 16 or 32.
    pub const fn new(
        major: Major,
        swizzle: SmemSwizzle,
        element_bits: u32,
    ) -> Result<SmemAtom, FragError> {
        if element_bits != 8 && element_bits != 16 && element_bits != 32 {
            return Err(FragError::ElementBits { bits: element_bits });
        }
        Ok(SmemAtom {
            major,
            swizzle,
            element_bits,
        })
    }

    /// The major-ness.
    pub const fn major(&self) -> Major {
        self.major
    }

    /// The swizzle mode.
    pub const fn swizzle(&self) -> SmemSwizzle {
        self.swizzle
    }

    /// Bits per element.
    pub const fn element_bits(&self) -> u32 {
        self.element_bits
    }

    /// Elements per swizzle row.
    const fn row_elements(&self) -> u32 {
        self.swizzle.width_bytes() * 8 / self.element_bits
    }

    /// `(MN, K)` extent of the atom in elements.
    pub const fn shape(&self) -> (u32, u32) {
        match self.major {
            Major::K => (8, self.row_elements()),
            Major::Mn => (self.row_elements(), 8),
        }
    }

    /// The element-offset layout `(MN, K) -> element`, without the swizzle.
    pub const fn plain_layout(&self) -> Layout {
        let w = self.row_elements() as i64;
        let l = match self.major {
            Major::K => Layout::from_flat(&[8, w], &[w, 1]),
            Major::Mn => Layout::from_flat(&[w, 8], &[1, w]),
        };
        match l {
            Ok(l) => l,
            Err(_) => panic!("two leaves always fit"),
        }
    }

    /// The swizzle in element units: `Swizzle<B, 4 - log2(element bytes), 3>`.
    pub const fn element_swizzle(&self) -> Swizzle {
        let base = match self.element_bits {
            8 => 4,
            16 => 3,
            _ => 2,
        };
        match Swizzle::new(self.swizzle.swizzle_bits(), base, 3) {
            Ok(s) => s,
            Err(_) => panic!("B <= 3 always satisfies Swizzle's precondition"),
        }
    }

    /// The atom in element units: `Swizzle ∘ plain_layout`.
    pub const fn layout(&self) -> SwizzledLayout {
        SwizzledLayout::new(self.element_swizzle(), self.plain_layout())
    }

    /// The atom repeated over an `(mn, k)` tile, atoms column-major (CuTe's
    /// `tile_to_shape(atom, Shape<mn,k>)`). `mn` and `k` must be multiples of the atom.
    pub const fn tile(&self, mn: u32, k: u32) -> Result<SwizzledLayout, FragError> {
        let (atom_mn, atom_k) = self.shape();
        if mn == 0 || k == 0 || !mn.is_multiple_of(atom_mn) || !k.is_multiple_of(atom_k) {
            return Err(FragError::Descriptor {
                reason: "tile is not a multiple of the atom",
            });
        }
        let copies = lay!(Layout::from_flat(
            &[(mn / atom_mn) as i64, (k / atom_k) as i64],
            &[1, (mn / atom_mn) as i64]
        ));
        let tiled = lay!(blocked_product(&self.plain_layout(), &copies));
        Ok(SwizzledLayout::new(self.element_swizzle(), tiled))
    }
}

impl SmemAtom {
    /// The atom repeated over an `(mn, k)` tile with atoms along K first, then MN: each
    /// swizzle-width column of MN is one contiguous chunk of `k` rows, the order a 2-D TMA
    /// box of one swizzle width per load writes (the V tile of attention: one chunk per
    /// 64 columns of D). `mn` and `k` must be multiples of the atom.
    pub const fn tile_k_first(&self, mn: u32, k: u32) -> Result<SwizzledLayout, FragError> {
        let (atom_mn, atom_k) = self.shape();
        if mn == 0 || k == 0 || !mn.is_multiple_of(atom_mn) || !k.is_multiple_of(atom_k) {
            return Err(FragError::Descriptor {
                reason: "tile is not a multiple of the atom",
            });
        }
        let (mn_atoms, k_atoms) = ((mn / atom_mn) as i64, (k / atom_k) as i64);
        let copies = lay!(Layout::from_flat(&[mn_atoms, k_atoms], &[k_atoms, 1]));
        let tiled = lay!(blocked_product(&self.plain_layout(), &copies));
        Ok(SwizzledLayout::new(self.element_swizzle(), tiled))
    }
}

/// The fields of a wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor
/// Format"; CuTe `GmmaDescriptor` in `cute/arch/mma_sm90_desc.hpp`), in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GmmaDescriptor {
    /// Shared-memory byte address of the operand tile (16-byte aligned).
    pub start_address: u32,
    /// Leading dimension byte offset (LBO). K-major interleave: distance between the
    /// two core matrices along K. MN-major swizzled: distance between swizzle-width
    /// chunks along MN. Unused (16, encoded 1) for K-major swizzled layouts.
    pub leading_byte_offset: u32,
    /// Stride dimension byte offset (SBO): distance between 8-row groups along MN
    /// (K-major; MN-major interleave: between 16-byte chunks along MN), or between
    /// 8-deep groups along K (MN-major swizzled).
    pub stride_byte_offset: u32,
    /// Matrix base offset: `(start_address >> 7) & 7` when a swizzled tile does not
    /// start on its pattern's repeat boundary, else 0 (PTX ISA).
    pub base_offset: u32,
    /// Swizzle mode.
    pub swizzle: SmemSwizzle,
}

impl GmmaDescriptor {
    /// Reads the descriptor of one wgmma operand tile off its layout, as CuTe's
    /// `make_gmma_desc<Major>` does, and checks that the layout is canonical.
    ///
    /// `layout` maps `(mn, k)` of the tile one wgmma reads (K = 32 bytes of elements)
    /// to element offsets from `start_address`, before the swizzle. Canonical forms,
    /// in bytes with `kb = k·e`, `mb = mn·e` (e the element bytes), W the swizzle
    /// width:
    ///
    /// - K, interleave: `16·(mn%8) + SBO·(mn/8) + kb%16 + LBO·(kb/16)`
    /// - K, swizzled: `W·(mn%8) + SBO·(mn/8) + kb`
    /// - MN, interleave: `mb%16 + SBO·(mb/16) + 16·(k%8) + LBO·(k/8)`
    /// - MN, swizzled: `mb%W + LBO·(mb/W) + W·(k%8) + SBO·(k/8)`
    ///
    /// A field whose group does not occur in the tile gets its packed value.
    pub const fn from_layout(
        major: Major,
        swizzle: SmemSwizzle,
        element_bits: u32,
        layout: &Layout,
        start_address: u32,
    ) -> Result<GmmaDescriptor, FragError> {
        if element_bits != 8 && element_bits != 16 && element_bits != 32 {
            return Err(FragError::ElementBits { bits: element_bits });
        }
        if layout.rank() != 2 {
            return Err(FragError::Descriptor {
                reason: "the operand layout must be rank 2",
            });
        }
        let bytes = (element_bits / 8) as i64;
        let mode_mn = lay!(layout.mode(0));
        let mode_k = lay!(layout.mode(1));
        let mn = lay!(mode_mn.size());
        let k = lay!(mode_k.size());
        let w = swizzle.width_bytes() as i64;
        if k * bytes != 32 {
            return Err(FragError::Descriptor {
                reason: "K must span 32 bytes (one dense wgmma)",
            });
        }
        // Byte offset of (m, kk).
        macro_rules! at {
            ($m:expr, $k:expr) => {
                bytes * (lay!(mode_mn.eval($m)) + lay!(mode_k.eval($k)))
            };
        }
        let (lbo, sbo) = match (major, swizzle) {
            (Major::K, SmemSwizzle::Interleave) => {
                if mn % 8 != 0 {
                    return Err(FragError::Descriptor {
                        reason: "MN must be a multiple of 8",
                    });
                }
                let sbo = if mn > 8 { at!(8, 0) } else { 128 };
                (at!(0, 16 / bytes), sbo)
            }
            (Major::K, _) => {
                if mn % 8 != 0 {
                    return Err(FragError::Descriptor {
                        reason: "MN must be a multiple of 8",
                    });
                }
                let sbo = if mn > 8 { at!(8, 0) } else { 8 * w };
                (16, sbo)
            }
            (Major::Mn, SmemSwizzle::Interleave) => {
                if (mn * bytes) % 16 != 0 {
                    return Err(FragError::Descriptor {
                        reason: "MN must span a multiple of 16 bytes",
                    });
                }
                let sbo = if mn * bytes > 16 {
                    at!(16 / bytes, 0)
                } else {
                    128
                };
                let lbo = if k > 8 { at!(0, 8) } else { 8 * w };
                (lbo, sbo)
            }
            (Major::Mn, _) => {
                if (mn * bytes) % w != 0 {
                    return Err(FragError::Descriptor {
                        reason: "MN must span a multiple of the swizzle width",
                    });
                }
                let lbo = if mn * bytes > w {
                    at!(w / bytes, 0)
                } else {
                    8 * w
                };
                let sbo = if k > 8 { at!(0, 8) } else { 8 * w };
                (lbo, sbo)
            }
        };
        // Check every element against the canonical form.
        let mut m = 0;
        while m < mn {
            let mut kk = 0;
            while kk < k {
                let (mb, kb) = (m * bytes, kk * bytes);
                let expected = match (major, swizzle) {
                    (Major::K, SmemSwizzle::Interleave) => {
                        16 * (m % 8) + sbo * (m / 8) + kb % 16 + lbo * (kb / 16)
                    }
                    (Major::K, _) => w * (m % 8) + sbo * (m / 8) + kb,
                    (Major::Mn, SmemSwizzle::Interleave) => {
                        mb % 16 + sbo * (mb / 16) + 16 * (kk % 8) + lbo * (kk / 8)
                    }
                    (Major::Mn, _) => mb % w + lbo * (mb / w) + w * (kk % 8) + sbo * (kk / 8),
                };
                if at!(m, kk) != expected {
                    return Err(FragError::Descriptor {
                        reason: "the layout is not a canonical wgmma layout for this mode",
                    });
                }
                kk += 1;
            }
            m += 1;
        }
        if !start_address.is_multiple_of(16) || start_address >= 1 << 18 {
            return Err(FragError::Descriptor {
                reason: "start address must be 16-byte aligned and below 256 KiB",
            });
        }
        if lbo < 0 || sbo < 0 || lbo % 16 != 0 || sbo % 16 != 0 || lbo >= 1 << 18 || sbo >= 1 << 18
        {
            return Err(FragError::Descriptor {
                reason: "LBO and SBO must be multiples of 16 below 256 KiB",
            });
        }
        let base_offset = match swizzle {
            SmemSwizzle::Interleave => 0,
            _ => {
                if !start_address.is_multiple_of(swizzle.repeat_bytes()) {
                    (start_address >> 7) & 7
                } else {
                    0
                }
            }
        };
        Ok(GmmaDescriptor {
            start_address,
            leading_byte_offset: lbo as u32,
            stride_byte_offset: sbo as u32,
            base_offset,
            swizzle,
        })
    }

    /// The 64-bit descriptor: start address, LBO and SBO in 16-byte units at bits
    /// `[0,14)`, `[16,30)`, `[32,46)`; base offset at `[49,52)`; layout type at `[62,64)`.
    pub const fn encode(&self) -> u64 {
        (((self.start_address >> 4) & 0x3fff) as u64)
            | ((((self.leading_byte_offset >> 4) & 0x3fff) as u64) << 16)
            | ((((self.stride_byte_offset >> 4) & 0x3fff) as u64) << 32)
            | (((self.base_offset & 7) as u64) << 49)
            | ((self.swizzle.layout_type() as u64) << 62)
    }
}

/// The "8-row interleaved brick" K-major layout of 16-bit elements from the reference
/// write-up (shared/reference/001, `wgmma_kmajor_idx`, used with LBO = 128 B):
/// `((8, rows/8), (8, 2, d/16)) : ((8, 8·row_stride), (1, 64, 128))`, `(row, d) ->
/// element`. Each 8 × 8 brick (one 16-byte core matrix per row) is contiguous; the two
/// bricks of a 16-wide K block are 64 elements (128 B) apart; K blocks 128 elements
/// apart; 8-row groups `8·row_stride` elements apart.
///
/// `rows` must be a multiple of 8, `d` of 16, and `row_stride` a multiple of 16 at
/// least `d` (usually `row_stride == d`).
pub const fn kmajor_interleaved_layout(
    rows: u32,
    d: u32,
    row_stride: u32,
) -> Result<Layout, FragError> {
    if rows == 0 || !rows.is_multiple_of(8) || d == 0 || !d.is_multiple_of(16) {
        return Err(FragError::Descriptor {
            reason: "rows must be a multiple of 8, d of 16",
        });
    }
    if row_stride < d || !row_stride.is_multiple_of(16) {
        return Err(FragError::Descriptor {
            reason: "row_stride must be a multiple of 16 and at least d",
        });
    }
    Ok(lay!(crate::util::layout2(
        &[8, (rows / 8) as i64],
        &[8, 2, (d / 16) as i64],
        &[8, 8 * row_stride as i64],
        &[1, 64, 128]
    )))
}
