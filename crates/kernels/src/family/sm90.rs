//! The limits of one SM90 (H100) streaming multiprocessor that every kernel's geometry is
//! checked against, defined once (CUDA Programming Guide, "Technical Specifications per
//! Compute Capability", 9.0; PTX ISA 9.7.19.5 `setmaxnreg`).

/// Registers of the register file of one SM (65536), shared by its resident blocks.
pub const SM_REGISTERS: u32 = 65_536;
/// Registers a block of `threads` threads holds at `blocks_per_sm` blocks per SM: the
/// launch bounds' share per thread (`65536 / (threads * blocks_per_sm)`, in multiples of 8)
/// times its threads. `setmaxnreg` moves registers only among the block's own warps (the
/// SASS says `USETMAXREG.TRY_ALLOC.CTAPOOL`), so the warpgroups' counts after it must sum
/// within this pool: an `inc` beyond it waits forever (PTX ISA 9.7.19.5).
pub const fn block_register_pool(threads: u32, blocks_per_sm: u32) -> u32 {
    SM_REGISTERS / (threads * blocks_per_sm) / 8 * 8 * threads
}
/// Shared memory of one SM on sm_90 (228 KiB), of which each resident block reserves
/// [`RESERVED_PER_BLOCK`].
pub const SM_SHARED_BYTES: u32 = 233_472;
/// Shared memory the driver reserves per resident block.
pub const RESERVED_PER_BLOCK: u32 = 1024;
/// Largest dynamic shared memory one block may use on sm_90 (227 KiB).
pub const MAX_DYNAMIC_SMEM: u32 = 232_448;
/// Registers per thread of a warp-specialised kernel's producer warpgroup after
/// `setmaxnreg.dec` (the minimum the instruction allows, PTX ISA 9.7.19.5).
pub const PRODUCER_REGS: u32 = 24;

static_assertions::const_assert!(MAX_DYNAMIC_SMEM == 227 * 1024);
// Three warpgroups hold 168 registers per thread at launch: 504 per 128-thread lane triple,
// FlashAttention-3's 24 + 2 x 240.
static_assertions::const_assert!(block_register_pool(384, 1) == 504 * 128);
static_assertions::const_assert!(MAX_DYNAMIC_SMEM + RESERVED_PER_BLOCK <= SM_SHARED_BYTES);
