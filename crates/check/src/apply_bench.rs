//! The cost of applying a mask: read from SASS (no GPU) and timed on the GPU.
//!
//! - [`measure_apply_costs`] compiles the cost kernels of
//!   [`fragmask_kernels::apply::kernels::cost_source`] for sm_90a and reads, from the
//!   SASS of each kernel's tile loop, the instructions per thread per tile of each
//!   encoding's apply function (loop body minus its baseline's), its shared and global
//!   loads, registers and spills.
//! - [`ApplyChecker`] runs the check kernels on random tiles (GPU result per thread and
//!   value), and [`ApplyBench`] times the benchmark kernels.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use fragmask_kernels::apply::kernels::{
    all_cost_variants, bench_source, check_kernel_name, check_source, cost_source, BenchVariant,
    CostVariant,
};
use fragmask_kernels::apply::CodegenError;
use fragmask_masks::{Encoding, TiledAccumulator};

use fragmask_host::launch::{launch, load_module, KernelArg, Launch};
use fragmask_host::nvrtc::{Arch, CompileOptions, Compiler};
use fragmask_host::{Device, Error, Result};

use fragmask_host::device::multiprocessors;

use crate::random::splitmix64;
use crate::sass::{self, Instruction, KernelSass};
use crate::timing::{time_on_stream, Timing, TimingConfig};

fn codegen(e: CodegenError) -> Error {
    Error::InvalidArgument(format!("code generation: {e}"))
}

/// The instructions of a kernel's last loop (the tile loop of the measurement kernels,
/// which comes after any set-up loops): from the target of the last backward branch to
/// that branch, without instructions guarded by `@!PT` (never executed; ptxas pads
/// `LDGSTS` with them). `None` if the kernel has no loop.
pub fn loop_body(kernel: &KernelSass) -> Option<Vec<Instruction>> {
    let mut best: Option<(u32, u32)> = None;
    for i in &kernel.instructions {
        if i.mnemonic() != "BRA" {
            continue;
        }
        let target = i
            .operands
            .split_whitespace()
            .next()
            .and_then(|t| t.trim_end_matches(',').strip_prefix("0x"))
            .and_then(|h| u32::from_str_radix(h, 16).ok());
        if let Some(t) = target {
            if t < i.offset && best.is_none_or(|(_, b)| i.offset > b) {
                best = Some((t, i.offset));
            }
        }
    }
    let (start, end) = best?;
    Some(
        kernel
            .instructions
            .iter()
            .filter(|i| i.offset >= start && i.offset <= end)
            .filter(|i| i.predicate.as_deref() != Some("@!PT"))
            .cloned()
            .collect(),
    )
}

/// Instruction counts of a run of SASS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BodyCounts {
    /// All instructions.
    pub instructions: usize,
    /// Shared-memory loads (`LDS`, `LDSM`).
    pub shared_loads: usize,
    /// Global loads (`LDG`).
    pub global_loads: usize,
    /// Asynchronous global→shared copies (`LDGSTS`).
    pub async_copies: usize,
    /// Barriers (`BAR`).
    pub barriers: usize,
    /// Local-memory accesses (`LDL`, `STL`).
    pub local: usize,
}

impl BodyCounts {
    /// Counts `instructions`.
    pub fn of(instructions: &[Instruction]) -> BodyCounts {
        let mut c = BodyCounts {
            instructions: instructions.len(),
            ..BodyCounts::default()
        };
        for i in instructions {
            match i.mnemonic() {
                "LDS" | "LDSM" => c.shared_loads += 1,
                "LDG" => c.global_loads += 1,
                "LDGSTS" => c.async_copies += 1,
                "BAR" => c.barriers += 1,
                "LDL" | "STL" => c.local += 1,
                _ => {}
            }
        }
        c
    }

    fn minus(self, base: BodyCounts) -> BodyCounts {
        BodyCounts {
            instructions: self.instructions.saturating_sub(base.instructions),
            shared_loads: self.shared_loads.saturating_sub(base.shared_loads),
            global_loads: self.global_loads.saturating_sub(base.global_loads),
            async_copies: self.async_copies.saturating_sub(base.async_copies),
            barriers: self.barriers.saturating_sub(base.barriers),
            local: self.local.saturating_sub(base.local),
        }
    }
}

