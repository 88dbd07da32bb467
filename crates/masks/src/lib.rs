//! Attention-mask sources, tile classification and fragment-native encodings.
//! Filled in by the masks issue.
#![no_std]
