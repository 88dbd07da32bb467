//! SASS inspection of a cubin: registers, local memory / spills and instruction counts.
//!
//! Runs `cuobjdump -sass` and `cuobjdump -res-usage` (found by
//! [`fragmask_host::toolchain::find_tool`]) on a temporary copy of the cubin and
//! parses their text. When the cubin came from [`fragmask_host::Compiler`] with
//! `ptxas_verbose`, ptxas' own report in the compile log adds the exact
//! spill-store and spill-load byte counts.
//!
//! The parsers are public and pure so they can be tested on captured text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use fragmask_host::nvrtc::Cubin;
pub use fragmask_host::ptxas::{parse_ptxas_log, PtxasReport};
use fragmask_host::{toolchain, Error, Result};

/// One SASS instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// Byte offset in the function.
    pub offset: u32,
    /// Guard predicate, e.g. `@!P0`, if any.
    pub predicate: Option<String>,
    /// Full opcode with modifiers, e.g. `HGMMA.64x64x16.F32.BF16`.
    pub opcode: String,
    /// Operand text.
    pub operands: String,
    /// The scheduling control of the encoding's second word, where the listing has it.
    pub control: Option<Control>,
}

/// The scheduling control of a Volta-or-later instruction: bits 41-61 of the high word of its
/// 128-bit encoding (Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via
/// Microbenchmarking", 2018, §2.1): stall cycles, the yield bit, the scoreboard set when its
/// result is written and the one set when its source registers are read (7: none), and the
/// mask of scoreboards it waits on before it issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    /// Cycles to stall after issue.
    pub stall: u8,
    /// The yield bit, as encoded.
    pub yield_bit: bool,
    /// Scoreboard released when the result is written.
    pub write_barrier: Option<u8>,
    /// Scoreboard released when the source registers have been read.
    pub read_barrier: Option<u8>,
    /// Scoreboards (bit i: scoreboard i) waited on before issue.
    pub wait_mask: u8,
}

impl Control {
    /// The control fields of an encoding's high word.
    pub fn from_high_word(word: u64) -> Self {
        let c = word >> 41;
        let barrier = |b: u64| (b != 7).then_some(b as u8);
        Self {
            stall: (c & 0xf) as u8,
            yield_bit: (c >> 4) & 1 == 1,
            write_barrier: barrier((c >> 5) & 7),
            read_barrier: barrier((c >> 8) & 7),
            wait_mask: ((c >> 11) & 0x3f) as u8,
        }
    }
}

/// An instruction of a GEMM loop that waits on a scoreboard, and the loop-body instruction
/// that set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopWait {
    /// Offset of the waiting instruction.
    pub waiter: u32,
    /// Its opcode.
    pub waiter_opcode: String,
    /// Offset of the instruction that set the scoreboard.
    pub setter: u32,
    /// That instruction's opcode.
    pub setter_opcode: String,
    /// Whether it sets the scoreboard on reading its sources (else on writing its result).
    pub on_read: bool,
}

/// Where one wgmma wait (`WARPGROUP.DEPBAR`, PTX `wgmma.wait_group`) falls among the softmax
/// work of the smallest GEMM loop with exp2s that holds it: how many of the body's `MUFU.EX2` and `F2FP`
/// (conversions to 16-bit pairs) ptxas scheduled before it. An overlapped loop's previous-PV
/// wait after a few exp2s lets the conversions run beside the rest (docs/architecture.md,
/// "The PV wait's pin").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitPlacement {
    /// Offset of the wait.
    pub offset: u32,
    /// Its operands, e.g. `gsb0, 0x0` (0x0: no group left in flight).
    pub operands: String,
    /// `MUFU.EX2` of the loop body before the wait.
    pub exp2_before: usize,
    /// `MUFU.EX2` in the whole body.
    pub exp2_total: usize,
    /// `F2FP` of the loop body before the wait.
    pub convert_before: usize,
    /// `F2FP` in the whole body.
    pub convert_total: usize,
}

/// What runs between a softmax loop's last conversion of P (`F2FP`, the step's end) and the
/// next step's first GEMM issue (`HGMMA`): the instructions on that path around the
/// back-edge, and how many of them are selects (`FSEL`, and `R2P` moving mask bits into
/// predicates). Selects there hold the next GEMM's issue (docs/architecture.md, "The bias
/// written ahead").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueLead {
    /// Offset of the first `HGMMA` of the loop body.
    pub issue: u32,
    /// Offset of the body's last `F2FP`.
    pub convert: u32,
    /// Instructions strictly between the two on the path through the back-edge.
    pub instructions: usize,
    /// Of those, `FSEL` and `R2P`.
    pub selects: usize,
}

