//! Test policy shared by the integration tests of fragmask-host and fragmask-check
//! (crates/check/tests include this file by path).
//!
//! - NVRTC / cuobjdump missing: with `CI=true` the test FAILS (CI must install
//!   the toolchain with scripts/install-cuda-toolchain.sh); otherwise it prints
//!   `SKIPPED: ...` to stderr and returns without claiming anything.
//! - No GPU: GPU tests print `SKIPPED: no GPU` and return. They never pass
//!   silently on a machine without a GPU.
#![allow(dead_code)]

use fragmask_host::{toolchain, Device, Error};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// True if NVRTC is usable; see the module docs for what happens otherwise.
pub fn require_nvrtc() -> bool {
    match toolchain::nvrtc_available() {
        Ok(()) => true,
        Err(e) if in_ci() => panic!(
            "NVRTC is required in CI but could not be loaded: {e}\n\
             (run scripts/install-cuda-toolchain.sh and source the env.sh it writes)"
        ),
        Err(_) => {
            eprintln!("SKIPPED: NVRTC not found (run scripts/install-cuda-toolchain.sh)");
            false
        }
    }
}

/// True if NVRTC and cuobjdump are both usable.
pub fn require_nvrtc_and_cuobjdump() -> bool {
    if !require_nvrtc() {
        return false;
    }
    match toolchain::find_tool("cuobjdump") {
        Ok(_) => true,
        Err(e) if in_ci() => panic!("cuobjdump is required in CI: {e}"),
        Err(_) => {
            eprintln!("SKIPPED: cuobjdump not found (run scripts/install-cuda-toolchain.sh)");
            false
        }
    }
}

/// The first GPU, or `None` after printing `SKIPPED: no GPU`.
pub fn require_gpu() -> Option<Device> {
    match Device::first() {
        Ok(d) => Some(d),
        Err(e) if e.is_no_gpu() => {
            eprintln!("SKIPPED: no GPU ({e})");
            None
        }
        Err(e) => panic!("GPU discovery failed: {e}"),
    }
}

/// Returns the error as a string, for assertions on messages.
pub fn msg(e: &Error) -> String {
    e.to_string()
}

/// docs/architecture.md fact 1: wgmma m64nNk16 f32 accumulator, thread t (0..128), register i.
pub fn fact1_wgmma(t: u32, i: u32) -> (u32, u32) {
    let row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
    let col = 8 * (i / 4) + 2 * (t % 4) + (i % 2);
    (row, col)
}

/// docs/architecture.md fact 4, C: ((4,8),(2,2)):((32,1),(16,8)) over a column-major 16x8 tile.
pub fn fact4_c(lane: u32, r: u32) -> (u32, u32) {
    let idx = 32 * (lane % 4) + (lane / 4) + 16 * (r % 2) + 8 * (r / 2);
    (idx % 16, idx / 16)
}

/// docs/architecture.md fact 4, A: ((4,8),(2,2,2)):((32,1),(16,8,128)) over a column-major 16x16 (m, k) tile.
pub fn fact4_a(lane: u32, v: u32) -> (u32, u32) {
    let idx = 32 * (lane % 4) + (lane / 4) + 16 * (v % 2) + 8 * ((v / 2) % 2) + 128 * (v / 4);
    (idx % 16, idx / 16)
}

/// docs/architecture.md fact 4, B: ((4,8),(2,2)):((16,1),(8,64)) over a column-major 8x16 (n, k) tile.
/// Returns (k, n).
pub fn fact4_b(lane: u32, v: u32) -> (u32, u32) {
    let idx = 16 * (lane % 4) + (lane / 4) + 8 * (v % 2) + 64 * (v / 2);
    (idx / 8, idx % 8)
}
