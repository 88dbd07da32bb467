//! The proptest configuration of every property test in the workspace, included with
//! `#[path = ".../tests/support/proptest_ci.rs"] mod proptest_ci;` (docs/CONVENTIONS.md,
//! "Property tests").
//!
//! - Under `CI=true` the RNG seed is fixed ([`CI_SEED`]): every CI run generates the
//!   same cases, so a CI failure is reproducible and CI cannot flake.
//! - Elsewhere the seed is random, so local runs keep exploring new cases.
//! - `PROPTEST_RNG_SEED=n` wins over both (proptest reads it itself).
//! - A failing case is persisted under `proptest-regressions/` next to the test source
//!   and replayed first on every later run; commit those files. A minimal failing input
//!   worth keeping beyond a generator change also gets an explicit `#[test]`.
#![allow(dead_code)]

extern crate std;

use proptest::test_runner::{Config, RngSeed};

/// The seed of every property test under `CI=true`.
pub const CI_SEED: u64 = 0x2026_1123_F4A6_0001;

/// Whether this is a CI run (`CI=true`, as set by .ci/run and most CI services).
pub fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The seed: `PROPTEST_RNG_SEED` if set, else fixed under CI, else random.
pub fn rng_seed() -> RngSeed {
    let from_env = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    match from_env {
        Some(seed) => RngSeed::Fixed(seed),
        None if is_ci() => RngSeed::Fixed(CI_SEED),
        None => RngSeed::Random,
    }
}

/// `cases` cases with the seed of [`rng_seed`] and failure persistence on.
pub fn config(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: rng_seed(),
        ..Config::default()
    }
}
