//! The SM80 `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` probe.
//!
//! One warp runs four products and writes each thread's four f32 result
//! registers (raw PTX order) into four sections of `out`
//! (see [`MmaSyncSection`]):
//!
//! 1. **C** ([`MmaSyncSection::C`]): `A[r][0] = r, A[r][1] = 1`,
//!    `B[0][n] = 256, B[1][n] = n`, zero elsewhere, so `D[r][n] = 256*r + n`.
//!    A result register decodes straight to its `(row, col)`.
//! 2. **A, k 0..8** ([`MmaSyncSection::AKLow`]) and **A, k 8..16**
//!    ([`MmaSyncSection::AKHigh`]): every thread fills its own A registers
//!    with *identity codes* `1 + 8*lane + v` (v = 0..8 is the bf16 value
//!    index, value `v` in register `v/2`, low half for even `v`), and B is a
//!    one-hot selector `B[k][n] = (k == n + 8h)`. Then `D[r][n] = A[r][n+8h]`
//!    = the code of the thread and value the hardware took A(r, n+8h) from.
//! 3. **B** ([`MmaSyncSection::B`]): every thread fills its B registers with
//!    codes `1 + 4*lane + v` (v = 0..4), and A is the 16x16 identity, so
//!    `D[r][n] = B[r][n]` = the code of the thread and value that supplied
//!    B(k = r, n).
//!
//! The A and B probes are *products*: they prove how the hardware interprets
//! the registers, not how this kernel loaded them. Their readout needs the
//! C layout (which result register holds `D[r][n]`); the host takes it from
//! section 1 of the same run, and the selector operand (B in the A probe, A
//! in the B probe) is loaded with the PTX ISA's documented fragment
//! convention. The C probe itself loads A and B with the documented
//! conventions. So all four sections agree only if the three documented
//! layouts are mutually consistent with the hardware; a wrong convention
//! shows up as undecodable or misplaced values.
//!
//! Documented conventions (PTX ISA, "Matrix Fragments for mma.m16n8k16",
//! 16-bit types), with `g = lane / 4`, `q = lane % 4`:
//! - A (16x16, row-major), value v in 0..8: `row = g + 8*((v/2)%2)`,
//!   `k = 2q + v%2 + 8*(v/4)`.
//! - B (16x8, "col"), value v in 0..4: `k = 2q + v%2 + 8*(v/2)`, `n = g`.
//! - C/D (16x8 f32), register i in 0..4: `row = g + 8*(i/2)`, `col = 2q + i%2`.

use core::fmt::Write as _;

use crate::cuda::PRELUDE;

use super::exact_u32;

/// Name of the `extern "C"` kernel. Signature: `void fragmask_mma_sync_probe(float* out)`.
pub const MMA_SYNC_PROBE_KERNEL: &str = "fragmask_mma_sync_probe";

/// Threads per block: one warp. Launch one block.
pub const MMA_SYNC_PROBE_THREADS: u32 = 32;

/// f32 values written: four sections of 32 threads x 4 registers.
pub const MMA_SYNC_PROBE_OUT_LEN: usize = 4 * 32 * 4;

/// The four output sections of the mma.sync probe, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MmaSyncSection {
    /// `D[r][n] = 256*r + n`: reveals the C/D fragment.
    C,
    /// A probe with selector for k in 0..8: `D[r][n] = code of A(r, n)`.
    AKLow,
    /// A probe with selector for k in 8..16: `D[r][n] = code of A(r, n + 8)`.
    AKHigh,
    /// B probe with identity A: `D[r][n] = code of B(r, n)`.
    B,
}

impl MmaSyncSection {
    /// All sections in output order.
    pub const ALL: [MmaSyncSection; 4] = [Self::C, Self::AKLow, Self::AKHigh, Self::B];

    /// Index of this section's first value in `out`.
    pub fn offset(self) -> usize {
        let i = match self {
            Self::C => 0,
            Self::AKLow => 1,
            Self::AKHigh => 2,
            Self::B => 3,
        };
        i * 128
    }

    /// Index into `out` of `register` (0..4) of `lane` (0..32) in this section.
    pub fn out_index(self, lane: u32, register: u32) -> usize {
        self.offset() + lane as usize * 4 + register as usize
    }
}

/// Encodings and decodings of the mma.sync probe's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MmaSyncProbe;

impl MmaSyncProbe {
    /// Value of `D[row][col]` in the C section.
    pub fn encode_c(row: u32, col: u32) -> f32 {
        (256 * row + col) as f32
    }

    /// `(row, col)` of a C-section value, if it is one the probe can produce.
    pub fn decode_c(value: f32) -> Option<(u32, u32)> {
        let v = exact_u32(value)?;
        let (row, col) = (v / 256, v % 256);
        (row < 16 && col < 8).then_some((row, col))
    }

    /// Identity code of A value `v` (0..8) of `lane`: `1 + 8*lane + v`.
    pub fn encode_a(lane: u32, v: u32) -> f32 {
        (1 + 8 * lane + v) as f32
    }

