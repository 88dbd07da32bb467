//! Hardware truth: run the probes of `fragmask_kernels::probe` and compare
//! every register of every thread against an expected fragment layout.
//!
//! Two layers:
//! - **Pure checks** ([`check_wgmma`], [`observe_mma_sync`],
//!   [`check_mma_sync_c`], [`check_mma_sync_a`], [`check_mma_sync_b`]) decode
//!   raw probe output and compare it with a closure. They need no GPU and
//!   are unit-tested on simulated output.
//! - **Runs** ([`Verifier`] and the `verify_*` functions) compile, launch
//!   and read back the probe, then apply the checks.
//!
//! Expected closures map `(thread, value)` to a coordinate:
//! - wgmma: `(thread in warpgroup 0..128, register 0..N/2) -> (row, col)` of the
//!   64 x N accumulator. Every warpgroup is checked against the same closure.
//! - mma.sync C: `(lane, register 0..4) -> (row 0..16, col 0..8)`.
//! - mma.sync A: `(lane, value 0..8) -> (row 0..16, k 0..16)`; value `v` is the
//!   bf16 element in register `v/2`, low half for even `v`.
//! - mma.sync B: `(lane, value 0..4) -> (k 0..16, n 0..8)`, same convention.
//!
//! How the mma.sync A and B observations are read out (the C layout measured
//! in the same run locates each product element) is described in
//! `fragmask_kernels::probe` (module `mma_sync`).

use std::fmt;
use std::sync::Arc;

use fragmask_host::cudarc::driver::CudaStream;
use fragmask_kernels::probe::{MmaSyncProbe, MmaSyncSection, WgmmaProbe, MMA_SYNC_PROBE_OUT_LEN};

use fragmask_host::launch::OutputKernel;
use fragmask_host::{Compiler, Device, Error, Result};

/// How many mismatches a report lists in full.
pub const MAX_LISTED_MISMATCHES: usize = 16;

/// One register whose hardware content differs from the expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Warpgroup (always 0 for mma.sync).
    pub warpgroup: u32,
    /// Thread within the warpgroup (lane for mma.sync).
    pub thread: u32,
    /// Register or value index.
    pub value: u32,
    /// What the closure said.
    pub expected: (u32, u32),
    /// What the hardware said; `None` if nothing decodable was observed.
    pub observed: Option<(u32, u32)>,
    /// A short human-readable explanation.
    pub detail: String,
}

/// The outcome of comparing one probe against an expected layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// What was probed, e.g. `wgmma m64n64k16 accumulator, 2 warpgroup(s)`.
    pub probe: String,
    /// Registers (or values) compared.
    pub checked: usize,
    /// How many matched.
    pub matches: usize,
    /// How many did not.
    pub mismatch_count: usize,
    /// The first [`MAX_LISTED_MISMATCHES`] mismatches.
    pub mismatches: Vec<Mismatch>,
}

impl ProbeReport {
    fn new(probe: String) -> Self {
        Self {
            probe,
            checked: 0,
            matches: 0,
            mismatch_count: 0,
            mismatches: Vec::new(),
        }
    }

    fn record(&mut self, ok: bool, mismatch: impl FnOnce() -> Mismatch) {
        self.checked += 1;
        if ok {
            self.matches += 1;
        } else {
            self.mismatch_count += 1;
            if self.mismatches.len() < MAX_LISTED_MISMATCHES {
                self.mismatches.push(mismatch());
            }
        }
    }

    /// True when something was checked and everything matched.
    pub fn passed(&self) -> bool {
        self.checked > 0 && self.mismatch_count == 0 && self.matches == self.checked
    }
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} of {} match, {} mismatch(es)",
            self.probe, self.matches, self.checked, self.mismatch_count
        )?;
        for m in &self.mismatches {
            write!(
                f,
                "\n  warpgroup {} thread {} value {}: expected {:?}, observed {}",
                m.warpgroup,
                m.thread,
                m.value,
                m.expected,
                match m.observed {
                    Some(o) => format!("{o:?}"),
                    None => "nothing decodable".to_string(),
                }
            )?;
            if !m.detail.is_empty() {
                write!(f, " ({})", m.detail)?;
            }
        }
        if self.mismatch_count > self.mismatches.len() {
            write!(
                f,
                "\n  ... {} more",
                self.mismatch_count - self.mismatches.len()
            )?;
        }
        Ok(())
    }
}