/// The SASS cost of one encoding's apply function, per thread per tile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyCost {
    /// The encoding.
    pub encoding: Encoding,
    /// The apply function alone: loop body of the apply kernel minus its baseline's
    /// (the staged baseline for shared-memory encodings, so staging is excluded).
    pub apply: BodyCounts,
    /// Staging the words into shared memory (staged baseline minus the empty baseline;
    /// zero for FragmentNative).
    pub staging: BodyCounts,
    /// The load opcodes of the apply function, e.g. `LDG.E.64.CONSTANT`.
    pub load_opcodes: Vec<String>,
    /// Registers per thread of the apply kernel.
    pub registers: u32,
    /// Spill bytes (ptxas stores + loads) of the apply kernel.
    pub spill_bytes: u32,
    /// Local memory bytes per thread of the apply kernel.
    pub local_bytes: u32,
}

impl ApplyCost {
    /// Apply plus staging: what a consumer thread executes per tile for this encoding.
    pub fn total_instructions(&self) -> usize {
        self.apply.instructions + self.staging.instructions
    }
}

/// Compiles the cost kernels of `acc` for sm_90a and reads each encoding's apply cost
/// from the SASS (needs NVRTC and cuobjdump, no GPU).
pub fn measure_apply_costs(compiler: &Compiler, acc: &TiledAccumulator) -> Result<Vec<ApplyCost>> {
    let variants = all_cost_variants();
    let source = cost_source(acc, &variants).map_err(codegen)?;
    let cubin = compiler.compile_cubin(&source, &CompileOptions::new(Arch::sm90a()))?;
    let report = sass::inspect(&cubin)?;
    let body = |v: CostVariant| -> Result<(BodyCounts, Vec<Instruction>, &KernelSass)> {
        let name = v.kernel_name();
        let k = report.kernel(&name).ok_or_else(|| Error::Parse {
            what: "cost kernel SASS",
            detail: format!("kernel {name} missing"),
        })?;
        let b = loop_body(k).ok_or_else(|| Error::Parse {
            what: "cost kernel SASS",
            detail: format!("no tile loop found in {name}"),
        })?;
        Ok((BodyCounts::of(&b), b, k))
    };
    let (none, none_body, _) = body(CostVariant::None)?;
    let mut out = Vec::new();
    for encoding in Encoding::ALL {
        let apply_variant = CostVariant::Apply(encoding);
        let baseline = apply_variant.baseline();
        let (with, with_body, kernel) = body(apply_variant)?;
        let (base, base_body, _) = body(baseline)?;
        let staging = if baseline == CostVariant::None {
            BodyCounts::default()
        } else {
            base.minus(none)
        };
        // Load opcodes the apply adds: those of the apply kernel's loop not in the baseline's.
        let mut base_ops: Vec<String> = base_body
            .iter()
            .chain(if baseline == CostVariant::None {
                [].iter()
            } else {
                none_body.iter()
            })
            .filter(|i| matches!(i.mnemonic(), "LDS" | "LDG"))
            .map(|i| i.opcode.clone())
            .collect();
        let mut load_opcodes = Vec::new();
        for i in with_body
            .iter()
            .filter(|i| matches!(i.mnemonic(), "LDS" | "LDG"))
        {
            if let Some(p) = base_ops.iter().position(|o| *o == i.opcode) {
                base_ops.swap_remove(p);
            } else {
                load_opcodes.push(i.opcode.clone());
            }
        }
        out.push(ApplyCost {
            encoding,
            apply: with.minus(base),
            staging,
            load_opcodes,
            registers: kernel.registers().unwrap_or(0),
            spill_bytes: kernel.spill_bytes().unwrap_or(0),
            local_bytes: kernel.local_bytes().unwrap_or(0),
        });
    }
    Ok(out)
}

/// Runs the check kernels on one device: the GPU's masked accumulator per tile.
#[derive(Debug)]
pub struct ApplyChecker {
    acc: TiledAccumulator,
    stream: Arc<CudaStream>,
    functions: Vec<(Encoding, CudaFunction)>,
}

