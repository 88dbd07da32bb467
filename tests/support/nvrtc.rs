//! Whether a test that compiles CUDA can run: NVRTC present, or a plain "SKIPPED" line
//! without it; under `CI=true` a missing NVRTC fails the test (docs/CONVENTIONS.md).

/// True when NVRTC can be loaded; false (after printing why) when it cannot and CI is not
/// set. Panics under `CI=true` without NVRTC.
pub fn nvrtc_or_skip() -> bool {
    match fragmask::host::toolchain::nvrtc_available() {
        Ok(()) => true,
        Err(e) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("NVRTC is required under CI=true: {e}");
            }
            eprintln!("SKIPPED: no NVRTC ({e})");
            false
        }
    }
}

/// The SASS of a compiled kernel, or `None` (after printing why) when cuobjdump cannot
/// give it and CI is not set. Panics under `CI=true`: scripts/test.sh installs cuobjdump
/// with NVRTC, so a missing one there is a broken setup, not a skip.
#[allow(dead_code)]
pub fn sass_or_skip<T, E: std::fmt::Display>(sass: Result<T, E>) -> Option<T> {
    match sass {
        Ok(s) => Some(s),
        Err(e) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("cuobjdump is required under CI=true: {e}");
            }
            eprintln!("SKIPPED SASS checks: {e}");
            None
        }
    }
}