/// Compares raw wgmma probe output with `expected`.
pub fn check_wgmma(
    probe: &WgmmaProbe,
    raw: &[f32],
    expected: impl Fn(u32, u32) -> (u32, u32),
) -> Result<ProbeReport> {
    if raw.len() != probe.out_len() {
        return Err(Error::InvalidArgument(format!(
            "wgmma probe output has {} values, expected {}",
            raw.len(),
            probe.out_len()
        )));
    }
    let mut report = ProbeReport::new(format!(
        "wgmma m64n{}k16 accumulator, {} warpgroup(s)",
        probe.n(),
        probe.warpgroups()
    ));
    for wg in 0..probe.warpgroups() {
        for t in 0..128 {
            for i in 0..probe.registers_per_thread() {
                let value = raw[probe.out_index(wg, t, i)];
                let exp = expected(t, i);
                let decoded = probe.decode(value);
                let observed = decoded.map(|c| (c.row, c.col));
                let ok = decoded.is_some_and(|c| c.warpgroup == wg && (c.row, c.col) == exp);
                report.record(ok, || Mismatch {
                    warpgroup: wg,
                    thread: t,
                    value: i,
                    expected: exp,
                    observed,
                    detail: match decoded {
                        None => format!("raw value {value}"),
                        Some(c) if c.warpgroup != wg => {
                            format!("value was computed by warpgroup {}", c.warpgroup)
                        }
                        Some(_) => String::new(),
                    },
                });
            }
        }
    }
    Ok(report)
}

/// What one run of the mma.sync probe revealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MmaSyncObservation {
    /// `c[lane][register]` = the `(row, col)` that C register holds.
    pub c: Vec<[Option<(u32, u32)>; 4]>,
    /// `a[lane * 8 + v]` = the `(row, k)` the hardware used A value `v` of `lane` for.
    pub a: Vec<Option<(u32, u32)>>,
    /// `b[lane * 4 + v]` = the `(k, n)` the hardware used B value `v` of `lane` for.
    pub b: Vec<Option<(u32, u32)>>,
    /// Contradictions found while decoding (e.g. one A value seen at two places).
    pub conflicts: Vec<String>,
}

