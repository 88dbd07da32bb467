//! Runtime: NVRTC compilation, launches, CPU references, verify and bench.
//! Filled in by the codegen and runtime issue.
