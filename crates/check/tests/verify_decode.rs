//! The verify decoders, exercised on *simulated* probe output (no GPU):
//! output synthesised from a known-true layout must pass, and any other
//! layout must be reported with its mismatches.

#[path = "../../host/tests/common/mod.rs"]
mod common;

use common::{fact1_wgmma, fact4_a, fact4_b, fact4_c};
use fragmask_check::verify::{
    check_mma_sync_a, check_mma_sync_b, check_mma_sync_c, check_wgmma, observe_mma_sync,
    MAX_LISTED_MISMATCHES,
};
use fragmask_host::kernels::probe::{
    MmaSyncProbe, MmaSyncSection, WgmmaCoord, WgmmaProbe, MMA_SYNC_PROBE_OUT_LEN,
};

/// What a GPU whose accumulator follows `layout` would write for `probe`.
fn simulate_wgmma(probe: &WgmmaProbe, layout: impl Fn(u32, u32) -> (u32, u32)) -> Vec<f32> {
    let mut out = vec![f32::NAN; probe.out_len()];
    for warpgroup in 0..probe.warpgroups() {
        for t in 0..128 {
            for i in 0..probe.registers_per_thread() {
                let (row, col) = layout(t, i);
                out[probe.out_index(warpgroup, t, i)] = probe.encode(WgmmaCoord {
                    warpgroup,
                    row,
                    col,
                });
            }
        }
    }
    out
}

#[test]
fn wgmma_fact1_passes_on_simulated_hardware() {
    for (n, wg) in [(8, 1), (64, 2), (256, 3)] {
        let probe = WgmmaProbe::new(n, wg).unwrap();
        let raw = simulate_wgmma(&probe, fact1_wgmma);
        let report = check_wgmma(&probe, &raw, fact1_wgmma).unwrap();
        assert!(report.passed(), "{report}");
        assert_eq!(report.checked, (wg * 128 * n / 2) as usize);
    }
}

#[test]
fn wgmma_writeup_formula_is_rejected() {
    // The write-up's rows (row_base, row_base + 1), row_base = 16*warp + 2*quad.
    let writeup = |t: u32, i: u32| {
        let row = 16 * (t / 32) + 2 * ((t % 32) / 4) + (i / 2) % 2;
        let col = 8 * (i / 4) + 2 * (t % 4) + (i % 2);
        (row, col)
    };
    let probe = WgmmaProbe::new(64, 1).unwrap();
    let raw = simulate_wgmma(&probe, fact1_wgmma);
    let report = check_wgmma(&probe, &raw, writeup).unwrap();
    assert!(!report.passed());
    // Register by register the rows agree only where quad + 8*b == 2*quad + b
    // (quad 0 with b = 0, quad 7 with b = 1): 2 * 4 lanes * 16 registers * 4 warps.
    assert_eq!(report.matches, 512, "{report}");
    assert_eq!(report.mismatches.len(), MAX_LISTED_MISMATCHES);
    assert!(report.to_string().contains("more"));
}

#[test]
fn wgmma_detects_crossed_warpgroups_and_garbage() {
    let probe = WgmmaProbe::new(16, 2).unwrap();
    let mut raw = simulate_wgmma(&probe, fact1_wgmma);
    // Warpgroup 1's thread 0 register 0 shows warpgroup 0's value.
    raw[probe.out_index(1, 0, 0)] = probe.encode(WgmmaCoord {
        warpgroup: 0,
        row: 0,
        col: 0,
    });
    raw[probe.out_index(0, 5, 1)] = f32::NAN; // never written
    let report = check_wgmma(&probe, &raw, fact1_wgmma).unwrap();
    assert_eq!(report.mismatch_count, 2, "{report}");
    assert!(report
        .mismatches
        .iter()
        .any(|m| m.detail.contains("warpgroup 0")));
    assert!(report.mismatches.iter().any(|m| m.observed.is_none()));
    // Wrong buffer length is an error, not a panic.
    assert!(check_wgmma(&probe, &raw[1..], fact1_wgmma).is_err());
}

/// Inverse of a (lane, value) -> coordinate layout over `values` values per lane.
fn owner(layout: impl Fn(u32, u32) -> (u32, u32), values: u32, coord: (u32, u32)) -> (u32, u32) {
    for lane in 0..32 {
        for v in 0..values {
            if layout(lane, v) == coord {
                return (lane, v);
            }
        }
    }
    panic!("layout does not cover {coord:?}");
}

