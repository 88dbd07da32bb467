//! The limits of one SM90 (H100) streaming multiprocessor that every kernel's geometry is
//! checked against, defined once (CUDA Programming Guide, "Technical Specifications per
//! Compute Capability", 9.0; PTX ISA 9.7.19.5 `setmaxnreg`).

/// Registers of the register file of one SM (65536), shared by its resident blocks.
pub const SM_REGISTERS: u32 = 65_536;
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
static_assertions::const_assert!(MAX_DYNAMIC_SMEM + RESERVED_PER_BLOCK <= SM_SHARED_BYTES);