/// Decodes the raw output of the mma.sync probe.
pub fn observe_mma_sync(raw: &[f32]) -> Result<MmaSyncObservation> {
    if raw.len() != MMA_SYNC_PROBE_OUT_LEN {
        return Err(Error::InvalidArgument(format!(
            "mma.sync probe output has {} values, expected {MMA_SYNC_PROBE_OUT_LEN}",
            raw.len()
        )));
    }
    let mut obs = MmaSyncObservation {
        c: vec![[None; 4]; 32],
        a: vec![None; 256],
        b: vec![None; 128],
        conflicts: Vec::new(),
    };
    for lane in 0..32u32 {
        for r in 0..4u32 {
            obs.c[lane as usize][r as usize] =
                MmaSyncProbe::decode_c(raw[MmaSyncSection::C.out_index(lane, r)]);
        }
    }
    // A sections: slot (lane', r) holds D[row][n] = code of A(row, n + 8*half).
    for (section, k_offset) in [(MmaSyncSection::AKLow, 0), (MmaSyncSection::AKHigh, 8)] {
        for lane in 0..32u32 {
            for r in 0..4u32 {
                let Some((row, n)) = obs.c[lane as usize][r as usize] else {
                    continue;
                };
                let raw_value = raw[section.out_index(lane, r)];
                let Some((src_lane, v)) = MmaSyncProbe::decode_a(raw_value) else {
                    obs.conflicts.push(format!(
                        "A probe: D({row},{n}) holds {raw_value}, not an A code"
                    ));
                    continue;
                };
                let slot = &mut obs.a[(src_lane * 8 + v) as usize];
                let here = (row, n + k_offset);
                match *slot {
                    Some(prev) if prev != here => obs.conflicts.push(format!(
                        "A value {v} of lane {src_lane} seen at {prev:?} and {here:?}"
                    )),
                    _ => *slot = Some(here),
                }
            }
        }
    }
    // B section: slot (lane', r) holds D[row][n] = code of B(k = row, n).
    for lane in 0..32u32 {
        for r in 0..4u32 {
            let Some((row, n)) = obs.c[lane as usize][r as usize] else {
                continue;
            };
            let raw_value = raw[MmaSyncSection::B.out_index(lane, r)];
            let Some((src_lane, v)) = MmaSyncProbe::decode_b(raw_value) else {
                obs.conflicts.push(format!(
                    "B probe: D({row},{n}) holds {raw_value}, not a B code"
                ));
                continue;
            };
            let slot = &mut obs.b[(src_lane * 4 + v) as usize];
            let here = (row, n);
            match *slot {
                Some(prev) if prev != here => obs.conflicts.push(format!(
                    "B value {v} of lane {src_lane} seen at {prev:?} and {here:?}"
                )),
                _ => *slot = Some(here),
            }
        }
    }
    Ok(obs)
}

fn check_table(
    probe: &str,
    values_per_lane: u32,
    observed: impl Fn(u32, u32) -> Option<(u32, u32)>,
    expected: impl Fn(u32, u32) -> (u32, u32),
    conflicts: &[String],
) -> ProbeReport {
    let mut report = ProbeReport::new(probe.to_string());
    for lane in 0..32 {
        for v in 0..values_per_lane {
            let exp = expected(lane, v);
            let obs = observed(lane, v);
            report.record(obs == Some(exp), || Mismatch {
                warpgroup: 0,
                thread: lane,
                value: v,
                expected: exp,
                observed: obs,
                detail: if obs.is_none() && !conflicts.is_empty() {
                    format!("decoding conflicts: {}", conflicts.join("; "))
                } else {
                    String::new()
                },
            });
        }
    }
    report
}

/// Compares the observed C fragment with `expected(lane, register) -> (row, col)`.
pub fn check_mma_sync_c(
    obs: &MmaSyncObservation,
    expected: impl Fn(u32, u32) -> (u32, u32),
) -> ProbeReport {
    check_table(
        "mma.sync m16n8k16 C fragment",
        4,
        |lane, r| obs.c[lane as usize][r as usize],
        expected,
        &[],
    )
}

/// Compares the observed A fragment with `expected(lane, value) -> (row, k)`.
pub fn check_mma_sync_a(
    obs: &MmaSyncObservation,
    expected: impl Fn(u32, u32) -> (u32, u32),
) -> ProbeReport {
    check_table(
        "mma.sync m16n8k16 A fragment",
        8,
        |lane, v| obs.a[(lane * 8 + v) as usize],
        expected,
        &obs.conflicts,
    )
}

/// Compares the observed B fragment with `expected(lane, value) -> (k, n)`.
pub fn check_mma_sync_b(
    obs: &MmaSyncObservation,
    expected: impl Fn(u32, u32) -> (u32, u32),
) -> ProbeReport {
    check_table(
        "mma.sync m16n8k16 B fragment",
        4,
        |lane, v| obs.b[(lane * 4 + v) as usize],
        expected,
        &obs.conflicts,
    )
}

/// Runs probes on one device, compiling with one compiler.
#[derive(Debug, Clone)]
pub struct Verifier {
    device: Device,
    compiler: Compiler,
    stream: Arc<CudaStream>,
}

impl Verifier {
    /// A verifier on `device` using `compiler`.
    pub fn new(device: Device, compiler: Compiler) -> Self {
        let stream = device.default_stream();
        Self {
            device,
            compiler,
            stream,
        }
    }