/// What a GPU with fragment layouts `a`, `b`, `c` would write for the mma.sync probe.
fn simulate_mma_sync(
    a: impl Fn(u32, u32) -> (u32, u32) + Copy,
    b: impl Fn(u32, u32) -> (u32, u32) + Copy,
    c: impl Fn(u32, u32) -> (u32, u32) + Copy,
) -> Vec<f32> {
    let mut out = vec![f32::NAN; MMA_SYNC_PROBE_OUT_LEN];
    for lane in 0..32 {
        for r in 0..4 {
            let (row, n) = c(lane, r);
            out[MmaSyncSection::C.out_index(lane, r)] = MmaSyncProbe::encode_c(row, n);
            let (al, av) = owner(a, 8, (row, n));
            out[MmaSyncSection::AKLow.out_index(lane, r)] = MmaSyncProbe::encode_a(al, av);
            let (al, av) = owner(a, 8, (row, n + 8));
            out[MmaSyncSection::AKHigh.out_index(lane, r)] = MmaSyncProbe::encode_a(al, av);
            let (bl, bv) = owner(b, 4, (row, n));
            out[MmaSyncSection::B.out_index(lane, r)] = MmaSyncProbe::encode_b(bl, bv);
        }
    }
    out
}

#[test]
fn mma_sync_fact4_passes_on_simulated_hardware() {
    let raw = simulate_mma_sync(fact4_a, fact4_b, fact4_c);
    let obs = observe_mma_sync(&raw).unwrap();
    assert!(obs.conflicts.is_empty(), "{:?}", obs.conflicts);
    let c = check_mma_sync_c(&obs, fact4_c);
    let a = check_mma_sync_a(&obs, fact4_a);
    let b = check_mma_sync_b(&obs, fact4_b);
    assert!(c.passed(), "{c}");
    assert!(a.passed(), "{a}");
    assert!(b.passed(), "{b}");
    assert_eq!((c.checked, a.checked, b.checked), (128, 256, 128));
}

#[test]
fn mma_sync_fact4_matches_the_ptx_isa_tables() {
    // The PTX ISA's m16n8k16 tables (g = lane/4, q = lane%4), written independently.
    for lane in 0..32 {
        let (g, q) = (lane / 4, lane % 4);
        for r in 0..4 {
            assert_eq!(fact4_c(lane, r), (g + 8 * (r / 2), 2 * q + r % 2));
        }
        for v in 0..8 {
            assert_eq!(
                fact4_a(lane, v),
                (g + 8 * ((v / 2) % 2), 2 * q + v % 2 + 8 * (v / 4))
            );
        }
        for v in 0..4 {
            assert_eq!(fact4_b(lane, v), (2 * q + v % 2 + 8 * (v / 2), g));
        }
    }
}

#[test]
fn mma_sync_wrong_a_layout_is_reported() {
    // Hardware whose A swaps the row-half and k-half value bits.
    let swapped = |lane: u32, v: u32| fact4_a(lane, (v & 1) | ((v & 2) << 1) | ((v & 4) >> 1));
    let raw = simulate_mma_sync(swapped, fact4_b, fact4_c);
    let obs = observe_mma_sync(&raw).unwrap();
    assert!(check_mma_sync_c(&obs, fact4_c).passed());
    assert!(check_mma_sync_b(&obs, fact4_b).passed());
    let a = check_mma_sync_a(&obs, fact4_a);
    assert!(!a.passed());
    assert_eq!(a.mismatch_count, 128, "{a}");
    assert!(check_mma_sync_a(&obs, swapped).passed());
}

#[test]
fn mma_sync_garbage_is_reported_not_panicking() {
    let obs = observe_mma_sync(&vec![f32::NAN; MMA_SYNC_PROBE_OUT_LEN]).unwrap();
    let c = check_mma_sync_c(&obs, fact4_c);
    assert_eq!(c.matches, 0);
    assert_eq!(check_mma_sync_a(&obs, fact4_a).matches, 0);
    assert!(observe_mma_sync(&[0.0; 3]).is_err());
}
