//! Checking the lightning decode kernel (write-up 003): the CPU f64 reference, the GPU
//! check against it and the benchmark.

pub mod bench;
pub mod check;
pub mod reference;