    /// Device 0 and the default (cached) compiler.
    pub fn open_default() -> Result<Self> {
        Ok(Self::new(Device::first()?, Compiler::new()))
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Runs the wgmma probe and returns its raw output.
    pub fn run_wgmma(&self, probe: &WgmmaProbe) -> Result<Vec<f32>> {
        let cc = self.device.compute_capability();
        if cc.major != 9 {
            return Err(Error::Unsupported(format!(
                "wgmma needs an SM90 (Hopper) GPU; {} has compute capability {cc}",
                self.device.name()
            )));
        }
        OutputKernel::wgmma_probe(&self.device, &self.compiler, probe)?.run(&self.stream)
    }

    /// Runs the wgmma probe for `m64n{n}k16` with `warpgroups` warpgroups and checks it.
    pub fn wgmma(
        &self,
        n: u32,
        warpgroups: u32,
        expected: impl Fn(u32, u32) -> (u32, u32),
    ) -> Result<ProbeReport> {
        let probe = WgmmaProbe::new(n, warpgroups)?;
        let raw = self.run_wgmma(&probe)?;
        check_wgmma(&probe, &raw, expected)
    }

    /// Runs the mma.sync probe and decodes it.
    pub fn mma_sync(&self) -> Result<MmaSyncObservation> {
        let cc = self.device.compute_capability();
        if cc.major < 8 {
            return Err(Error::Unsupported(format!(
                "mma.sync m16n8k16 with bf16 needs SM80 or later; {} has {cc}",
                self.device.name()
            )));
        }
        let raw = OutputKernel::mma_sync_probe(&self.device, &self.compiler)?.run(&self.stream)?;
        observe_mma_sync(&raw)
    }
}

/// Runs the wgmma accumulator probe on device 0 and compares every register
/// of every thread with `expected(thread, register) -> (row, col)`.
pub fn verify_wgmma(
    n: u32,
    warpgroups: u32,
    expected: impl Fn(u32, u32) -> (u32, u32),
) -> Result<ProbeReport> {
    Verifier::open_default()?.wgmma(n, warpgroups, expected)
}

/// Runs the mma.sync probe on device 0 and checks the C fragment.
pub fn verify_mma_sync_c(expected: impl Fn(u32, u32) -> (u32, u32)) -> Result<ProbeReport> {
    Ok(check_mma_sync_c(
        &Verifier::open_default()?.mma_sync()?,
        expected,
    ))
}

/// Runs the mma.sync probe on device 0 and checks the A fragment.
pub fn verify_mma_sync_a(expected: impl Fn(u32, u32) -> (u32, u32)) -> Result<ProbeReport> {
    Ok(check_mma_sync_a(
        &Verifier::open_default()?.mma_sync()?,
        expected,
    ))
}

/// Runs the mma.sync probe on device 0 and checks the B fragment.
pub fn verify_mma_sync_b(expected: impl Fn(u32, u32) -> (u32, u32)) -> Result<ProbeReport> {
    Ok(check_mma_sync_b(
        &Verifier::open_default()?.mma_sync()?,
        expected,
    ))
}

// ---- Mask apply and GPU packer checks (fragmask verify) ----

use fragmask_masks::{pack, DenseMask, EncodedLayout, Encoding, PackOptions, TiledAccumulator};

use fragmask_host::gpu_packer::{GpuPacker, GpuTransposer};

use crate::apply_bench::ApplyChecker;
use crate::compare::{packed_difference, transposed_difference};
use crate::emulator::{mismatches_against_dense, Emulator};
use crate::random::{splitmix64, DensePattern};

/// One named pass/fail line of a check table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOutcome {
    /// What was checked.
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// Counts on success, the first difference on failure.
    pub detail: String,
}

