//! The generated attention kernels compile to sm_90a through NVRTC with no
//! spills, their SASS uses HGMMA, and in the overlapped main loop the softmax
//! (`MUFU.EX2`) sits between the wait for QK^T and the wait for PV, so it
//! overlaps the PV wgmma (no GPU needed; needs NVRTC and cuobjdump).

use fragmask::host::attention::compile::compile_kernel;
use fragmask::kernels::attention::{AttentionKernel, Geometry, MaskMode};

#[path = "support/nvrtc.rs"]
mod nvrtc;
use nvrtc::nvrtc_or_skip;

#[test]
fn every_attention_variant_compiles_without_spills_and_uses_hgmma() {
    if !nvrtc_or_skip() {
        return;
    }
    // Every loop variant of the 128x128 tile, the default configuration of every other
    // geometry (with and without split-KV) at every head dim and mask mode, and fp16.
    for k in AttentionKernel::compile_sweep().unwrap() {
        compiles_without_spills_and_uses_hgmma(&k);
    }
}

#[test]
fn documents_grid_variants_compile_without_spills_and_use_hgmma() {
    if !nvrtc_or_skip() {
        return;
    }
    // The documents grid's one-tile variants of the sweep alone (the sweep above has them
    // too; the persistent ones are the next test's).
    let documents: Vec<AttentionKernel> = AttentionKernel::compile_sweep()
        .unwrap()
        .into_iter()
        .filter(|k| k.mask() == MaskMode::Documents && !k.persistent())
        .collect();
    assert_eq!(
        documents.len(),
        Geometry::SUPPORTED
            .iter()
            .map(|g| [64, 128, 256]
                .iter()
                .filter(|&&d| g.supports_head_dim(d))
                .count())
            .sum::<usize>()
    );
    for k in &documents {
        compiles_without_spills_and_uses_hgmma(k);
    }
}

#[test]
fn persistent_variants_compile_without_spills_and_use_hgmma() {
    if !nvrtc_or_skip() {
        return;
    }
    // The persistent CTAs of the sweep alone (the sweep above has them too): at least the
    // 128x128 tile at head dim 128 and the 64-token tile, in every mask mode.
    let persistent = AttentionKernel::persistent_sweep().unwrap();
    for (g, d) in [(Geometry::TILE_128X128, 128), (Geometry::TILE_64X64, 128)] {
        for mode in [MaskMode::Window, MaskMode::Blocks, MaskMode::Documents] {
            assert!(
                persistent
                    .iter()
                    .any(|k| k.geometry() == g && k.head_dim() == d && k.mask() == mode),
                "{g} d{d} {mode:?} missing from the persistent sweep"
            );
        }
    }
    for k in &persistent {
        assert!(k.persistent() && !k.split_kv(), "{k:?}");
        let src = k.source().unwrap();
        assert!(
            src.contains("#define FM_PERSISTENT 1") && src.contains("p.work"),
            "{k:?}"
        );
        compiles_without_spills_and_uses_hgmma(k);
    }
}

/// `k` compiles to sm_90a with no spills, ptxas honours setmaxnreg and keeps wgmma
/// asynchronous, and (with cuobjdump) its SASS has HGMMA and no local memory.
#[test]
fn shared_kv_variants_compile_without_spills_and_use_hgmma() {
    if !nvrtc_or_skip() {
        return;
    }
    // The shared-K/V tile's variants alone (the sweep above has them too): both loops at
    // head dim 128, each walking the pairs' step table with the warpgroup's own words.
    let shared = AttentionKernel::shared_kv_sweep().unwrap();
    assert!(shared.iter().any(|k| k.overlap() && k.head_dim() == 128));
    assert!(shared.iter().any(|k| !k.overlap() && k.head_dim() == 128));
    for k in &shared {
        assert!(
            k.geometry().shared_kv() && k.mask() == MaskMode::Blocks,
            "{k:?}"
        );
        let src = k.source().unwrap();
        assert!(
            src.contains("p.pair_steps") && src.contains("fm_load_mask_bits(p, t_next, lt)"),
            "{k:?}"
        );
        compiles_without_spills_and_uses_hgmma(k);
    }
}