impl ApplyChecker {
    /// Compiles and loads the check kernels of `acc` for `device`.
    pub fn new(device: &Device, compiler: &Compiler, acc: &TiledAccumulator) -> Result<Self> {
        let source = check_source(acc).map_err(codegen)?;
        let cubin = compiler.compile_cubin(&source, &CompileOptions::new(device.arch()))?;
        let module = load_module(device, &cubin)?;
        let mut functions = Vec::new();
        for e in Encoding::ALL {
            let f = module
                .load_function(&check_kernel_name(e))
                .map_err(Error::driver("looking up a check kernel"))?;
            functions.push((e, f));
        }
        Ok(Self {
            acc: *acc,
            stream: device.default_stream(),
            functions,
        })
    }

    /// Applies `tiles` (each `encoding.words_per_tile` words, concatenated) to
    /// accumulators holding `v + 1` at value `v`. Returns, per tile, thread and value,
    /// whether the value was kept (`[tile][thread][value]`); errors if a value is
    /// neither its original nor -inf.
    pub fn run(&self, encoding: Encoding, tiles: &[u32]) -> Result<Vec<bool>> {
        let wpt = encoding.words_per_tile(&self.acc);
        if wpt == 0 || tiles.len() % wpt != 0 || tiles.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{} words is not a positive multiple of {wpt} words per tile",
                tiles.len()
            )));
        }
        let count = tiles.len() / wpt;
        let threads = self.acc.threads() as usize;
        let values = self.acc.values_per_thread() as usize;
        let f = &self
            .functions
            .iter()
            .find(|(e, _)| *e == encoding)
            .ok_or_else(|| Error::InvalidArgument("encoding not compiled".into()))?
            .1;
        let words = self
            .stream
            .clone_htod(tiles)
            .map_err(Error::driver("copying mask words"))?;
        let mut out: CudaSlice<f32> = self
            .stream
            .clone_htod(&vec![f32::NAN; count * threads * values])
            .map_err(Error::driver("allocating the check output"))?;
        let grid = u32::try_from(count)
            .map_err(|_| Error::InvalidArgument("too many tiles for one launch".into()))?;
        {
            let (words_at, _read) = words.device_ptr(&self.stream);
            let (out_at, _written) = out.device_ptr_mut(&self.stream);
            // SAFETY: the check kernel's signature is `(const unsigned* words, float* out)`;
            // with `count` blocks of `threads` threads it reads `count * wpt` words and
            // writes `count * threads * values` floats, the sizes of the two buffers (the
            // guards order the launch after their earlier uses on the stream).
            unsafe {
                launch(
                    &self.stream,
                    f,
                    Launch::new((grid, 1, 1), self.acc.threads()),
                    &[KernelArg::new(&words_at), KernelArg::new(&out_at)],
                )
            }
            .map_err(Error::driver("launching the check kernel"))?;
        }
        let host = self
            .stream
            .clone_dtoh(&out)
            .map_err(Error::driver("reading the check output"))?;
        self.stream
            .synchronize()
            .map_err(Error::driver("running the check kernel"))?;
        let mut kept = Vec::with_capacity(host.len());
        for (i, &x) in host.iter().enumerate() {
            let value = i % values;
            if x == (value + 1) as f32 {
                kept.push(true);
            } else if x == f32::NEG_INFINITY {
                kept.push(false);
            } else {
                return Err(Error::Parse {
                    what: "check kernel output",
                    detail: format!(
                        "tile {} thread {} value {value}: {x} is neither {} nor -inf",
                        i / (threads * values),
                        i / values % threads,
                        value + 1
                    ),
                });
            }
        }
        Ok(kept)
    }
}

/// One timed benchmark kernel.
#[derive(Clone, Debug)]
pub struct BenchResult {
    /// The kernel.
    pub variant: BenchVariant,
    /// Its launch timing.
    pub timing: Timing,
    /// Tiles each CTA walked.
    pub tiles_per_cta: usize,
    /// CTAs (one per SM).
    pub ctas: usize,
}

impl BenchResult {
    /// Median nanoseconds per tile per CTA (every SM runs one CTA concurrently).
    pub fn ns_per_tile(&self) -> f64 {
        self.timing.median_ms * 1e6 / self.tiles_per_cta as f64
    }
}

/// Options of [`ApplyBench::run`].
#[derive(Clone, Copy, Debug)]
pub struct ApplyBenchOptions {
    /// Tiles each CTA walks per launch.
    pub tiles_per_cta: usize,
    /// Distinct partial tiles in the words buffer (their words are random).
    pub distinct_tiles: usize,
    /// Warm-up and timed launches.
    pub timing: TimingConfig,
    /// Seed of the random words and tile order.
    pub seed: u64,
}

