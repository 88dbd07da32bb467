//! RS-mode wgmma A operands: the accumulator S of `Q·Kᵀ` reused in registers as the A
//! operand P of `P·V`.

use fragmask_layout::{right_inverse, Layout};

use crate::error::{lay, FragError};
use crate::util::literal;
use crate::wgmma::{WgmmaAccumulator, ATOM_M, WARPGROUP_THREADS};

/// CuTe's `ALayout_64x16`, the register A operand of a 16-bit wgmma (k16):
/// `((4,8,4),(2,2,2)):((128,1,16),(64,8,512))`, `(thread, value) -> m + 64*k`.
/// It equals `CLayout_64x16` (docs/architecture.md fact 5).
pub const A16_LAYOUT: Layout = literal(Layout::parse("((4,8,4),(2,2,2)):((128,1,16),(64,8,512))"));

/// CuTe's `ALayout_64x32`, the register A operand of an 8-bit wgmma (k32):
/// `((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))`, `(thread, value) -> m + 64*k`.
/// A thread holds 4 consecutive k per 32-bit register: `k = 4·quad_lane + {0..3}`
/// and `+16`, unlike the accumulator's `2·quad_lane + {0,1}` per 8 columns.
pub const A8_LAYOUT: Layout = literal(Layout::parse("((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))"));

/// The K order FlashAttention-3 gives the fp8 P operand when V is row-major:
/// logical k (0..32) of a k32 block reads accumulator column
/// `σ(k) = (k%2) + 8·((k/2)%2) + 2·((k/4)%4) + 16·(k/16)`, the layout
/// `(2,2,4,2):(1,8,2,16)`. After `permute_Cregs_fp8` each fp8 A register holds one
/// row's columns `{2q, 2q+1, 8+2q, 9+2q}` (+16), which is `ALayout_64x32` read
/// through σ; V's rows are loaded in the same σ order, so `P·V` is unchanged.
pub const FP8_K_PERMUTATION: Layout = literal(Layout::parse("(2,2,4,2):(1,8,2,16)"));

/// Where one accumulator register goes in an RS-mode A operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ASlot {
    /// The thread that must hold it as A (equal to the accumulator's thread when no
    /// cross-lane movement is needed).
    pub thread: u32,
    /// The k-block (16 columns for 16-bit A, 32 for 8-bit) of the A operand.
    pub k_block: u32,
    /// The 32-bit A register within the k-block (0..4).
    pub register: u32,
    /// The 16-bit half (16-bit A: 0 = low) or byte (8-bit A: 0..4, 0 = lowest).
    pub part: u32,
}

/// The A slot of accumulator register `acc_register` of `thread` (0..128) when the
/// m64nNk16 accumulator S is converted to a 16-bit A operand (P in `P·V`).
///
/// Computed with layouts: `CLayout_64xN` gives S's `(m, n)`; the A element
/// `(m, n % 16)` of k-block `n / 16` is looked up in the inverse of
/// [`A16_LAYOUT`]. The tests prove `thread` is unchanged and
/// `(k_block, register, part) = (i/8, (i%8)/2, i%2)`: registers `d[8j..8j+7]` become
/// the four A registers of k-block j, pairs `(d0,d1)..(d6,d7)`, lower column low.
pub const fn rs_a16_slot(n: u32, thread: u32, acc_register: u32) -> Result<ASlot, FragError> {
    a_slot(n, thread, acc_register, 16, &A16_LAYOUT, 2, false)
}

/// The A slot of accumulator register `acc_register` for an 8-bit (fp8) A operand,
/// [`A8_LAYOUT`]. With `permuted_k = false` the A element is placed at its true
/// column, which for most registers lies in another lane of the quad
/// (`ASlot::thread` differs): FA3's `permute_Aregs_fp8` moves them with quad
/// `__shfl_sync` and `__byte_perm`. With `permuted_k = true` the A operand's logical k
/// reads column [`FP8_K_PERMUTATION`]`(k)`, and every value stays in its thread
/// (FA3's `permute_Cregs_fp8` path, a 64-bit register swap).
pub const fn rs_a8_slot(
    n: u32,
    thread: u32,
    acc_register: u32,
    permuted_k: bool,
) -> Result<ASlot, FragError> {
    a_slot(n, thread, acc_register, 32, &A8_LAYOUT, 4, permuted_k)
}

const fn a_slot(
    n: u32,
    thread: u32,
    acc_register: u32,
    k_width: u32,
    a_layout: &Layout,
    parts_per_register: u32,
    permuted_k: bool,
) -> Result<ASlot, FragError> {
    let atom = match WgmmaAccumulator::new(n) {
        Ok(a) => a,
        Err(e) => return Err(e),
    };
    if !n.is_multiple_of(k_width) {
        return Err(FragError::IllegalN { n });
    }
    let (m, col) = match atom.coord(thread, acc_register) {
        Ok(c) => c,
        Err(e) => return Err(e),
    };
    let k_block = col / k_width;
    let mut k = (col % k_width) as i64;
    if permuted_k {
        // Logical k whose column is `col % 32`.
        k = lay!(lay!(right_inverse(&FP8_K_PERMUTATION)).eval(k));
    }
    let a_inverse = lay!(right_inverse(a_layout));
    let index = lay!(a_inverse.eval(m as i64 + ATOM_M as i64 * k));
    let threads = WARPGROUP_THREADS as i64;
    let value = (index / threads) as u32;
    Ok(ASlot {
        thread: (index % threads) as u32,
        k_block,
        register: value / parts_per_register,
        part: value % parts_per_register,
    })
}
