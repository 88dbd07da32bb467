//! The SM90 wgmma accumulator probe.
//!
//! Warpgroup `w` of the block computes one
//! `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16` with both operands
//! in shared memory:
//!
//! ```text
//! A_w[r][0] = r     A_w[r][1] = 1   A_w[r][2] = w       A_w[r][k>=3] = 0   (64 x 16)
//! B[0][c]   = 256   B[1][c]   = c   B[2][c]   = 16384   B[k>=3][c]   = 0   (16 x N)
//! D[r][c]   = 16384*w + 256*r + c
//! ```
//!
//! Every input is an integer below 256 or a power of two (exact in bf16), and
//! `D < 2^16` (exact in f32), so each accumulator register decodes to exactly
//! one `(warpgroup, row, col)`.
//!
//! Shared-memory operand layout: both A and B are K-major ("TN", no
//! transpose) in the no-swizzle canonical layout (CUTLASS `INTERLEAVE`,
//! descriptor swizzle mode 0). Its unit is the *core matrix*: 8 rows of 16
//! bytes (8 bf16 along K), 128 contiguous bytes. In units of 16 bytes the
//! canonical K-major layout is `((8,m),2):((1,SBO),LBO)`:
//! - LBO (leading dimension byte offset) = distance between the two core
//!   matrices along K (k 0..7 and k 8..15): [`WGMMA_K_LBO_BYTES`] = 128.
//! - SBO (stride dimension byte offset) = distance between core matrices
//!   adjacent along M (for A) or N (for B): [`WGMMA_MN_SBO_BYTES`] = 256.
//!
//! so the byte offset of element (mn, k) is
//! `(mn%8)*16 + (k%8)*2 + (k/8)*128 + (mn/8)*256`.
//!
//! Descriptor (PTX ISA, "Matrix Descriptor Format", sm_90):
//! bits 0-13 start address >> 4, bits 16-29 LBO >> 4, bits 32-45 SBO >> 4,
//! bits 49-51 base offset (0), bits 62-63 swizzle mode (0 = none).

use core::fmt::Write as _;

use crate::cuda::PRELUDE;
use crate::Error;

use super::exact_u32;

/// Name of the `extern "C"` kernel in every wgmma probe source.
/// Signature: `void fragmask_wgmma_probe(float* out)`.
pub const WGMMA_PROBE_KERNEL: &str = "fragmask_wgmma_probe";

/// Largest number of warpgroups per block the probe supports (384 threads).
///
/// Four warpgroups (512 threads) would cap a thread at 128 registers, too few
/// for the 128 accumulators of N = 256 (ptxas needs about 154).
pub const WGMMA_MAX_WARPGROUPS: u32 = 3;

/// LBO of the probe's K-major no-swizzle layout: bytes between the two K core matrices.
pub const WGMMA_K_LBO_BYTES: u32 = 128;

/// SBO of the probe's K-major no-swizzle layout: bytes between core matrices along M or N.
pub const WGMMA_MN_SBO_BYTES: u32 = 256;

/// Weight of the row in an encoded accumulator value (`D = 16384*w + 256*r + c`).
pub const WGMMA_ROW_SCALE: u32 = 256;

/// Weight of the warpgroup in an encoded accumulator value.
pub const WGMMA_WARPGROUP_SCALE: u32 = 16384;

/// The coordinate an accumulator register of the probe decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WgmmaCoord {
    /// Warpgroup that computed the value (it selects the A operand).
    pub warpgroup: u32,
    /// Row of the 64 x N accumulator tile, `0..64`.
    pub row: u32,
    /// Column of the 64 x N accumulator tile, `0..N`.
    pub col: u32,
}

/// A validated wgmma probe configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WgmmaProbe {
    n: u32,
    warpgroups: u32,
}