fn compiles_without_spills_and_uses_hgmma(k: &AttentionKernel) {
    let compiled = compile_kernel(k).unwrap_or_else(|e| panic!("{k:?}: {e}"));
    // A register count proves ptxas' report for the kernel was found, so the spill count
    // below is read, not defaulted.
    assert!(
        compiled.registers > 0,
        "{k:?}: no ptxas report:\n{}",
        compiled.log
    );
    assert_eq!(compiled.spill_bytes, 0, "{k:?} spills:\n{}", compiled.log);
    // Generated CUDA declares nothing it does not use (NVRTC's #177-D and the like).
    assert!(
        !compiled.log.contains("warning #"),
        "{k:?}: NVRTC warnings:\n{}",
        compiled.log
    );
    // C7508: setmaxnreg ignored. A wgmma serialisation has several codes (C7510, C7512,
    // C7513 where a non-wgmma instruction defines a wgmma's input registers inside its
    // pipeline stage, C7518, ...) and one message.
    assert!(
        !compiled.log.contains("C7508") && !serialised_wgmmas(&compiled.log),
        "{k:?}: ptxas ignored setmaxnreg or serialised wgmma:\n{}",
        compiled.log
    );
    eprintln!(
        "{k:?}: {} registers, {} spill bytes, {} stack bytes",
        compiled.registers, compiled.spill_bytes, compiled.stack_bytes
    );
    if let Ok(sass) = fragmask::check::attention::kernel_sass(&compiled) {
        let classes = sass.classes();
        eprintln!("    SASS: {classes:?}");
        assert!(classes.hgmma > 0, "{k:?}: no HGMMA in SASS");
        assert_eq!(classes.ldl + classes.stl, 0, "{k:?}: local memory in SASS");
        assert!(!sass.spills(), "{k:?}: spills per SASS / res-usage");
    }
}

/// The SASS of overlapped kernel `k` and the line of its loop's wait for S (`gsb0, 0x1`: one
/// wgmma group, the previous PV, left in flight); `None` without cuobjdump (said on stderr).
fn overlapped_sass(k: &AttentionKernel) -> Option<(String, usize)> {
    let compiled = compile_kernel(k).unwrap();
    let sass = nvrtc::sass_or_skip(fragmask::check::attention::kernel_sass_text(&compiled))?;
    let wait1 = sass
        .lines()
        .position(|l| l.contains("WARPGROUP.DEPBAR.LE gsb0, 0x1"))
        .expect("the overlapped loop waits with one wgmma group in flight");
    Some((sass, wait1))
}

/// The overlapped loops keep the previous step's PV in flight while the softmax runs: the PV's
/// wait (`gsb0, 0x0`) comes after S's (`gsb0, 0x1`) and after the whole row max (its `FMNMX`),
/// held there by the pin (`PV_WAIT_PIN`; without one ptxas hoists the wait above the max). The
/// one-block loops pin the max's correction, so ptxas may put exp2s after the wait and
/// interleaves P's conversions (`F2FP`) with them; the shared-K/V loop pins the row sum, so
/// every exp2 comes before it (docs/architecture.md, "The PV wait's pin").
#[test]
fn the_pv_wait_follows_the_row_max_and_p_s_conversions_run_beside_the_exp2s() {
    if !nvrtc_or_skip() {
        return;
    }
    for (g, mode) in [
        (Geometry::TILE_128X128, MaskMode::Window),
        (Geometry::TILE_128X128, MaskMode::Blocks),
        (Geometry::TILE_64X64, MaskMode::Blocks),
        (Geometry::TILE_64X64_SHARED, MaskMode::Blocks),
    ] {
        let k = AttentionKernel::default_for_geometry(g, 128, mode).unwrap();
        let Some((sass, wait1)) = overlapped_sass(&k) else {
            return;
        };
        let lines: Vec<&str> = sass.lines().collect();
        let wait0 = wait1
            + lines[wait1..]
                .iter()
                .position(|l| l.contains("WARPGROUP.DEPBAR.LE gsb0, 0x0"))
                .expect("then for all groups");
        let count = |range: &[&str], op: &str| range.iter().filter(|l| l.contains(op)).count();
        let values = g.values_per_thread() as usize;
        let maxes = count(&lines[wait1..wait0], "FMNMX");
        assert!(
            maxes + 1 >= values,
            "{k:?}: only {maxes} FMNMX between the waits (the PV wait is above the row max)"
        );
        let exps = count(&lines[wait1..wait0], "MUFU.EX2");
        if g.shared_kv() {
            assert!(
                exps >= values,
                "{k:?}: only {exps} MUFU.EX2 before the PV wait (the row-sum pin holds all)"
            );
        } else {
            // After the wait, up to the next step's first GEMM: some conversion before the last exp2.
            let next = wait0
                + lines[wait0..]
                    .iter()
                    .position(|l| l.contains("HGMMA"))
                    .expect("the next step's GEMM");
            let after = &lines[wait0..next];
            let last_exp = after.iter().rposition(|l| l.contains("MUFU.EX2"));
            let first_cvt = after.iter().position(|l| l.contains("F2FP"));
            assert!(
                matches!((first_cvt, last_exp), (Some(c), Some(e)) if c < e),
                "{k:?}: P's conversions do not run beside the exp2s after the PV wait \
                 ({exps} MUFU.EX2 before it, first F2FP {first_cvt:?}, last MUFU.EX2 {last_exp:?})"
            );
        }
    }
}