/// Whether `i` is an exp2 (`MUFU.EX2`, the softmax's).
fn is_exp2(i: &Instruction) -> bool {
    i.opcode.starts_with("MUFU.EX2")
}

/// The last of `body` that sets scoreboard `sb`, and whether on reading its sources.
fn last_setter(body: &[Instruction], sb: u8) -> Option<(&Instruction, bool)> {
    body.iter().rev().find_map(|i| {
        let c = i.control?;
        let on_read = c.read_barrier == Some(sb);
        (on_read || c.write_barrier == Some(sb)).then_some((i, on_read))
    })
}

fn loop_wait(waiter: &Instruction, (setter, on_read): (&Instruction, bool)) -> LoopWait {
    LoopWait {
        waiter: waiter.offset,
        waiter_opcode: waiter.opcode.clone(),
        setter: setter.offset,
        setter_opcode: setter.opcode.clone(),
        on_read,
    }
}

/// The scoreboards (0-5) of a wait mask.
fn waited(mask: u8) -> impl Iterator<Item = u8> {
    (0..6u8).filter(move |sb| mask >> sb & 1 == 1)
}

impl Instruction {
    /// The opcode without modifiers, e.g. `HGMMA`.
    pub fn mnemonic(&self) -> &str {
        self.opcode.split('.').next().unwrap_or(&self.opcode)
    }
}

/// What `cuobjdump -res-usage` says about one function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceUsage {
    /// Registers per thread (`REG`).
    pub registers: u32,
    /// Stack frame bytes per thread (`STACK`).
    pub stack_bytes: u32,
    /// Shared memory bytes per block, including the reserved system part (`SHARED`).
    pub shared_bytes: u32,
    /// Local memory bytes per thread (`LOCAL`): spills and local arrays.
    pub local_bytes: u32,
    /// Every `KEY:VALUE` pair as printed.
    pub raw: BTreeMap<String, String>,
}

/// Counts of the instruction classes we care about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassCounts {
    /// All instructions (including the trailing `BRA`/`NOP` padding).
    pub total: usize,
    /// Shared-memory loads (`LDS`, `LDSM`).
    pub lds: usize,
    /// Shared-memory stores (`STS`, `STSM`).
    pub sts: usize,
    /// Global loads (`LDG`).
    pub ldg: usize,
    /// Global stores (`STG`).
    pub stg: usize,
    /// Local-memory loads (`LDL`): spill reloads or local arrays.
    pub ldl: usize,
    /// Local-memory stores (`STL`).
    pub stl: usize,
    /// SM80-style warp MMA (`HMMA`).
    pub hmma: usize,
    /// SM90 warpgroup MMA (`HGMMA`).
    pub hgmma: usize,
}

/// The inspection result for one kernel.
#[derive(Debug, Clone, Default)]
pub struct KernelSass {
    /// The function name (mangled if it is not `extern "C"`).
    pub name: String,
    /// The instructions in order.
    pub instructions: Vec<Instruction>,
    /// From `cuobjdump -res-usage`, if reported for this function.
    pub resources: Option<ResourceUsage>,
    /// From ptxas' `-v` report in the compile log, if available.
    pub ptxas: Option<PtxasReport>,
}

impl KernelSass {
    /// The GEMM loops: (index of the loop's first instruction, index of its back-edge) for
    /// every backward branch whose range holds an HGMMA.
    pub fn gemm_loops(&self) -> Vec<(usize, usize)> {
        let ins = &self.instructions;
        ins.iter()
            .enumerate()
            .filter_map(|(at, br)| {
                let target = branch_target(br).filter(|&t| t < br.offset)?;
                let start = ins[..at].partition_point(|i| i.offset < target);
                ins[start..at]
                    .iter()
                    .any(|i| i.mnemonic() == "HGMMA")
                    .then_some((start, at))
            })
            .collect()
    }

    /// The waits of every GEMM loop's back-edge (a backward branch whose range holds an
    /// HGMMA): per scoreboard the branch waits on, the body's last instruction before it that
    /// sets that scoreboard. Needs the listing's control words (`Instruction::control`).
    pub fn gemm_back_edge_waits(&self) -> Vec<LoopWait> {
        let ins = &self.instructions;
        let mut out = Vec::new();
        for (start, at) in self.gemm_loops() {
            let Some(ctrl) = ins[at].control else {
                continue;
            };
            for sb in waited(ctrl.wait_mask) {
                if let Some(set) = last_setter(&ins[start..at], sb) {
                    out.push(loop_wait(&ins[at], set));
                }
            }
        }
        out
    }