impl WgmmaProbe {
    /// Validates `n` (a multiple of 8 in `8..=256`) and `warpgroups`
    /// (`1..=WGMMA_MAX_WARPGROUPS`).
    pub fn new(n: u32, warpgroups: u32) -> Result<Self, Error> {
        if !(8..=256).contains(&n) || n % 8 != 0 {
            return Err(Error::InvalidWgmmaN { n });
        }
        if !(1..=WGMMA_MAX_WARPGROUPS).contains(&warpgroups) {
            return Err(Error::InvalidWarpgroups {
                warpgroups,
                max: WGMMA_MAX_WARPGROUPS,
            });
        }
        Ok(Self { n, warpgroups })
    }

    /// The `N` extent of the instruction.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// Warpgroups per block.
    pub fn warpgroups(&self) -> u32 {
        self.warpgroups
    }

    /// f32 accumulator registers per thread: `N / 2`.
    pub fn registers_per_thread(&self) -> u32 {
        self.n / 2
    }

    /// Threads per block: `128 * warpgroups`. The probe runs as one block.
    pub fn threads(&self) -> u32 {
        128 * self.warpgroups
    }

    /// Number of f32 values the kernel writes:
    /// `out[(warpgroup*128 + thread) * N/2 + register]`.
    pub fn out_len(&self) -> usize {
        self.threads() as usize * self.registers_per_thread() as usize
    }

    /// Index into `out` of `register` of `thread` (0..128) of `warpgroup`.
    pub fn out_index(&self, warpgroup: u32, thread: u32, register: u32) -> usize {
        (warpgroup as usize * 128 + thread as usize) * self.registers_per_thread() as usize
            + register as usize
    }

    /// Static shared memory the kernel declares, in bytes
    /// (one 64x16 A tile per warpgroup plus one N x 16 B tile).
    pub fn shared_bytes(&self) -> u32 {
        self.warpgroups * 64 * 16 * 2 + self.n * 16 * 2
    }

    /// Decodes one output value into the coordinate it encodes, or `None` if
    /// it is not a value the probe can produce for this configuration.
    pub fn decode(&self, value: f32) -> Option<WgmmaCoord> {
        let v = exact_u32(value)?;
        let warpgroup = v / WGMMA_WARPGROUP_SCALE;
        let rest = v % WGMMA_WARPGROUP_SCALE;
        let row = rest / WGMMA_ROW_SCALE;
        let col = rest % WGMMA_ROW_SCALE;
        (warpgroup < self.warpgroups && row < 64 && col < self.n).then_some(WgmmaCoord {
            warpgroup,
            row,
            col,
        })
    }

    /// The value the probe produces at `(warpgroup, row, col)`.
    pub fn encode(&self, coord: WgmmaCoord) -> f32 {
        (coord.warpgroup * WGMMA_WARPGROUP_SCALE + coord.row * WGMMA_ROW_SCALE + coord.col) as f32
    }

    /// Generates the CUDA C++ source (header-free; compile for `sm_90a`).
    pub fn source(&self) -> String {
        generate(self)
    }
}

/// CUDA source of the wgmma accumulator probe for `m64n{n}k16` with
/// `warpgroups` warpgroups in one block. See the module docs for the encoding.
///
/// Each thread writes its `n/2` accumulator registers, in raw PTX register
/// order, to `out[((warpgroup*128 + thread_in_warpgroup) * (n/2)) + i]`.
/// Launch as one block of `128 * warpgroups` threads with no dynamic shared
/// memory; the kernel is named [`WGMMA_PROBE_KERNEL`].
pub fn wgmma_accumulator_probe(n: u32, warpgroups: u32) -> Result<String, Error> {
    Ok(WgmmaProbe::new(n, warpgroups)?.source())
}