/// The one-block overlapped loop on tile lists writes the next step's mask bias right after
/// P's conversion, branch-free, so ptxas schedules its selects (`R2P` moving a word into
/// predicates, `FSEL` per value) among the step's exp2s, not between the step's last exp2
/// and the next QK^T's issue, where the tensor cores wait for them (`fm_mask_bias_ahead`;
/// docs/architecture.md, "The bias written ahead"). At 128 consumer registers (the 64x64
/// tile, two CTAs per SM) and in the shared-K/V loop, the bias stays at the top of the step.
#[test]
fn the_next_steps_mask_bias_is_selected_among_this_steps_exp2s() {
    if !nvrtc_or_skip() {
        return;
    }
    for (g, head_dim, ahead) in [
        (Geometry::TILE_128X128, 128, true),
        (Geometry::TILE_128X128, 64, true),
        (Geometry::TILE_64X64, 128, false),
        (Geometry::TILE_64X64_SHARED, 128, false),
    ] {
        let k = AttentionKernel::default_for_geometry(g, head_dim, MaskMode::Blocks).unwrap();
        let Some((sass, wait1)) = overlapped_sass(&k) else {
            return;
        };
        let lines: Vec<&str> = sass.lines().collect();
        // The overlapped step: from the wait for S to its last exp2 before the next GEMM issue.
        let next = wait1
            + lines[wait1..]
                .iter()
                .position(|l| l.contains("HGMMA"))
                .expect("a GEMM after the step");
        let last_exp = wait1
            + lines[wait1..next]
                .iter()
                .rposition(|l| l.contains("MUFU.EX2"))
                .expect("the step's exp2s");
        let step = &lines[wait1..last_exp];
        let count = |op: &str| step.iter().filter(|l| l.contains(op)).count();
        // The bias moves its words into predicates (R2P, at most 7 bits each) and selects each
        // value; the key bound of the last block (in a branch) selects each value too.
        let words_moved = count("R2P");
        let selects = count("FSEL");
        let values = g.values_per_thread() as usize;
        if ahead {
            assert!(
                words_moved > 0 && selects >= 2 * values,
                "{k:?}: {words_moved} R2P and {selects} FSEL before the step's last exp2 \
                 (the bias is not written ahead)"
            );
        } else {
            assert_eq!(
                words_moved, 0,
                "{k:?}: R2P before the step's last exp2 (the bias was meant to stay at the step's top)"
            );
        }
        // The same from the other side: what runs between the step's last conversion and the
        // next step's first GEMM issue (`KernelSass::gemm_issue_leads`, as `--inspect` prints
        // it). The shared-K/V loop's first GEMM in its body is the skipped steps' PV, so only
        // the one-block loops are checked here.
        if !g.shared_kv() {
            let compiled = compile_kernel(&k).unwrap();
            let Some(s) = nvrtc::sass_or_skip(fragmask::check::attention::kernel_sass(&compiled))
            else {
                return;
            };
            let leads = s.gemm_issue_leads();
            assert_eq!(leads.len(), 1, "{k:?}: {leads:?}");
            if ahead {
                // (a select or two of the softmax's own may land there)
                assert!(leads[0].selects < values / 8, "{k:?}: {leads:?}");
            } else {
                assert!(leads[0].selects >= values, "{k:?}: {leads:?}");
            }
        }
    }
}