impl Default for ApplyBenchOptions {
    fn default() -> Self {
        Self {
            tiles_per_cta: 2048,
            distinct_tiles: 65536,
            timing: TimingConfig {
                warmup: 5,
                warmup_ms: 0,
                runs: 30,
            },
            seed: 0x5eed,
        }
    }
}

/// The benchmark kernels of one configuration on one device.
#[derive(Debug)]
pub struct ApplyBench {
    acc: TiledAccumulator,
    device: Device,
    functions: Vec<(BenchVariant, CudaFunction)>,
}

impl ApplyBench {
    /// Compiles and loads every benchmark kernel of `acc` (all of
    /// [`BenchVariant::all`]).
    pub fn new(device: &Device, compiler: &Compiler, acc: &TiledAccumulator) -> Result<Self> {
        let variants = BenchVariant::all();
        let source = bench_source(acc, &variants).map_err(codegen)?;
        let cubin = compiler.compile_cubin(&source, &CompileOptions::new(device.arch()))?;
        let module = load_module(device, &cubin)?;
        let mut functions = Vec::new();
        for v in variants {
            let f = module
                .load_function(&v.kernel_name())
                .map_err(Error::driver("looking up a benchmark kernel"))?;
            functions.push((v, f));
        }
        Ok(Self {
            acc: *acc,
            device: device.clone(),
            functions,
        })
    }

    /// Times every kernel: one CTA per SM, `tiles_per_cta` random tiles each.
    pub fn run(&self, options: &ApplyBenchOptions) -> Result<Vec<BenchResult>> {
        let stream = self.device.default_stream();
        let ctas = multiprocessors(&self.device)?;
        let wpt = Encoding::ALL
            .iter()
            .map(|e| e.words_per_tile(&self.acc))
            .max()
            .unwrap_or(0);
        let mut state = options.seed;
        let words: Vec<u32> = (0..options.distinct_tiles * wpt)
            .map(|_| splitmix64(&mut state) as u32)
            .collect();
        let tiles: Vec<i32> = (0..ctas * options.tiles_per_cta)
            .map(|_| (splitmix64(&mut state) % options.distinct_tiles as u64) as i32)
            .collect();
        let d_words = stream
            .clone_htod(&words)
            .map_err(Error::driver("copying benchmark words"))?;
        let d_tiles = stream
            .clone_htod(&tiles)
            .map_err(Error::driver("copying benchmark tiles"))?;
        let mut d_out: CudaSlice<f32> = stream
            .alloc_zeros(ctas * self.acc.threads() as usize)
            .map_err(Error::driver("allocating benchmark output"))?;
        let per_cta = i32::try_from(options.tiles_per_cta)
            .map_err(|_| Error::InvalidArgument("tiles_per_cta too large".into()))?;
        let mut results = Vec::new();
        for (variant, f) in &self.functions {
            let timing = time_on_stream(&stream, options.timing, |s| {
                let (words_at, _read) = d_words.device_ptr(s);
                let (tiles_at, _tiles_read) = d_tiles.device_ptr(s);
                let (out_at, _written) = d_out.device_ptr_mut(s);
                let args = [
                    KernelArg::new(&words_at),
                    KernelArg::new(&tiles_at),
                    KernelArg::new(&per_cta),
                    KernelArg::new(&out_at),
                ];
                // SAFETY: the benchmark kernels take `(const unsigned* words,
                // const int* tiles, int tiles_per_cta, float* out)`; `tiles` holds
                // `ctas * tiles_per_cta` indices below `distinct_tiles`, `words` holds
                // `distinct_tiles` tiles of the largest encoding, `out` one float per
                // thread of every CTA.
                unsafe {
                    launch(
                        s,
                        f,
                        Launch::new((ctas as u32, 1, 1), self.acc.threads()),
                        &args,
                    )
                }
                .map_err(Error::driver("launching a benchmark kernel"))
            })?;
            results.push(BenchResult {
                variant: *variant,
                timing,
                tiles_per_cta: options.tiles_per_cta,
                ctas,
            });
        }
        stream
            .synchronize()
            .map_err(Error::driver("finishing the benchmark"))?;
        Ok(results)
    }
}