    /// `(lane, v)` of an A-section value.
    pub fn decode_a(value: f32) -> Option<(u32, u32)> {
        let code = exact_u32(value)?.checked_sub(1)?;
        (code < 256).then_some((code / 8, code % 8))
    }

    /// Identity code of B value `v` (0..4) of `lane`: `1 + 4*lane + v`.
    pub fn encode_b(lane: u32, v: u32) -> f32 {
        (1 + 4 * lane + v) as f32
    }

    /// `(lane, v)` of a B-section value.
    pub fn decode_b(value: f32) -> Option<(u32, u32)> {
        let code = exact_u32(value)?.checked_sub(1)?;
        (code < 128).then_some((code / 4, code % 4))
    }

    /// Generates the CUDA C++ source (header-free; any sm_80+ target, including sm_90a).
    pub fn source() -> String {
        generate()
    }
}

/// CUDA source of the mma.sync m16n8k16 probe (C, A and B fragments).
///
/// Launch one block of [`MMA_SYNC_PROBE_THREADS`] threads; `out` must hold
/// [`MMA_SYNC_PROBE_OUT_LEN`] floats. Section layout: [`MmaSyncSection`].
pub fn mma_sync_probe() -> String {
    generate()
}

fn generate() -> String {
    let mut s = String::with_capacity(8 * 1024);
    s.push_str(
        "// fragmask mma.sync probe: m16n8k16 .row.col f32 += bf16 * bf16, one warp.\n\
         // Generated by fragmask-kernels. Sections of out (each lane*4 + register):\n\
         //   [  0,128) C probe: D[r][n] = 256*r + n\n\
         //   [128,256) A probe, B = one-hot selector k == n     : D[r][n] = code of A(r, n)\n\
         //   [256,384) A probe, B = one-hot selector k == n + 8 : D[r][n] = code of A(r, n+8)\n\
         //   [384,512) B probe, A = 16x16 identity              : D[r][n] = code of B(r, n)\n\
         // A codes: 1 + 8*lane + v (v = bf16 value index 0..8); B codes: 1 + 4*lane + v (v = 0..4).\n",
    );
    s.push_str(PRELUDE);
    // The mma.sync itself is the component library's (`family::ptx::mma_sync_16816`).
    s.push_str(&crate::family::ptx::mma_sync_16816("bf16"));
    let _ = writeln!(
        s,
        r#"
// ---- documented fragment conventions (PTX ISA, mma.m16n8k16, 16-bit A/B, f32 C) ----
// g = lane / 4 (groupID), q = lane % 4 (threadID_in_group)
// A value v (0..8) of a lane: row = g + 8*((v/2)%2), k = 2q + v%2 + 8*(v/4)
__device__ __forceinline__ unsigned fm_a_row(unsigned lane, unsigned v) {{ return lane / 4u + 8u * ((v / 2u) % 2u); }}
__device__ __forceinline__ unsigned fm_a_k(unsigned lane, unsigned v)   {{ return 2u * (lane % 4u) + v % 2u + 8u * (v / 4u); }}
// B value v (0..4) of a lane: k = 2q + v%2 + 8*(v/2), n = g
__device__ __forceinline__ unsigned fm_b_k(unsigned lane, unsigned v)   {{ return 2u * (lane % 4u) + v % 2u + 8u * (v / 2u); }}
__device__ __forceinline__ unsigned fm_b_n(unsigned lane, unsigned v)   {{ (void)v; return lane / 4u; }}

// One m16n8k16 product, D = A * B: the component library's fm_mma_16816 on a zeroed D.
__device__ __forceinline__ void fm_mma_m16n8k16(float (&d)[4], const unsigned a[4], const unsigned b[2]) {{
    d[0] = d[1] = d[2] = d[3] = 0.0f;
    fm_mma_16816(d, a[0], a[1], a[2], a[3], b[0], b[1]);
}}

// Raw result registers of this lane into a section: out[section*128 + lane*4 + i].
__device__ __forceinline__ void fm_store_section(float* out, unsigned section, unsigned lane, const float d[4]) {{
#pragma unroll
    for (int i = 0; i < 4; ++i) {{ out[section * 128u + lane * 4u + i] = d[i]; }}
}}

extern "C" __global__ void __launch_bounds__(32, 1) {kernel}(float* out)
{{
    const unsigned lane = threadIdx.x % 32u;
    unsigned a[4];
    unsigned b[2];
    float d[4];

    // ---- section 0: C probe. A[r][0] = r, A[r][1] = 1; B[0][n] = 256, B[1][n] = n ----
#pragma unroll
    for (unsigned j = 0; j < 4u; ++j) {{
        fm_bf16 h[2];
#pragma unroll
        for (unsigned e = 0; e < 2u; ++e) {{
            const unsigned v = 2u * j + e;
            const unsigned r = fm_a_row(lane, v), k = fm_a_k(lane, v);
            h[e] = fm_bf16_from_exact(k == 0u ? (float)r : k == 1u ? 1.0f : 0.0f);
        }}
        a[j] = fm_pack_bf16x2(h[0], h[1]);
    }}
#pragma unroll
    for (unsigned j = 0; j < 2u; ++j) {{
        fm_bf16 h[2];
#pragma unroll
        for (unsigned e = 0; e < 2u; ++e) {{
            const unsigned v = 2u * j + e;
            const unsigned k = fm_b_k(lane, v), n = fm_b_n(lane, v);
            h[e] = fm_bf16_from_exact(k == 0u ? 256.0f : k == 1u ? (float)n : 0.0f);
        }}
        b[j] = fm_pack_bf16x2(h[0], h[1]);
    }}
    fm_mma_m16n8k16(d, a, b);
    fm_store_section(out, 0u, lane, d);

    // ---- sections 1 and 2: A probe. A registers hold identity codes 1 + 8*lane + v ----
#pragma unroll
    for (unsigned j = 0; j < 4u; ++j) {{
        a[j] = fm_pack_bf16x2(fm_bf16_from_exact((float)(1u + 8u * lane + 2u * j)),
                              fm_bf16_from_exact((float)(1u + 8u * lane + 2u * j + 1u)));
    }}
#pragma unroll
    for (unsigned half = 0; half < 2u; ++half) {{
        // B[k][n] = 1 if k == n + 8*half: D[r][n] = A[r][n + 8*half].
#pragma unroll
        for (unsigned j = 0; j < 2u; ++j) {{
            fm_bf16 h[2];
#pragma unroll
            for (unsigned e = 0; e < 2u; ++e) {{
                const unsigned v = 2u * j + e;
                const unsigned k = fm_b_k(lane, v), n = fm_b_n(lane, v);
                h[e] = fm_bf16_from_exact(k == n + 8u * half ? 1.0f : 0.0f);
            }}
            b[j] = fm_pack_bf16x2(h[0], h[1]);
        }}
        fm_mma_m16n8k16(d, a, b);
        fm_store_section(out, 1u + half, lane, d);
    }}

    // ---- section 3: B probe. B registers hold identity codes 1 + 4*lane + v; A = identity ----
#pragma unroll
    for (unsigned j = 0; j < 2u; ++j) {{
        b[j] = fm_pack_bf16x2(fm_bf16_from_exact((float)(1u + 4u * lane + 2u * j)),
                              fm_bf16_from_exact((float)(1u + 4u * lane + 2u * j + 1u)));
    }}
#pragma unroll
    for (unsigned j = 0; j < 4u; ++j) {{
        fm_bf16 h[2];
#pragma unroll
        for (unsigned e = 0; e < 2u; ++e) {{
            const unsigned v = 2u * j + e;
            h[e] = fm_bf16_from_exact(fm_a_row(lane, v) == fm_a_k(lane, v) ? 1.0f : 0.0f);
        }}
        a[j] = fm_pack_bf16x2(h[0], h[1]);
    }}
    fm_mma_m16n8k16(d, a, b);
    fm_store_section(out, 3u, lane, d);
}}"#,
        kernel = MMA_SYNC_PROBE_KERNEL,
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for lane in 0..32 {
            for v in 0..8 {
                assert_eq!(
                    MmaSyncProbe::decode_a(MmaSyncProbe::encode_a(lane, v)),
                    Some((lane, v))
                );
            }
            for v in 0..4 {
                assert_eq!(
                    MmaSyncProbe::decode_b(MmaSyncProbe::encode_b(lane, v)),
                    Some((lane, v))
                );
            }
        }
        for row in 0..16 {
            for col in 0..8 {
                assert_eq!(
                    MmaSyncProbe::decode_c(MmaSyncProbe::encode_c(row, col)),
                    Some((row, col))
                );
            }
        }
        assert_eq!(
            MmaSyncProbe::decode_a(0.0),
            None,
            "0 means no A element arrived"
        );
        assert_eq!(MmaSyncProbe::decode_b(0.0), None);
        assert_eq!(MmaSyncProbe::decode_c(8.0), None, "col 8 is out of range");
    }

    #[test]
    fn codes_are_exact_in_bf16() {
        // bf16 keeps 8 significant bits: every integer in 0..=256 is exact.
        // The largest code is 1 + 8*31 + 7 = 256.
        assert_eq!(MmaSyncProbe::encode_a(31, 7), 256.0);
        assert_eq!(MmaSyncProbe::encode_b(31, 3), 128.0);
    }

    #[test]
    fn sections_do_not_overlap() {
        let mut seen = vec![false; MMA_SYNC_PROBE_OUT_LEN];
        for s in MmaSyncSection::ALL {
            for lane in 0..32 {
                for r in 0..4 {
                    let i = s.out_index(lane, r);
                    assert!(!seen[i]);
                    seen[i] = true;
                }
            }
        }
        assert!(seen.iter().all(|&b| b));
    }
}