#[test]
fn every_backward_variant_compiles_without_spills_or_serialised_wgmmas() {
    use fragmask::host::attention::backward::compile_backward;
    use fragmask::kernels::attention::backward::BackwardKernel;
    if !nvrtc_or_skip() {
        return;
    }
    let mut failures = Vec::new();
    for k in BackwardKernel::compile_sweep().unwrap() {
        let c = compile_backward(&k).unwrap_or_else(|e| panic!("{}: {e}", k.label()));
        println!(
            "{}: {} registers, {} spill bytes",
            k.label(),
            c.registers,
            c.spill_bytes
        );
        if c.spill_bytes != 0 {
            failures.push(format!("{}: {} spill bytes", k.label(), c.spill_bytes));
        }
        // Generated CUDA declares nothing it does not use (NVRTC's #177-D and the like).
        let warnings: Vec<&str> = c.log.lines().filter(|l| l.contains("warning #")).collect();
        if !warnings.is_empty() {
            failures.push(format!("{}: NVRTC warnings {warnings:?}", k.label()));
        }
        // ptxas serialises every wgmma of a kernel (a wait after each issue) when it cannot
        // prove the accumulators untouched between issue and wait, e.g. where a branch joins
        // in between (a warpgroup's GEMMs issued on some steps only did that).
        if serialised_wgmmas(&c.log) {
            failures.push(format!("{}: ptxas serialised the wgmmas", k.label()));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn kernels_releasing_each_stage_at_its_address_have_no_back_edge_waiting_on_the_release() {
    use fragmask::check::sass::{disassemble, parse_sass};
    use fragmask::host::attention::backward::compile_backward;
    use fragmask::kernels::attention::backward::{BackwardKernel, KERNEL_NAME};
    if !nvrtc_or_skip() {
        return;
    }
    // The kernels that release each Q/dO stage at its own constant barrier address
    // (docs/backward.md, "The stage release"): no GEMM loop's back-edge may wait until an
    // mbarrier arrive has read its operands, the wait the release removed.
    let kernels: Vec<BackwardKernel> = BackwardKernel::compile_sweep()
        .unwrap()
        .into_iter()
        .filter(|k| {
            k.source()
                .unwrap()
                .contains("#define FM_RELEASE_PER_STAGE 1")
        })
        .collect();
    assert!(
        kernels.len() >= 4,
        "{} kernels release per stage",
        kernels.len()
    );
    for k in kernels {
        let c = compile_backward(&k).unwrap_or_else(|e| panic!("{}: {e}", k.label()));
        let Some(sass) = nvrtc::sass_or_skip(disassemble(&c.cubin)) else {
            return;
        };
        let functions = parse_sass(&sass).unwrap();
        let main = functions.iter().find(|f| f.name == KERNEL_NAME).unwrap();
        assert!(
            main.instructions.iter().all(|i| i.control.is_some()),
            "{}: every instruction's control word is read",
            k.label()
        );
        assert!(!main.gemm_loops().is_empty(), "{}: no GEMM loop", k.label());
        let waits: Vec<_> = main
            .gemm_back_edge_waits()
            .into_iter()
            .filter(|w| w.on_read && w.setter_opcode.starts_with("SYNCS.ARRIVE"))
            .collect();
        assert!(waits.is_empty(), "{}: {waits:#?}", k.label());
    }
}

#[test]
fn inspect_lists_every_gemm_loop_back_edge_wait_with_what_it_waits_for() {
    if !nvrtc_or_skip() {
        return;
    }
    for args in [
        &["attention", "--inspect", "--head-dim", "128"][..],
        &["attention", "--inspect", "--backward", "--head-dim", "128"],
        &[
            "attention",
            "--inspect",
            "--backward",
            "--synthetic-mask",
            "random:0.5",
        ],
    ] {
        check_inspect_report(args);
    }
}

/// Runs `fragmask ARGS` (an --inspect command) and checks its GEMM loop report.
fn check_inspect_report(args: &[&str]) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if text.contains("SASS: not inspected") {
        nvrtc::sass_or_skip::<(), _>(Err("fragmask attention --inspect: no cuobjdump"));
        return;
    }
    let head = text
        .lines()
        .find(|l| l.starts_with("GEMM loops "))
        .unwrap_or_else(|| panic!("no GEMM loop line in:\n{text}"));
    // "GEMM loops N, back-edge waits W, waits carried over a back-edge C", then W + C lines
    // naming the waiting instruction and the one it waits for.
    let numbers: Vec<usize> = head
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(numbers.len() == 3 && numbers[0] >= 1, "{head}");
    let listed = |kind: &str| text.lines().filter(|l| l.starts_with(kind)).count();
    assert_eq!(listed("  back-edge 0x"), numbers[1], "{text}");
    assert_eq!(listed("  carried 0x"), numbers[2], "{text}");
    // Each of these kernels has one softmax step loop: its issue lead is listed.
    assert_eq!(listed("  first GEMM issue 0x"), 1, "{text}");
}

/// Whether ptxas' log says it serialised a kernel's wgmmas (a wait after every issue),
/// whatever the reason code.
fn serialised_wgmmas(log: &str) -> bool {
    !fragmask::host::ptxas::wgmma_serialisation_notes(log).is_empty()
}

/// Registers written by one SASS line (`@P` predicate and `/*addr*/` stripped): its first
/// operand when it is a general register, widened by the opcode's width (`.64`, `.WIDE`
/// two registers; `.128`, `LDSM ... .4` four). Empty for stores, branches and the like.
fn sass_written_registers(line: &str) -> Vec<u32> {
    let body = line.split(';').next().unwrap_or("");
    let mut words = body.split_whitespace().filter(|w| !w.starts_with("/*"));
    let mut opcode = words.next().unwrap_or("");
    if opcode.starts_with('@') {
        opcode = words.next().unwrap_or("");
    }
    let Some(dst) = words.next() else {
        return Vec::new();
    };
    let Some(n) = dst
        .trim_end_matches(',')
        .strip_prefix('R')
        .and_then(|r| r.parse::<u32>().ok())
    else {
        return Vec::new();
    };
    if opcode.starts_with("ST") || opcode.starts_with("RED") || opcode.starts_with("HGMMA") {
        return Vec::new();
    }
    let width = if opcode.contains(".128") || (opcode.starts_with("LDSM") && opcode.ends_with(".4"))
    {
        4
    } else if opcode.contains(".64") || opcode.contains(".WIDE") {
        2
    } else {
        1
    };
    (n..n + width).collect()
}

/// In `function`'s SASS, the A registers of every RS wgmma whose B operand is K-major (no
/// `tnspB`: the forward's QK^T with Q in registers, the backward's S^T / dP^T with K and V in
/// registers) are loop-invariant fragments: `count` registers that no instruction but their
/// `LDSM` writes. ptxas broke this once (the forward's serial loop gave them to P).
fn check_invariant_a_fragments(label: &str, sass: &str, function: &str, count: usize) {
    let body: Vec<&str> = sass
        .lines()
        .skip_while(|l| !l.contains(&format!("Function : {function}")))
        .skip(1)
        .take_while(|l| !l.contains("Function :"))
        .collect();
    let mut a_regs = std::collections::BTreeSet::new();
    for l in body
        .iter()
        .filter(|l| l.contains("HGMMA") && !l.contains("tnspB"))
    {
        // HGMMA D, A, desc: the A operand is the second general register; an SS wgmma has
        // none (its A is a descriptor).
        if let Some(a) = l
            .split_whitespace()
            .filter_map(|w| w.trim_end_matches(',').strip_prefix('R'))
            .filter_map(|r| r.parse::<u32>().ok())
            .nth(1)
        {
            a_regs.extend(a..a + 4);
        }
    }
    assert_eq!(a_regs.len(), count, "{label}: A registers {a_regs:?}");
    for l in &body {
        if sass_written_registers(l).iter().any(|r| a_regs.contains(r)) {
            assert!(
                l.contains("LDSM"),
                "{label}: an A fragment register written by {l}"
            );
        }
    }
}

#[test]
fn q_register_fragments_are_written_only_by_their_ldmatrix() {
    if !nvrtc_or_skip() {
        return;
    }
    // Q's RS A registers stay Q's through the whole loop: ptxas gave them to P in the serial
    // loop (now refused), so every Q-register kernel of the sweep is checked in its SASS.
    let kernels: Vec<AttentionKernel> = AttentionKernel::compile_sweep()
        .unwrap()
        .into_iter()
        .filter(|k| k.q_registers())
        .collect();
    assert!(!kernels.is_empty(), "the sweep has Q-register kernels");
    for k in kernels {
        let compiled = compile_kernel(&k).unwrap_or_else(|e| panic!("{k:?}: {e}"));
        let Some(sass) =
            nvrtc::sass_or_skip(fragmask::check::attention::kernel_sass_text(&compiled))
        else {
            return;
        };
        let label = format!("{k:?}");
        let count = k.head_dim() as usize / 4;
        check_invariant_a_fragments(&label, &sass, "fragmask_attention_fwd", count);
    }
}

#[test]
fn kv_register_fragments_are_written_only_by_their_ldmatrix() {
    use fragmask::host::attention::backward::compile_backward;
    use fragmask::kernels::attention::backward::{BackwardKernel, KERNEL_NAME};
    if !nvrtc_or_skip() {
        return;
    }
    // The backward's K and V RS A fragments (head dim 64, 64-query steps), the same check.
    let kernels: Vec<BackwardKernel> = BackwardKernel::compile_sweep()
        .unwrap()
        .into_iter()
        .filter(|k| k.kv_registers())
        .collect();
    assert!(!kernels.is_empty(), "the sweep has K/V-register kernels");
    for k in kernels {
        let c = compile_backward(&k).unwrap_or_else(|e| panic!("{}: {e}", k.label()));
        let Some(sass) = nvrtc::sass_or_skip(fragmask::check::sass::disassemble(&c.cubin)) else {
            return;
        };
        // K's and V's fragments: head_dim / 4 registers each.
        let count = k.head_dim() as usize / 2;
        check_invariant_a_fragments(&k.label(), &sass, KERNEL_NAME, count);
    }
}

/// The opcodes (with modifiers, sorted) of each innermost GEMM loop without a global
/// store (one holding no other loop: the step loops, not the loops around them and their
/// epilogues) of `function` in `sass`, in order.
fn gemm_loop_opcodes(sass: &str, function: &str) -> Vec<Vec<String>> {
    let functions = fragmask::check::sass::parse_sass(sass).unwrap();
    let f = functions
        .iter()
        .find(|f| f.name == function)
        .unwrap_or_else(|| panic!("no {function} in the SASS"));
    let loops = f.gemm_loops();
    loops
        .iter()
        .filter(|&&(a, b)| {
            !loops
                .iter()
                .any(|&(c, d)| (c, d) != (a, b) && a <= c && d <= b)
        })
        .map(|&(first, back_edge)| {
            f.instructions[first..=back_edge]
                .iter()
                .map(|i| i.opcode.clone())
                .collect::<Vec<String>>()
        })
        .filter(|ops| !ops.iter().any(|op| op.starts_with("STG")))
        .map(|mut ops| {
            ops.sort_unstable();
            ops
        })
        .collect()
}

#[test]
fn outputs_through_their_strides_compile_without_spills_and_keep_every_step_loop() {
    use fragmask::check::sass::disassemble;
    use fragmask::host::attention::backward::compile_backward;
    use fragmask::kernels::attention::backward::{self, BackwardKernel, BackwardMask};
    use fragmask::kernels::attention::KERNEL_NAME;
    if !nvrtc_or_skip() {
        return;
    }
    // O through its strides (AttentionKernel::with_strided_o) on every geometry's default at
    // each head dim, and on the tile lists, split-KV, the documents grid, persistent CTAs and
    // the shared-K/V tile: it compiles without spills, and its step loops keep the contiguous
    // kernel's (only the epilogue's addresses change; assert_step_loops_kept).
    let g128 = Geometry::TILE_128X128;
    let mut forward: Vec<AttentionKernel> = Geometry::SUPPORTED
        .iter()
        .flat_map(|&g| {
            [64, 128, 256].into_iter().filter_map(move |d| {
                AttentionKernel::default_for_geometry(g, d, MaskMode::Window).ok()
            })
        })
        .collect();
    let lists = AttentionKernel::default_for_geometry(g128, 128, MaskMode::Blocks).unwrap();
    let window = AttentionKernel::default_for_geometry(g128, 128, MaskMode::Window).unwrap();
    forward.extend([
        lists,
        lists.with_split_kv(true),
        AttentionKernel::default_for_geometry(g128, 128, MaskMode::Documents).unwrap(),
        window.with_persistent(true).unwrap(),
    ]);
    forward.extend(
        AttentionKernel::shared_kv_sweep()
            .unwrap()
            .into_iter()
            .take(1),
    );
    for k in forward {
        let strided = k.with_strided_o(true);
        compiles_without_spills_and_uses_hgmma(&strided);
        let loops = [k, strided].map(|k| {
            let c = compile_kernel(&k).unwrap_or_else(|e| panic!("{k:?}: {e}"));
            nvrtc::sass_or_skip(disassemble(&c.cubin)).map(|s| gemm_loop_opcodes(&s, KERNEL_NAME))
        });
        let [Some(contiguous), Some(through_strides)] = loops else {
            return;
        };
        assert!(!contiguous.is_empty(), "{}: no GEMM loop", k.label());
        assert_step_loops_kept(&contiguous, &through_strides, &strided.label());
    }
    // dQ, dK and dV through their strides (BackwardKernel::with_strided_grads): the defaults
    // of each head dim and mask, and the GQA group slices (the kv postprocess).
    let mut bwd = Vec::new();
    for d in [64, 128, 256] {
        for mask in BackwardMask::ALL {
            if let Ok(k) = BackwardKernel::default_for(d, mask) {
                bwd.push(k);
                if let Ok(gs) = k.with_group_slices(2) {
                    bwd.push(gs);
                }
            }
        }
    }
    assert!(bwd.len() >= 10, "{} backward kernels", bwd.len());
    for k in bwd {
        let strided = k.with_strided_grads(true);
        let loops = [k, strided].map(|k| {
            let c = compile_backward(&k).unwrap_or_else(|e| panic!("{}: {e}", k.label()));
            assert_eq!(c.spill_bytes, 0, "{} spills", k.label());
            assert!(
                !serialised_wgmmas(&c.log),
                "{}: serialised wgmmas",
                k.label()
            );
            nvrtc::sass_or_skip(disassemble(&c.cubin))
                .map(|s| gemm_loop_opcodes(&s, backward::KERNEL_NAME))
        });
        let [Some(contiguous), Some(through_strides)] = loops else {
            return;
        };
        assert!(!contiguous.is_empty(), "{}: no GEMM loop", k.label());
        assert_step_loops_kept(&contiguous, &through_strides, &strided.label());
    }
}

/// The step loops of a strided-output kernel against the contiguous one's
/// ([`gemm_loop_opcodes`]): as many loops, each with the same HGMMAs and exp2s and at most 2
/// more instructions (ptxas moves a little integer work in or out of a loop when code after
/// it changes: one more in the persistent D=128 window kernel's, for example).
fn assert_step_loops_kept(contiguous: &[Vec<String>], strided: &[Vec<String>], label: &str) {
    assert_eq!(contiguous.len(), strided.len(), "{label}: step loops");
    let count = |ops: &[String], prefix: &str| ops.iter().filter(|o| o.starts_with(prefix)).count();
    for (a, b) in contiguous.iter().zip(strided) {
        for op in ["HGMMA", "MUFU.EX2", "WARPGROUP"] {
            assert_eq!(count(a, op), count(b, op), "{label}: {op} in a step loop");
        }
        assert!(
            b.len() <= a.len() + 2 && a.len() <= b.len() + 2,
            "{label}: a step loop of {} instructions became {}",
            a.len(),
            b.len()
        );
    }
}