/// `count` random tiles of `acc` (row-major bools, concatenated), with densities
/// cycling through all-0, all-1, 50%, 3%, 97% and a random percentage.
pub fn random_tiles(acc: &TiledAccumulator, count: usize, seed: u64) -> Vec<bool> {
    let area = (acc.block_m() * acc.block_n()) as usize;
    let mut state = seed;
    let mut out = Vec::with_capacity(count * area);
    for i in 0..count {
        let percent = match i % 6 {
            0 => 0,
            1 => 100,
            2 => 50,
            3 => 3,
            4 => 97,
            _ => splitmix64(&mut state) % 101,
        };
        out.extend((0..area).map(|_| splitmix64(&mut state) % 100 < percent));
    }
    out
}

/// For every encoding: applies `tiles` random tiles on the GPU (the generated check
/// kernels), runs the CPU emulator on the same words, and compares both with the dense
/// tiles. One outcome per encoding.
pub fn check_mask_apply(
    device: &Device,
    compiler: &Compiler,
    acc: &TiledAccumulator,
    tiles: usize,
    seed: u64,
) -> Result<Vec<CheckOutcome>> {
    let checker = ApplyChecker::new(device, compiler, acc)?;
    let dense = random_tiles(acc, tiles, seed);
    let area = (acc.block_m() * acc.block_n()) as usize;
    let per_tile = (acc.threads() * acc.values_per_thread()) as usize;
    let mut out = Vec::new();
    for encoding in Encoding::ALL {
        let name = format!(
            "apply {} {}x{} w{}{}: GPU == emulator == dense",
            encoding.name(),
            acc.block_m(),
            acc.block_n(),
            acc.warpgroups(),
            if acc.swap_ab() { " swap" } else { "" }
        );
        let layout = EncodedLayout::derive(acc, encoding)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let emulator =
            Emulator::new(acc, encoding).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let words: Vec<u32> = dense
            .chunks(area)
            .flat_map(|tile| layout.encode_bools(tile))
            .collect();
        let gpu = checker.run(encoding, &words)?;
        let wpt = layout.words_per_tile();
        let mut failure = None;
        for (i, tile) in dense.chunks(area).enumerate() {
            let emu = emulator
                .run_tile(&words[i * wpt..(i + 1) * wpt])
                .map_err(|e| Error::InvalidArgument(e.to_string()))?;
            let gpu_tile = &gpu[i * per_tile..(i + 1) * per_tile];
            if emu != gpu_tile {
                let at = emu
                    .iter()
                    .zip(gpu_tile)
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                failure = Some(format!(
                    "tile {i}: GPU and emulator differ at thread {} value {}",
                    at / acc.values_per_thread() as usize,
                    at % acc.values_per_thread() as usize
                ));
                break;
            }
            if let Some(&(t, v)) = mismatches_against_dense(acc, &emu, tile, 1).first() {
                failure = Some(format!(
                    "tile {i}: thread {t} value {v} disagrees with the dense mask"
                ));
                break;
            }
        }
        out.push(CheckOutcome {
            name,
            passed: failure.is_none(),
            detail: failure.unwrap_or_else(|| format!("{tiles} tiles x {per_tile} values")),
        });
    }
    Ok(out)
}

/// One GPU-packer case: `planes × seqlen_q × seqlen_k` bytes of `pattern`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackerCase {
    /// Planes (batch × heads).
    pub planes: usize,
    /// Query length.
    pub seqlen_q: usize,
    /// Key length.
    pub seqlen_k: usize,
    /// Content.
    pub pattern: DensePattern,
}

