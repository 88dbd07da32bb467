//! Checking the decode kernels: the CPU f64 reference and the LSE merge of partial
//! results it is built on, the GPU check against it over random and swept inputs, the
//! benchmark, and the random masks and top-k lists they draw.

pub mod bench;
pub mod check;
pub mod masks;
pub mod merge;
pub mod reference;

#[cfg(test)]
mod mask_tests;

/// A contiguous-cache bf16 decode shape of one query token and head dim 128 (tests).
#[cfg(test)]
pub(crate) fn test_shape(
    batch: usize,
    heads: usize,
    kv_heads: usize,
    sk: usize,
) -> fragmask_host::decode::DecodeShape {
    fragmask_host::decode::DecodeShape {
        batch,
        seqlen_q: 1,
        heads,
        kv_heads,
        head_dim: 128,
        dtype: fragmask_kernels::family::dtype::ActDtype::Bf16,
        cache: fragmask_host::decode::CacheShape::Contiguous { capacity: sk },
        window_left: None,
        window_right: None,
        softmax_scale: None,
    }
}
