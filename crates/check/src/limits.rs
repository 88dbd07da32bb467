//! Memory budgets every size from a flag or a file is checked against before anything
//! is drawn or allocated (docs/architecture.md, "Checking code beside the runtime").

/// Most host memory one check's inputs and CPU reference may take: random inputs in
/// their element type and as f64, the f64 reference's outputs and the GPU's results
/// read back (4 GiB).
pub const MAX_HOST_BYTES: usize = 4 << 30;

/// `Σ count × bytes` over `terms`, or `None` on overflow.
pub fn sum_of_products(terms: &[(usize, usize)]) -> Option<usize> {
    terms.iter().try_fold(0usize, |acc, &(count, bytes)| {
        count.checked_mul(bytes).and_then(|b| acc.checked_add(b))
    })
}
