//! NVRTC compilation: cubin and PTX output, compile errors with the log, the
//! on-disk cache. No GPU needed.

mod common;

use fragmask_host::nvrtc::CacheStatus;
use fragmask_host::{Arch, CompileOptions, Compiler, Error};

const GOOD: &str = r#"extern "C" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }"#;

fn temp_cache(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "fragmask-nvrtc-test-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn cubin_is_an_elf_for_sm90a() {
    if !common::require_nvrtc() {
        return;
    }
    let cubin = Compiler::uncached()
        .compile_cubin(GOOD, &CompileOptions::new(Arch::sm90a()))
        .unwrap();
    assert_eq!(&cubin.bytes[..4], b"\x7fELF");
    assert_eq!(cubin.cache, CacheStatus::Disabled);
    assert!(
        cubin.log.contains("add_one"),
        "ptxas -v report expected:\n{}",
        cubin.log
    );
}

#[test]
fn ptx_targets_the_virtual_arch() {
    if !common::require_nvrtc() {
        return;
    }
    let ptx = Compiler::uncached()
        .compile_ptx(GOOD, &CompileOptions::new(Arch::sm90a()))
        .unwrap();
    assert!(
        ptx.text.contains(".target sm_90a"),
        "{}",
        &ptx.text[..ptx.text.len().min(400)]
    );
    assert!(ptx.text.contains(".visible .entry add_one"));
}

#[test]
fn wgmma_ptx_contains_the_instruction() {
    if !common::require_nvrtc() {
        return;
    }
    let src = fragmask_host::kernels::probe::wgmma_accumulator_probe(64, 1).unwrap();
    let ptx = Compiler::uncached()
        .compile_ptx(&src, &CompileOptions::new(Arch::sm90a()))
        .unwrap();
    for needle in [
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned 0",
        "fence.proxy.async.shared::cta",
    ] {
        assert!(ptx.text.contains(needle), "missing {needle}");
    }
}

#[test]
fn compile_errors_carry_the_log() {
    if !common::require_nvrtc() {
        return;
    }
    let bad = "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }";
    match Compiler::uncached().compile_cubin(bad, &CompileOptions::new(Arch::sm90a())) {
        Err(Error::Compile { log, options }) => {
            assert!(log.contains("undefined_name"), "{log}");
            assert!(options.iter().any(|o| o == "--gpu-architecture=sm_90a"));
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn bad_options_and_nul_bytes_are_errors_not_panics() {
    if !common::require_nvrtc() {
        return;
    }
    let c = Compiler::uncached();
    let mut opts = CompileOptions::new(Arch::sm90a());
    opts.extra.push("--no-such-nvrtc-option".into());
    assert!(matches!(
        c.compile_cubin(GOOD, &opts),
        Err(Error::Compile { .. })
    ));
    opts.extra = vec!["-DX=\0".into()];
    assert!(matches!(
        c.compile_cubin(GOOD, &opts),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        c.compile_cubin("a\0b", &CompileOptions::new(Arch::sm90a())),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn cache_stores_then_hits() {
    if !common::require_nvrtc() {
        return;
    }
    let dir = temp_cache("hit");
    let c = Compiler::with_cache_dir(&dir);
    let opts = CompileOptions::new(Arch::sm90a());
    let first = c.compile_cubin(GOOD, &opts).unwrap();
    assert_eq!(first.cache, CacheStatus::Stored);
    let second = c.compile_cubin(GOOD, &opts).unwrap();
    assert_eq!(second.cache, CacheStatus::Hit);
    assert_eq!(first.bytes, second.bytes);
    assert_eq!(first.log, second.log);
    // A different source or option is a different entry.
    let third = c
        .compile_cubin(&format!("{GOOD}\n// changed"), &opts)
        .unwrap();
    assert_eq!(third.cache, CacheStatus::Stored);
    let ptx = c.compile_ptx(GOOD, &opts).unwrap();
    assert_eq!(ptx.cache, CacheStatus::Stored);
    assert_eq!(c.compile_ptx(GOOD, &opts).unwrap().cache, CacheStatus::Hit);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_state_merge_compiles_for_bf16_and_fp16() {
    if !common::require_nvrtc() {
        return;
    }
    use fragmask_host::kernels::family::combine::{merge_into_source, MERGE_INTO_KERNEL};
    use fragmask_host::kernels::family::dtype::ActDtype;
    for dtype in [ActDtype::Bf16, ActDtype::F16] {
        let ptx = Compiler::uncached()
            .compile_ptx(
                &merge_into_source(dtype),
                &CompileOptions::new(Arch::sm90a()),
            )
            .unwrap();
        assert!(ptx
            .text
            .contains(&format!(".visible .entry {MERGE_INTO_KERNEL}")));
        assert!(ptx.text.contains("bar.sync"));
    }
}
