//! Every kernel of the family is assembled from components defined once
//! (docs/architecture.md §3): in the generated source of every variant the compile sweeps
//! cover, no device function is defined twice, under one name or under two names with the
//! same body (a copied helper renamed, as decode's `fm_smem_addr` once was of the prelude's
//! `fm_smem_u32`). No compiler needed.

use std::collections::BTreeMap;

use fragmask_kernels::attention::backward::BackwardKernel;
use fragmask_kernels::attention::{ActDtype, AttentionKernel};
use fragmask_kernels::decode::{DecodeConfig, KvLayout};
use fragmask_kernels::lightning::LightningConfig;

/// `(signature, body)` of every `__device__` function definition of `src`; the body with
/// white space folded and comments dropped.
fn device_functions(src: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find("__device__ __forceinline__") {
        let after = &rest[at..];
        let (Some(paren), Some(open)) = (after.find('('), after.find('{')) else {
            break;
        };
        // A declaration without a body up to the next ';' is not a definition.
        if after.find(';').is_some_and(|semi| semi < open) || paren > open {
            rest = &after[1..];
            continue;
        }
        let signature = after[..open]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let mut depth = 0usize;
        let mut end = open;
        for (i, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        let body: String = after[open..end]
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .flat_map(str::split_whitespace)
            .collect::<Vec<_>>()
            .join(" ");
        out.push((signature, body));
        rest = &after[end.max(1)..];
    }
    out
}

fn assert_each_function_defined_once(label: &str, src: &str) {
    let functions = device_functions(src);
    assert!(!functions.is_empty(), "{label}: no device functions found");
    let mut by_signature = BTreeMap::new();
    let mut by_body: BTreeMap<&str, &str> = BTreeMap::new();
    for (signature, body) in &functions {
        assert!(
            by_signature.insert(signature.as_str(), ()).is_none(),
            "{label}: `{signature}` is defined twice"
        );
        if let Some(other) = by_body.insert(body.as_str(), signature.as_str()) {
            panic!("{label}: `{signature}` has the body of `{other}`");
        }
    }
}

#[test]
fn forward_and_split_kv_forward_define_each_function_once() {
    for k in AttentionKernel::compile_sweep().unwrap() {
        assert_each_function_defined_once(&format!("{k:?}"), &k.source().unwrap());
    }
}

#[test]
fn backward_defines_each_function_once() {
    for k in BackwardKernel::compile_sweep().unwrap() {
        assert_each_function_defined_once(&k.label(), &k.source().unwrap());
    }
}

#[test]
fn decode_defines_each_function_once() {
    for dtype in [ActDtype::Bf16, ActDtype::F16] {
        for kv in [KvLayout::Contiguous, KvLayout::Paged { page_size: 16 }] {
            let base = DecodeConfig::new(128, dtype, kv).unwrap();
            let shared = base.with_shared_kv().unwrap();
            for config in [
                base,
                shared,
                base.with_mask_block_n(64).unwrap(),
                shared.with_mask_block_n(64).unwrap(),
            ] {
                let src = fragmask_kernels::decode::source::source(config).unwrap();
                assert_each_function_defined_once(&format!("{config:?}"), &src);
            }
        }
    }
}

#[test]
fn lightning_defines_each_function_once() {
    for c in LightningConfig::candidates(128, 128, ActDtype::Bf16) {
        let src = fragmask_kernels::lightning::source::source(c).unwrap();
        assert_each_function_defined_once(&format!("{c:?}"), &src);
    }
}

#[test]
fn the_checker_finds_a_renamed_copy() {
    let src = "__device__ __forceinline__ float fm_a(float x) { return x; }\n\
               __device__ __forceinline__ float fm_b(float x) {\n    return x;   // same\n}\n";
    let caught = std::panic::catch_unwind(|| assert_each_function_defined_once("copy", src));
    assert!(caught.is_err());
    assert_eq!(device_functions(src).len(), 2);
}