    /// The waits carried over a GEMM loop's back-edge: an instruction of the body that waits
    /// on a scoreboard nothing before it in the iteration set, so that it waits for the
    /// previous iteration's last setter (given with it), e.g. a register write at the loop's
    /// top that must wait until an earlier store has read the register.
    pub fn gemm_loop_carried_waits(&self) -> Vec<LoopWait> {
        let ins = &self.instructions;
        let mut out = Vec::new();
        for (start, at) in self.gemm_loops() {
            let body = &ins[start..=at];
            for (k, i) in body.iter().enumerate() {
                let Some(ctrl) = i.control else {
                    continue;
                };
                for sb in waited(ctrl.wait_mask) {
                    if last_setter(&body[..k], sb).is_none() {
                        if let Some(set) = last_setter(&body[k..], sb) {
                            let w = loop_wait(i, set);
                            if !out.contains(&w) {
                                out.push(w);
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The GEMM loops ([`Self::gemm_loops`]) whose body computes exp2s: the softmax loops,
    /// and the ranges a barrier retry's branch back makes around them.
    fn softmax_loops(&self) -> Vec<(usize, usize)> {
        let ins = &self.instructions;
        self.gemm_loops()
            .into_iter()
            .filter(|&(s, e)| ins[s..=e].iter().any(is_exp2))
            .collect()
    }

    /// Every wgmma wait inside a GEMM loop whose body computes exp2s, with the exp2s and
    /// conversions ptxas placed before it in the smallest such loop that holds it (ptxas puts
    /// a barrier's retry out of line, and its branch back makes ranges that are not loops).
    pub fn gemm_wait_placements(&self) -> Vec<WaitPlacement> {
        let ins = &self.instructions;
        let is_convert = |i: &Instruction| i.mnemonic() == "F2FP";
        let loops = self.softmax_loops();
        let mut out = Vec::new();
        for (k, wait) in ins.iter().enumerate() {
            if !wait.opcode.starts_with("WARPGROUP.DEPBAR") {
                continue;
            }
            let Some(&(start, end)) = loops
                .iter()
                .filter(|&&(s, e)| s <= k && k <= e)
                .min_by_key(|&&(s, e)| e - s)
            else {
                continue;
            };
            let body = &ins[start..=end];
            let before = &ins[start..k];
            out.push(WaitPlacement {
                offset: wait.offset,
                operands: wait.operands.clone(),
                exp2_before: before.iter().filter(|i| is_exp2(i)).count(),
                exp2_total: body.iter().filter(|i| is_exp2(i)).count(),
                convert_before: before.iter().filter(|i| is_convert(i)).count(),
                convert_total: body.iter().filter(|i| is_convert(i)).count(),
            });
        }
        out
    }

    /// For every innermost GEMM loop with exp2s and conversions (a softmax step loop), the
    /// path from its last conversion to its first GEMM issue ([`IssueLead`]): around the
    /// back-edge when the conversion comes after the issue in the body, else straight. A
    /// range with an `EXIT` is not a step loop but a barrier retry's branch back from the
    /// out-of-line code after the kernel's end.
    pub fn gemm_issue_leads(&self) -> Vec<IssueLead> {
        let ins = &self.instructions;
        let loops: Vec<(usize, usize)> = self
            .softmax_loops()
            .into_iter()
            .filter(|&(s, e)| !ins[s..=e].iter().any(|i| i.mnemonic() == "EXIT"))
            .collect();
        let innermost = loops.iter().filter(|&&(s, e)| {
            !loops
                .iter()
                .any(|&(s2, e2)| (s2, e2) != (s, e) && s <= s2 && e2 <= e)
        });
        let mut out = Vec::new();
        for &(start, end) in innermost {
            let body = &ins[start..=end];
            let Some(h) = body.iter().position(|i| i.mnemonic() == "HGMMA") else {
                continue;
            };
            let Some(f) = body.iter().rposition(|i| i.mnemonic() == "F2FP") else {
                continue;
            };
            let path: Vec<&Instruction> = if f > h {
                body[f + 1..].iter().chain(&body[..h]).collect()
            } else {
                body[f + 1..h].iter().collect()
            };
            out.push(IssueLead {
                issue: body[h].offset,
                convert: body[f].offset,
                instructions: path.len(),
                selects: path
                    .iter()
                    .filter(|i| matches!(i.mnemonic(), "FSEL" | "R2P"))
                    .count(),
            });
        }
        out
    }

    /// Instructions per full opcode (with modifiers).
    pub fn opcode_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for i in &self.instructions {
            *m.entry(i.opcode.clone()).or_insert(0) += 1;
        }
        m
    }

    /// Instructions per mnemonic (opcode without modifiers).
    pub fn mnemonic_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for i in &self.instructions {
            *m.entry(i.mnemonic().to_string()).or_insert(0) += 1;
        }
        m
    }

    /// Number of instructions whose mnemonic is exactly `mnemonic`.
    pub fn count(&self, mnemonic: &str) -> usize {
        self.instructions
            .iter()
            .filter(|i| i.mnemonic() == mnemonic)
            .count()
    }

    /// The class summary.
    pub fn classes(&self) -> ClassCounts {
        let mut c = ClassCounts {
            total: self.instructions.len(),
            ..ClassCounts::default()
        };
        for i in &self.instructions {
            match i.mnemonic() {
                "LDS" | "LDSM" => c.lds += 1,
                "STS" | "STSM" => c.sts += 1,
                "LDG" => c.ldg += 1,
                "STG" => c.stg += 1,
                "LDL" => c.ldl += 1,
                "STL" => c.stl += 1,
                "HMMA" => c.hmma += 1,
                "HGMMA" => c.hgmma += 1,
                _ => {}
            }
        }
        c
    }

    /// Registers per thread, from res-usage or else ptxas.
    pub fn registers(&self) -> Option<u32> {
        self.resources
            .as_ref()
            .map(|r| r.registers)
            .or_else(|| self.ptxas.as_ref().and_then(|p| p.registers))
    }

    /// Spill bytes (stores + loads) per ptxas, if its report is available.
    pub fn spill_bytes(&self) -> Option<u32> {
        let p = self.ptxas.as_ref()?;
        Some(p.spill_store_bytes? + p.spill_load_bytes?)
    }

    /// Local-memory bytes per thread per res-usage, if reported.
    pub fn local_bytes(&self) -> Option<u32> {
        self.resources.as_ref().map(|r| r.local_bytes)
    }

    /// True if anything indicates spilling: ptxas spill bytes, local memory,
    /// or `LDL`/`STL` instructions.
    pub fn spills(&self) -> bool {
        let c = self.classes();
        self.spill_bytes().unwrap_or(0) > 0
            || self.local_bytes().unwrap_or(0) > 0
            || c.ldl + c.stl > 0
    }
}

/// The inspection result for a whole cubin.
#[derive(Debug, Clone, Default)]
pub struct SassReport {
    /// One entry per function, in disassembly order.
    pub kernels: Vec<KernelSass>,
    /// The raw `cuobjdump -sass` text.
    pub sass_text: String,
}

impl SassReport {
    /// The kernel called `name`.
    pub fn kernel(&self, name: &str) -> Option<&KernelSass> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

/// Inspects a cubin produced by [`fragmask_host::Compiler`], merging ptxas' report from its log.
pub fn inspect(cubin: &Cubin) -> Result<SassReport> {
    let mut report = inspect_bytes(&cubin.bytes)?;
    let ptxas = parse_ptxas_log(&cubin.log);
    for k in &mut report.kernels {
        k.ptxas = ptxas.get(&k.name).cloned();
    }
    Ok(report)
}

/// Inspects raw cubin bytes (no ptxas report).
pub fn inspect_bytes(cubin: &[u8]) -> Result<SassReport> {
    let tool = toolchain::find_tool("cuobjdump")?;
    let file = TempFile::write(cubin)?;
    let sass_text = run_tool("cuobjdump", &tool, &["-sass"], file.path())?;
    let res_text = run_tool("cuobjdump", &tool, &["-res-usage"], file.path())?;
    let mut kernels = parse_sass(&sass_text)?;
    let usage = parse_res_usage(&res_text)?;
    for k in &mut kernels {
        k.resources = usage.get(&k.name).cloned();
    }
    Ok(SassReport { kernels, sass_text })
}

/// Disassembles a cubin to SASS text with `cuobjdump -sass`.
pub fn disassemble(cubin: &[u8]) -> Result<String> {
    let tool = toolchain::find_tool("cuobjdump")?;
    let file = TempFile::write(cubin)?;
    run_tool("cuobjdump", &tool, &["-sass"], file.path())
}

fn run_tool(name: &'static str, tool: &Path, args: &[&str], file: &Path) -> Result<String> {
    let out = Command::new(tool)
        .args(args)
        .arg(file)
        .output()
        .map_err(|e| Error::io(tool, e))?;
    if !out.status.success() {
        // The temporary copy is gone once this returns: name the cubin instead.
        let stderr = String::from_utf8_lossy(&out.stderr)
            .replace(&file.display().to_string(), "<the kernel's cubin>");
        let tail: String = stderr
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(Error::ToolFailed {
            tool: name,
            status: out.status.to_string(),
            stderr: tail,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A file in the temporary directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    /// Writes `bytes` to a new file in the temporary directory, created exclusively
    /// under a name with 64 random bits, so processes that share the directory never
    /// read or remove each other's file, even with the same PID in different PID
    /// namespaces. The guard exists before the write, so a failed write (a full disk)
    /// removes the partial file too; errors name the directory, not the internal file
    /// name.
    fn write(bytes: &[u8]) -> Result<Self> {
        use std::io::Write as _;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir();
        let mut last = None;
        for _ in 0..16 {
            let nonce = getrandom::u64().unwrap_or_else(|_| {
                // No OS randomness: the clock and a counter still differ per call.
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0);
                t ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(48)
            });
            let path = dir.join(format!(
                "fragmask-{}-{nonce:016x}.cubin",
                std::process::id()
            ));
            let mut out = match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(Error::io(&dir, e)),
            };
            let file = Self(path);
            out.write_all(bytes).map_err(|e| Error::io(&dir, e))?;
            return Ok(file);
        }
        Err(Error::io(
            &dir,
            last.unwrap_or_else(|| std::io::Error::other("no free temporary name")),
        ))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The offset a `BRA` jumps to (`BRA 0x1c70`, `BRA P1, 0x1c70`), if it is one.
fn branch_target(i: &Instruction) -> Option<u32> {
    if i.mnemonic() != "BRA" {
        return None;
    }
    let hex = i.operands.rsplit(' ').next()?.strip_prefix("0x")?;
    u32::from_str_radix(hex, 16).ok()
}

/// The word of an encoding-only line such as `/* 0x000fea0003800000 */`.
fn encoding_word(t: &str) -> Option<u64> {
    let hex = t.strip_prefix("/* 0x")?.strip_suffix("*/")?.trim();
    u64::from_str_radix(hex, 16).ok()
}

/// Parses `cuobjdump -sass` output into per-function instruction lists (with each
/// instruction's control word where the listing gives its encoding's second line).
pub fn parse_sass(text: &str) -> Result<Vec<KernelSass>> {
    let mut kernels: Vec<KernelSass> = Vec::new();
    let mut awaiting_high_word = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("Function : ") {
            kernels.push(KernelSass {
                name: name.trim().to_string(),
                ..KernelSass::default()
            });
            awaiting_high_word = false;
            continue;
        }
        if awaiting_high_word {
            awaiting_high_word = false;
            if let Some(word) = encoding_word(t) {
                if let Some(last) = kernels.last_mut().and_then(|k| k.instructions.last_mut()) {
                    last.control = Some(Control::from_high_word(word));
                }
                continue;
            }
        }
        let Some(instr) = parse_instruction_line(t) else {
            continue;
        };
        awaiting_high_word = true;
        match kernels.last_mut() {
            Some(k) => k.instructions.push(instr),
            None => {
                return Err(Error::Parse {
                    what: "cuobjdump -sass output",
                    detail: format!("instruction before any `Function :` header: {t}"),
                })
            }
        }
    }
    Ok(kernels)
}

/// Parses one line like `/*0620*/  @P0 HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], RZ ; /* 0x... */`.
fn parse_instruction_line(t: &str) -> Option<Instruction> {
    let rest = t.strip_prefix("/*")?;
    let end = rest.find("*/")?;
    let addr = &rest[..end];
    if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None; // an encoding-only line such as `/* 0x000fe20000000800 */`
    }
    let offset = u32::from_str_radix(addr, 16).ok()?;
    let body = rest[end + 2..].split(';').next()?.trim();
    let body = body.trim_start_matches('{').trim();
    if body.is_empty() {
        return None;
    }
    let mut tokens = body.splitn(2, char::is_whitespace);
    let mut first = tokens.next()?.to_string();
    let mut remainder = tokens.next().unwrap_or("").trim().to_string();
    let mut predicate = None;
    if first.starts_with('@') {
        predicate = Some(first);
        let mut t2 = remainder.splitn(2, char::is_whitespace);
        first = t2.next()?.to_string();
        remainder = t2.next().unwrap_or("").trim().to_string();
    }
    Some(Instruction {
        offset,
        predicate,
        opcode: first,
        operands: remainder,
        control: None,
    })
}

/// Parses `cuobjdump -res-usage` output into per-function resource usage.
pub fn parse_res_usage(text: &str) -> Result<BTreeMap<String, ResourceUsage>> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("Function ") {
            current = Some(name.trim_end_matches(':').trim().to_string());
            continue;
        }
        let Some(name) = current.take() else {
            continue;
        };
        let mut usage = ResourceUsage::default();
        for pair in t.split_whitespace() {
            if let Some((k, v)) = pair.split_once(':') {
                usage.raw.insert(k.to_string(), v.to_string());
            }
        }
        let num = |key: &str| -> Result<u32> {
            match usage.raw.get(key) {
                Some(v) => v.parse().map_err(|_| Error::Parse {
                    what: "cuobjdump -res-usage output",
                    detail: format!("{key}:{v} for {name} is not a number"),
                }),
                None => Ok(0),
            }
        };
        usage.registers = num("REG")?;
        usage.stack_bytes = num("STACK")?;
        usage.shared_bytes = num("SHARED")?;
        usage.local_bytes = num("LOCAL")?;
        if !usage.raw.contains_key("REG") {
            return Err(Error::Parse {
                what: "cuobjdump -res-usage output",
                detail: format!("no REG entry for {name}: {t}"),
            });
        }
        out.insert(name, usage);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_tool_names_the_cubin_not_its_deleted_temporary() {
        let file = TempFile::write(b"not a cubin").unwrap();
        let shell = Path::new("/bin/sh");
        // A stand-in for cuobjdump that fails naming its input, as cuobjdump does.
        let e = run_tool(
            "cuobjdump",
            shell,
            &["-c", "echo \"cannot read $0\" >&2; exit 1"],
            file.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot read <the kernel's cubin>"), "{e}");
        assert!(!e.contains(&file.path().display().to_string()), "{e}");
    }

    const SASS: &str = r#"
	code for sm_90a
	.target	sm_90a

		Function : fragmask_wgmma_probe
	.headerflags	@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                                     /* 0x00000a00ff017b82 */
                                                                                              /* 0x000fe20000000800 */
        /*0050*/               @P1 BRA 0x210 ;                                                /* 0x00000000006c1947 */
                                                                                              /* 0x000fea0003800000 */
        /*0060*/                   STS.U16 [R2], R5 ;                                         /* 0x0000000000057919 */
        /*0620*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0 ;  /* 0x00e00000081879f0 */
        /*0630*/                   STG.E desc[UR4][R2.64], R24 ;                              /* 0x00e00000081879f0 */
        /*0640*/                   EXIT ;                                                     /* 0x00e00000081879f0 */
"#;

    const RES: &str = "
Resource usage:
 Common:
  GLOBAL:0
 Function fragmask_wgmma_probe:
  REG:58 STACK:0 SHARED:7168 LOCAL:0 CONSTANT[0]:536 TEXTURE:0 SURFACE:0 SAMPLER:0
";

    const LOG: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'fragmask_wgmma_probe' for 'sm_90a'
ptxas info    : Function properties for fragmask_wgmma_probe
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 58 registers, used 1 barriers, 6144 bytes smem
";

    /// A GEMM loop's end as cuobjdump prints it (the backward at c9e626f): the stage release
    /// sets read scoreboard 2, the back-edge waits on it.
    const LOOP_END: &str = r#"
		Function : fragmask_attention_bwd
        /*1c70*/                   HGMMA.64x64x16.F32.BF16 R184, gdesc[UR16], RZ, !UPT ;                /* 0x00e0000010b879f0 */
                                                                                                        /* 0x000fe20008700818 */
        /*4190*/                   SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R2+UR24+0x30420], RZ ;                /* 0x030420ff02ff79a7 */
                                                                                                        /* RELEASE */
        /*41c0*/                   PLOP3.LUT P0, PT, PT, PT, UP1, 0x80, 0x0 ;                           /* 0x000000000000781c */
                                                                                                        /* 0x000fda0003f0f018 */
        /*41d0*/              @!P0 BRA 0x1c70 ;                                                         /* 0xffffffd800a48947 */
                                                                                                        /* BRANCH */
        /*41e0*/                   EXIT ;                                                               /* 0x000000000000794d */
"#;

    #[test]
    fn control_words_decode_stall_scoreboards_and_waits() {
        let c = Control::from_high_word(0x000f_ea00_0380_0000);
        assert_eq!(
            (
                c.stall,
                c.yield_bit,
                c.write_barrier,
                c.read_barrier,
                c.wait_mask
            ),
            (5, true, None, None, 0)
        );
        let c = Control::from_high_word(0x0005_e200_0810_0018);
        assert_eq!(
            (c.stall, c.read_barrier, c.write_barrier, c.wait_mask),
            (1, Some(2), None, 0)
        );
        assert_eq!(
            Control::from_high_word(0x004f_ea00_0383_ffff).wait_mask,
            0b100
        );
    }

    #[test]
    fn a_back_edge_waiting_on_the_release_read_is_found_and_one_without_the_wait_is_not() {
        let listing = |release: &str, branch: &str| {
            LOOP_END
                .replace("/* RELEASE */", release)
                .replace("/* BRANCH */", branch)
        };
        let k = &parse_sass(&listing(
            "/* 0x0005e20008100018 */",
            "/* 0x004fea000383ffff */",
        ))
        .unwrap()[0];
        assert!(k.instructions.iter().take(4).all(|i| i.control.is_some()));
        assert_eq!(
            k.instructions[4].control, None,
            "EXIT has no second line here"
        );
        assert_eq!(
            k.gemm_back_edge_waits(),
            vec![LoopWait {
                waiter: 0x41d0,
                waiter_opcode: "BRA".into(),
                setter: 0x4190,
                setter_opcode: "SYNCS.ARRIVE.TRANS64.A1T0".into(),
                on_read: true,
            }]
        );
        // The release without a read scoreboard (a constant address) and a branch without the
        // wait: nothing to report.
        let k = &parse_sass(&listing(
            "/* 0x000fe20008100018 */",
            "/* 0x000fea000383ffff */",
        ))
        .unwrap()[0];
        assert!(k.gemm_back_edge_waits().is_empty());
        // A forward branch or a loop without an HGMMA is not a GEMM loop's back-edge.
        let no_gemm = listing("/* 0x0005e20008100018 */", "/* 0x004fea000383ffff */")
            .replace("HGMMA.64x64x16.F32.BF16", "IMAD.MOV.U32");
        assert!(parse_sass(&no_gemm).unwrap()[0]
            .gemm_back_edge_waits()
            .is_empty());
    }

    /// A GEMM loop of the 4c73071 backward: the top's first register write waits on read
    /// scoreboard 1, which only the dQ staging store at the loop's end sets.
    const LOOP_CARRIED: &str = r#"
		Function : fragmask_attention_bwd
        /*1ca0*/                   IMAD.U32 R3, RZ, RZ, UR16 ;                                          /* 0x00000010ff037e24 */
                                                                                                        /* 0x002fe2000f8e00ff */
        /*1e10*/                   HGMMA.64x64x16.F32.BF16 R184, gdesc[UR16], RZ, !UPT ;                /* 0x00e0000010b879f0 */
                                                                                                        /* 0x000fe20008700818 */
        /*4000*/                   STS.64 [R3+UR17+0x28000], R182 ;                                     /* 0x028000b603007988 */
                                                                                                        /* 0x0003e20008000a11 */
        /*41e0*/              @!P0 BRA 0x1ca0 ;                                                         /* 0xffffffd800988947 */
                                                                                                        /* 0x000fea000383ffff */
"#;

    #[test]
    fn a_wait_carried_over_the_back_edge_names_the_previous_iteration_s_setter() {
        let k = &parse_sass(LOOP_CARRIED).unwrap()[0];
        assert_eq!(k.gemm_loops(), vec![(0, 3)]);
        assert!(k.gemm_back_edge_waits().is_empty());
        assert_eq!(
            k.gemm_loop_carried_waits(),
            vec![LoopWait {
                waiter: 0x1ca0,
                waiter_opcode: "IMAD.U32".into(),
                setter: 0x4000,
                setter_opcode: "STS.64".into(),
                on_read: true,
            }]
        );
        // With the store setting scoreboard 1 before the top in the same iteration (here: a
        // second store placed first), the wait is not carried.
        let within = LOOP_CARRIED.replacen(
            "        /*1ca0*/",
            "        /*1c90*/                   STS.64 [R3+UR17+0x28000], R182 ;                                     /* 0x028000b603007988 */\n                                                                                                        /* 0x0003e20008000a11 */\n        /*1ca0*/",
            1,
        );
        let k = &parse_sass(&within.replace("BRA 0x1ca0", "BRA 0x1c90")).unwrap()[0];
        assert!(
            k.gemm_loop_carried_waits().is_empty(),
            "{:?}",
            k.gemm_loop_carried_waits()
        );
    }

    /// An overlapped step loop's shape: S's wait, two exp2s, the previous PV's wait, an exp2 and
    /// a conversion, the back-edge; then a loop without exp2s (a producer's).
    const WAITS: &str = r#"
		Function : fragmask_attention_fwd
        /*0100*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0 ;
        /*0110*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0120*/                   MUFU.EX2 R30, R30 ;
        /*0130*/                   MUFU.EX2 R31, R31 ;
        /*0140*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0150*/                   MUFU.EX2 R32, R32 ;
        /*0160*/                   F2FP.BF16.F32.PACK_AB R40, R31, R30 ;
        /*0170*/               @P0 BRA 0x100 ;
        /*0180*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0 ;
        /*0190*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*01a0*/               @P1 BRA 0x180 ;
        /*01b0*/                   EXIT ;
"#;

    #[test]
    fn each_wgmma_wait_of_a_softmax_loop_counts_the_exp2s_and_conversions_before_it() {
        let k = &parse_sass(WAITS).unwrap()[0];
        assert_eq!(k.gemm_loops().len(), 2);
        let w = k.gemm_wait_placements();
        let seen: Vec<_> = w
            .iter()
            .map(|p| {
                (
                    p.offset,
                    p.exp2_before,
                    p.exp2_total,
                    p.convert_before,
                    p.convert_total,
                )
            })
            .collect();
        assert_eq!(seen, vec![(0x110, 0, 3, 0, 1), (0x140, 2, 3, 0, 1)]);
        assert_eq!(w[1].operands, "gsb0, 0x0");
    }

    /// A step loop whose top selects the next step's bias before its first GEMM: the path from
    /// the last conversion (0x160) runs through the back-edge (0x170) to 0x100..0x120.
    const LEAD: &str = r#"
		Function : fragmask_attention_fwd
        /*0100*/                   R2P PR, R50, 0x7f ;
        /*0110*/                   FSEL R24, RZ, -INF , P0 ;
        /*0120*/                   IMAD.MOV.U32 R2, RZ, RZ, R3 ;
        /*0130*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ;
        /*0140*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0150*/                   MUFU.EX2 R30, R30 ;
        /*0160*/                   F2FP.BF16.F32.PACK_AB R40, R31, R30 ;
        /*0170*/               @P0 BRA 0x100 ;
        /*0180*/                   EXIT ;
"#;

    #[test]
    fn the_issue_lead_counts_the_path_from_the_last_conversion_through_the_back_edge() {
        let k = &parse_sass(LEAD).unwrap()[0];
        assert_eq!(
            k.gemm_issue_leads(),
            vec![IssueLead {
                issue: 0x130,
                convert: 0x160,
                instructions: 4,
                selects: 2
            }]
        );
        // Selects moved into the softmax (after the issue) leave only the branch and the move.
        let ahead = LEAD
            .replace("        /*0100*/                   R2P PR, R50, 0x7f ;\n", "")
            .replace("        /*0110*/                   FSEL R24, RZ, -INF , P0 ;\n", "")
            .replace(
                "        /*0150*/                   MUFU.EX2 R30, R30 ;\n",
                "        /*0150*/                   MUFU.EX2 R30, R30 ;\n        /*0158*/                   FSEL R24, RZ, -INF , P0 ;\n",
            );
        let k = &parse_sass(&ahead).unwrap()[0];
        let lead = &k.gemm_issue_leads()[0];
        assert_eq!((lead.instructions, lead.selects), (2, 0), "{ahead}");
        // The overlapped loop of WAITS: conversion at 0x160, issue at 0x100, the branch between.
        let k = &parse_sass(WAITS).unwrap()[0];
        let leads = k.gemm_issue_leads();
        assert_eq!(leads.len(), 1);
        assert_eq!((leads[0].instructions, leads[0].selects), (1, 0));
    }

    #[test]
    fn parses_sass_listing() {
        let k = parse_sass(SASS).unwrap();
        assert_eq!(k.len(), 1);
        let k = &k[0];
        assert_eq!(k.name, "fragmask_wgmma_probe");
        assert_eq!(k.instructions.len(), 6);
        assert_eq!(k.instructions[1].predicate.as_deref(), Some("@P1"));
        assert_eq!(k.instructions[1].opcode, "BRA");
        assert_eq!(k.instructions[3].opcode, "HGMMA.64x64x16.F32.BF16");
        assert_eq!(k.instructions[3].offset, 0x620);
        let c = k.classes();
        assert_eq!((c.total, c.hgmma, c.sts, c.stg, c.lds), (6, 1, 1, 1, 0));
        assert_eq!(k.count("EXIT"), 1);
        assert_eq!(k.mnemonic_counts()["HGMMA"], 1);
        assert_eq!(k.opcode_counts()["STS.U16"], 1);
    }

    #[test]
    fn instruction_before_header_is_an_error() {
        assert!(parse_sass("        /*0000*/   EXIT ;").is_err());
    }

    #[test]
    fn parses_res_usage() {
        let r = parse_res_usage(RES).unwrap();
        let u = &r["fragmask_wgmma_probe"];
        assert_eq!(
            (u.registers, u.stack_bytes, u.shared_bytes, u.local_bytes),
            (58, 0, 7168, 0)
        );
        assert_eq!(u.raw["CONSTANT[0]"], "536");
    }

    #[test]
    fn parses_ptxas_log() {
        let r = parse_ptxas_log(LOG);
        let p = &r["fragmask_wgmma_probe"];
        assert_eq!(p.registers, Some(58));
        assert_eq!(p.stack_frame_bytes, Some(8));
        assert_eq!(p.spill_store_bytes, Some(4));
        assert_eq!(p.spill_load_bytes, Some(12));
        let mut k = parse_sass(SASS).unwrap().remove(0);
        k.ptxas = Some(p.clone());
        assert_eq!(k.spill_bytes(), Some(16));
        assert!(k.spills());
    }
}
