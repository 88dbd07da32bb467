//! The SM90 wgmma m64nNk16 f32 accumulator atom.

use fragmask_layout::Layout;

use crate::error::{lay, FragError};

/// Threads in a warpgroup.
pub const WARPGROUP_THREADS: u32 = 128;
/// Rows of a wgmma atom (M is always 64).
pub const ATOM_M: u32 = 64;

/// The accumulator of one `wgmma.mma_async.m64nNk16` (f32 accumulate, 16-bit inputs)
/// for one warpgroup: a 64 × N tile over 128 threads, N/2 f32 registers each.
///
/// Its thread-value layout is CuTe's `CLayout_64xN`
/// (`include/cute/atom/mma_traits_sm90_gmma.hpp`),
/// `((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`, mapping `(thread, register)` to the
/// column-major offset `m + 64*n` (PTX ISA, "Register fragments and shared memory
/// matrix layouts" for wgmma, accumulator D).
///
/// ```
/// use fragmask_gmma_frag::WgmmaAccumulator;
/// let atom = WgmmaAccumulator::new(64).unwrap();
/// assert_eq!(atom.registers(), 32);
/// // thread 37 (warp 1, lane 5), register 6: row 16 + 1 + 8, col 8 + 2
/// assert_eq!(atom.coord(37, 6), Ok((25, 10)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgmmaAccumulator {
    n: u32,
    c_layout: Layout,
}

impl WgmmaAccumulator {
    /// The m64nNk16 accumulator; N must be a multiple of 8 in `8..=256`.
    pub const fn new(n: u32) -> Result<WgmmaAccumulator, FragError> {
        if !is_legal_n(n) {
            return Err(FragError::IllegalN { n });
        }
        Ok(WgmmaAccumulator {
            n,
            c_layout: lay!(c_layout_64xn(n)),
        })
    }

    /// N, the atom's columns.
    pub const fn n(&self) -> u32 {
        self.n
    }

    /// Registers (f32 values) per thread: N/2.
    pub const fn registers(&self) -> u32 {
        self.n / 2
    }

    /// CuTe's `CLayout_64xN`: `(thread, register) -> m + 64*n`.
    pub const fn c_layout(&self) -> Layout {
        self.c_layout
    }

    /// `(row, col)` in the 64 × N tile of register `register` of thread `thread`
    /// (0..128), by evaluating [`Self::c_layout`].
    pub const fn coord(&self, thread: u32, register: u32) -> Result<(u32, u32), FragError> {
        if thread >= WARPGROUP_THREADS {
            return Err(FragError::ThreadOutOfRange {
                thread,
                threads: WARPGROUP_THREADS,
            });
        }
        if register >= self.registers() {
            return Err(FragError::ValueOutOfRange {
                value: register,
                values_per_thread: self.registers(),
            });
        }
        let index = thread as i64 + WARPGROUP_THREADS as i64 * register as i64;
        let offset = lay!(self.c_layout.eval(index));
        Ok((
            (offset % ATOM_M as i64) as u32,
            (offset / ATOM_M as i64) as u32,
        ))
    }
}

/// Whether `n` is a legal wgmma N for 16-bit inputs with f32 accumulation:
/// a multiple of 8 in `8..=256` (PTX ISA, `wgmma.mma_async` shapes).
pub const fn is_legal_n(n: u32) -> bool {
    n >= 8 && n <= 256 && n.is_multiple_of(8)
}

/// `((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`.
pub(crate) const fn c_layout_64xn(n: u32) -> Result<Layout, fragmask_layout::LayoutError> {
    crate::util::layout2(
        &[4, 8, 4],
        &[2, 2, (n / 8) as i64],
        &[128, 1, 16],
        &[64, 8, 512],
    )
}