/// Packs each case on the GPU and with the CPU packer (`fragmask_masks::pack` on a
/// [`DenseMask`]) and compares every list entry and word.
pub fn check_packer(
    device: &Device,
    compiler: &Compiler,
    acc: &TiledAccumulator,
    cases: &[PackerCase],
    seed: u64,
) -> Result<Vec<CheckOutcome>> {
    let packer = GpuPacker::new(device, compiler, acc)?;
    let mut out = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let bytes =
            case.pattern
                .generate(case.planes, case.seqlen_q, case.seqlen_k, seed ^ i as u64);
        let dims = [case.planes, case.seqlen_q, case.seqlen_k];
        let source =
            DenseMask::new(&bytes, &dims).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let cpu = pack(
            &source,
            acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let gpu = packer.pack_host(&bytes, case.planes, case.seqlen_q, case.seqlen_k)?;
        let stats = cpu.stats();
        let difference = packed_difference(&gpu, &cpu);
        out.push(CheckOutcome {
            name: format!(
                "packer {}x{}x{} {}: GPU == CPU",
                case.planes,
                case.seqlen_q,
                case.seqlen_k,
                case.pattern.name()
            ),
            passed: difference.is_none(),
            detail: difference.unwrap_or_else(|| {
                format!(
                    "{} partial, {} full, {} empty tiles",
                    stats.partial, stats.full, stats.empty
                )
            }),
        });
    }
    Ok(out)
}

/// Packs each case on the GPU with the transposed lists (the forward pack, then
/// [`GpuTransposer`] on its output) and compares every forward and transposed list
/// entry and word with the CPU's `pack` + `add_transposed` for the backward
/// accumulator `backward`; then adds the transposed lists to the CPU's forward-only mask
/// on the GPU ([`GpuTransposer::add_transposed`], the upload path) and compares again.
pub fn check_transposed_packer(
    device: &Device,
    compiler: &Compiler,
    acc: &TiledAccumulator,
    backward: &TiledAccumulator,
    cases: &[PackerCase],
    seed: u64,
) -> Result<Vec<CheckOutcome>> {
    let packer = GpuPacker::new(device, compiler, acc)?;
    let transposer = GpuTransposer::new(device, compiler, acc, backward)?;
    let bad = |e: fragmask_masks::MaskError| Error::InvalidArgument(e.to_string());
    let mut out = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let bytes =
            case.pattern
                .generate(case.planes, case.seqlen_q, case.seqlen_k, seed ^ i as u64);
        let dims = [case.planes, case.seqlen_q, case.seqlen_k];
        let source = DenseMask::new(&bytes, &dims).map_err(bad)?;
        let forward_only = pack(
            &source,
            acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .map_err(bad)?;
        let mut cpu = forward_only.clone();
        cpu.add_transposed(backward, &PackOptions::default())
            .map_err(bad)?;
        let cpu_t = cpu.transposed().map_err(bad)?;
        let shape = packer.shape(case.planes, case.seqlen_q, case.seqlen_k)?;
        let dense = packer
            .stream()
            .clone_htod(&bytes)
            .map_err(Error::driver("uploading the dense mask"))?;
        let mut pack_buffers = packer.buffers(shape)?;
        let mut t_buffers = transposer.buffers(shape, shape.tiles())?;
        packer.enqueue(&dense, &mut pack_buffers)?;
        transposer.enqueue_after_pack(&pack_buffers, &mut t_buffers)?;
        let gpu = packer.download(&pack_buffers)?;
        let gpu_t = transposer.download(&t_buffers)?;
        let mut difference = packed_difference(&gpu, &cpu).or_else(|| {
            transposed_difference(&gpu_t, cpu_t).map(|d| format!("after a GPU pack: {d}"))
        });
        if difference.is_none() {
            let mut uploaded = forward_only;
            difference = match transposer.add_transposed(&mut uploaded) {
                Err(e) => Some(format!("uploaded mask: {e}")),
                Ok(()) if uploaded != cpu => Some("uploaded mask: differs from the CPU's".into()),
                Ok(()) => None,
            };
        }
        let stats = cpu.stats();
        out.push(CheckOutcome {
            name: format!(
                "transposed packer {}x{}x{} {}: GPU == CPU",
                case.planes,
                case.seqlen_q,
                case.seqlen_k,
                case.pattern.name()
            ),
            passed: difference.is_none(),
            detail: difference.unwrap_or_else(|| {
                format!(
                    "{} partial, {} full, {} empty tiles; pack + transpose and upload paths",
                    stats.partial, stats.full, stats.empty
                )
            }),
        });
    }
    Ok(out)
}
