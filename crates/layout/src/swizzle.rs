//! `Swizzle<B,M,S>`: an XOR permutation of offsets, and a swizzle composed with a
//! layout.

use crate::error::LayoutError;
use crate::layout::Layout;
use crate::tri;

/// CuTe's `Swizzle<BBits, MBase, SShift>` (`include/cute/swizzle.hpp`):
/// `f(x) = x ^ ((x & yyy_mask) >> S)` where `yyy_mask` is `B` ones starting at bit
/// `M + max(0,S)`; a negative `S` shifts left instead. It is its own inverse.
///
/// ```
/// use fragmask_layout::Swizzle;
/// let sw = Swizzle::new(3, 4, 3).unwrap(); // the 128-byte swizzle on 16-bit elements' bytes
/// assert_eq!(sw.apply(0b000_0000_0000), 0);
/// assert_eq!(sw.apply(0b001_0000_0000), 0b001_0010_0000);
/// assert_eq!(sw.apply(sw.apply(1234)), 1234);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Swizzle {
    bits: u32,
    base: u32,
    shift: i32,
}

impl Swizzle {
    /// `Swizzle<bits, base, shift>`; needs `|shift| >= bits` (CuTe's precondition, so
    /// the masks do not overlap) and all masks within 63 bits.
    pub const fn new(bits: u32, base: u32, shift: i32) -> Result<Swizzle, LayoutError> {
        let abs_shift = shift.unsigned_abs();
        // Sum in u64: the u32 sum of user values could overflow.
        if abs_shift < bits || base as u64 + abs_shift as u64 + bits as u64 > 62 {
            return Err(LayoutError::Divisibility);
        }
        Ok(Swizzle { bits, base, shift })
    }

    /// B, the number of bits XOR-ed.
    pub const fn bits(&self) -> u32 {
        self.bits
    }

    /// M, the number of low bits kept fixed.
    pub const fn base(&self) -> u32 {
        self.base
    }

    /// S, the distance between the source and the target bits.
    pub const fn shift(&self) -> i32 {
        self.shift
    }

    /// The bits that are read (`yyy` in CuTe).
    pub const fn source_mask(&self) -> i64 {
        let low = if self.shift > 0 { self.shift as u32 } else { 0 };
        ((1i64 << self.bits) - 1) << (self.base + low)
    }

    /// The bits that are flipped (`zzz` in CuTe).
    pub const fn target_mask(&self) -> i64 {
        let low = if self.shift < 0 {
            (-self.shift) as u32
        } else {
            0
        };
        ((1i64 << self.bits) - 1) << (self.base + low)
    }

    /// `f(offset)`.
    pub const fn apply(&self, offset: i64) -> i64 {
        let picked = offset & self.source_mask();
        let moved = if self.shift >= 0 {
            picked >> self.shift
        } else {
            picked << (-self.shift)
        };
        offset ^ moved
    }

    /// The smallest power-of-two domain on which the swizzle is a bijection:
    /// `2^(M + |S| + B)`.
    pub const fn period(&self) -> i64 {
        1i64 << (self.base + self.shift.unsigned_abs() + self.bits)
    }
}

/// `swizzle ∘ layout` (CuTe's `ComposedLayout<Swizzle, 0, Layout>`):
/// `f(i) = swizzle(layout(i))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwizzledLayout {
    /// The XOR permutation applied last.
    pub swizzle: Swizzle,
    /// The layout applied first.
    pub layout: Layout,
}

impl SwizzledLayout {
    /// `swizzle ∘ layout`.
    pub const fn new(swizzle: Swizzle, layout: Layout) -> SwizzledLayout {
        SwizzledLayout { swizzle, layout }
    }

    /// `swizzle(layout(index))`.
    pub const fn eval(&self, index: i64) -> Result<i64, LayoutError> {
        Ok(self.swizzle.apply(tri!(self.layout.eval(index))))
    }

    /// Domain size, that of the layout.
    pub const fn size(&self) -> Result<i64, LayoutError> {
        self.layout.size()
    }
}

impl core::fmt::Display for Swizzle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Sw<{},{},{}>", self.bits, self.base, self.shift)
    }
}

impl core::fmt::Display for SwizzledLayout {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} o {}", self.swizzle, self.layout)
    }
}
