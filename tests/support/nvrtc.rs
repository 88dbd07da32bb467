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