fn generate(p: &WgmmaProbe) -> String {
    let n = p.n;
    let w = p.warpgroups;
    let nreg = p.registers_per_thread();
    let mut s = String::with_capacity(8 * 1024);

    // Writing to a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(
        s,
        "// fragmask wgmma accumulator probe: m64n{n}k16, f32 += bf16 * bf16, {w} warpgroup(s).\n\
         // Generated by fragmask-kernels. Compile for sm_90a (wgmma needs the arch-specific target).\n\
         //\n\
         // Warpgroup w computes D = A_w * B with\n\
         //   A_w[r][0] = r,   A_w[r][1] = 1, A_w[r][2] = w,     A_w[r][k>=3] = 0   (64 x 16)\n\
         //   B[0][c]   = 256, B[1][c]   = c, B[2][c]   = 16384, B[k>=3][c]   = 0   (16 x {n})\n\
         // so the accumulator element (r, c) holds exactly 16384*w + 256*r + c.\n\
         // Thread t of warpgroup w writes its {nreg} registers in PTX order to\n\
         //   out[(w*128 + t) * {nreg} + i].\n"
    );
    s.push_str(PRELUDE);
    // The wgmma itself is the component library's (`family::ptx::wgmma_ss`), as every kernel issues it.
    s.push_str(&crate::family::ptx::wgmma_ss(n, "bf16"));
    let _ = writeln!(
        s,
        r#"
#define FM_N {n:<4}           // wgmma N extent
#define FM_WARPGROUPS {w:<4}  // warpgroups per block
#define FM_NREG {nreg:<4}        // f32 accumulator registers per thread (N/2)
#define FM_LBO_BYTES {lbo:<4}   // K-major no-swizzle: bytes between the 2 core matrices along K
#define FM_SBO_BYTES {sbo:<4}   // K-major no-swizzle: bytes between core matrices along M/N

// Element offset of (mn, k) in the no-swizzle K-major canonical layout
// ((8,m),(8,2)) : ((8 elems, SBO), (1 elem, LBO)), i.e. core matrices of 8 rows x 16 bytes.
//   bytes = (mn%8)*16 + (k%8)*2 + (k/8)*LBO + (mn/8)*SBO
__device__ __forceinline__ unsigned fm_kmajor_offset(unsigned mn, unsigned k) {{
    return (mn % 8u) * 8u + (k % 8u) + (k / 8u) * (FM_LBO_BYTES / 2u) + (mn / 8u) * (FM_SBO_BYTES / 2u);
}}

// wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format", sm_90):
//   bits  0-13: start address >> 4     bits 16-29: LBO >> 4     bits 32-45: SBO >> 4
//   bits 49-51: base offset (0)        bits 62-63: swizzle mode (0 = no swizzle)
__device__ __forceinline__ unsigned long long fm_wgmma_desc(const void* smem_ptr) {{
    const unsigned addr = fm_smem_u32(smem_ptr);
    unsigned long long desc = 0ull;
    desc |= (unsigned long long)((addr >> 4) & 0x3FFFu);
    desc |= (unsigned long long)((FM_LBO_BYTES >> 4) & 0x3FFFu) << 16;
    desc |= (unsigned long long)((FM_SBO_BYTES >> 4) & 0x3FFFu) << 32;
    return desc;
}}

extern "C" __global__ void __launch_bounds__({threads}, 1) {kernel}(float* out)
{{
    // One 64x16 A tile per warpgroup, one shared N x 16 B tile (B^T, K-major).
    __shared__ __align__(128) fm_bf16 smem_a[FM_WARPGROUPS * 64 * 16];
    __shared__ __align__(128) fm_bf16 smem_b[FM_N * 16];

    const unsigned tid = threadIdx.x;
    const unsigned warpgroup = tid / 128u;
    const unsigned thread_in_wg = tid % 128u;

    // ---- fill A: A_w[r][k] (row r of M, column k of K) ----
    for (unsigned idx = tid; idx < FM_WARPGROUPS * 64u * 16u; idx += blockDim.x) {{
        const unsigned wg = idx / (64u * 16u);
        const unsigned r = (idx / 16u) % 64u;
        const unsigned k = idx % 16u;
        const float v = (k == 0u) ? (float)r : (k == 1u) ? 1.0f : (k == 2u) ? (float)wg : 0.0f;
        smem_a[wg * 64u * 16u + fm_kmajor_offset(r, k)] = fm_bf16_from_exact(v);
    }}
    // ---- fill B: B[k][c], stored as B^T (row c of N, column k of K) ----
    for (unsigned idx = tid; idx < FM_N * 16u; idx += blockDim.x) {{
        const unsigned c = idx / 16u;
        const unsigned k = idx % 16u;
        const float v = (k == 0u) ? 256.0f : (k == 1u) ? (float)c : (k == 2u) ? 16384.0f : 0.0f;
        smem_b[fm_kmajor_offset(c, k)] = fm_bf16_from_exact(v);
    }}
    // Make the generic-proxy smem writes visible to the async proxy (wgmma), then sync.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();

    const unsigned long long desc_a = fm_wgmma_desc(&smem_a[warpgroup * 64u * 16u]);
    const unsigned long long desc_b = fm_wgmma_desc(&smem_b[0]);

    float d[FM_NREG];
#pragma unroll
    for (int i = 0; i < FM_NREG; ++i) {{ d[i] = 0.0f; }}
#pragma unroll
    for (int i = 0; i < FM_NREG; ++i) {{ fm_fence_operand(d[i]); }}

    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    // D = A * B (scale-d = 0: the zeroed d is not accumulated into; both operands K-major).
    fm_wgmma_m64n{n}k16_ss(d, desc_a, desc_b, 0);"#,
        threads = p.threads(),
        kernel = WGMMA_PROBE_KERNEL,
        lbo = WGMMA_K_LBO_BYTES,
        sbo = WGMMA_MN_SBO_BYTES,
    );
    let _ = writeln!(
        s,
        r#"    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
    for (int i = 0; i < FM_NREG; ++i) {{ fm_fence_operand(d[i]); }}

    // Raw register order i, exactly as the PTX fragment lists them.
    float* dst = out + (warpgroup * 128u + thread_in_wg) * FM_NREG;
#pragma unroll
    for (int i = 0; i < FM_NREG; ++i) {{ dst[i] = d[i]; }}
}}"#
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_n_and_warpgroups() {
        assert_eq!(WgmmaProbe::new(0, 1), Err(Error::InvalidWgmmaN { n: 0 }));
        assert_eq!(WgmmaProbe::new(12, 1), Err(Error::InvalidWgmmaN { n: 12 }));
        assert_eq!(
            WgmmaProbe::new(264, 1),
            Err(Error::InvalidWgmmaN { n: 264 })
        );
        assert!(matches!(
            WgmmaProbe::new(64, 0),
            Err(Error::InvalidWarpgroups { .. })
        ));
        assert!(matches!(
            WgmmaProbe::new(64, 4),
            Err(Error::InvalidWarpgroups { .. })
        ));
        for n in (8..=256).step_by(8) {
            assert!(WgmmaProbe::new(n, 1).is_ok(), "n = {n}");
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let p = WgmmaProbe::new(256, 3).unwrap();
        for warpgroup in 0..3 {
            for row in 0..64 {
                for col in 0..256 {
                    let c = WgmmaCoord {
                        warpgroup,
                        row,
                        col,
                    };
                    assert_eq!(p.decode(p.encode(c)), Some(c));
                }
            }
        }
        let small = WgmmaProbe::new(8, 1).unwrap();
        assert_eq!(small.decode(8.0), None, "col 8 is out of range for N = 8");
        assert_eq!(small.decode(16384.0), None, "warpgroup 1 does not exist");
        assert_eq!(small.decode(0.5), None);
    }

    #[test]
    fn out_index_matches_documented_order() {
        let p = WgmmaProbe::new(64, 2).unwrap();
        assert_eq!(p.out_len(), 256 * 32);
        assert_eq!(p.out_index(0, 0, 0), 0);
        assert_eq!(p.out_index(0, 1, 0), 32);
        assert_eq!(p.out_index(1, 0, 3), 128 * 32 + 3);
    }
}
