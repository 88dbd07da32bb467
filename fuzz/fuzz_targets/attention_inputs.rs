//! The CLI's attention input path (`fragmask::inputs::attention`) on arbitrary bytes:
//! q/k/v files, FragmentNative and dense mask files, and the --random, --window and
//! --synthetic-mask values must each give Ok or a typed error, never panic, hang or
//! allocate beyond the input's size or the documented limits.
//!
//! Layout of a fuzz input: byte 0 picks the path; bytes 1..7 give a small call shape
//! (for the mask paths) and the split points; byte 7 picks the tile geometry; the rest is
//! the file bytes.
#![no_main]

use fragmask::inputs::attention::{self as inputs, MaskInput};
use fragmask_host::attention::AttentionShape;
use fragmask_kernels::attention::Geometry;
use libfuzzer_sys::fuzz_target;

fn shape(h: &[u8]) -> AttentionShape {
    let heads = 1 + (h[1] % 4) as usize;
    AttentionShape {
        batch: 1 + (h[0] % 2) as usize,
        heads,
        kv_heads: 1,
        seqlen_q: 1 + u16::from_le_bytes([h[2], h[3]]) as usize % 600,
        seqlen_k: 1 + u16::from_le_bytes([h[4], h[5]]) as usize % 600,
        head_dim: [64, 128, 256][(h[6] % 3) as usize],
    }
}

/// Packs an accepted mask only when it is small (fast runs; the packer has its own limit).
fn build(m: MaskInput, s: &AttentionShape, g: &Geometry) {
    if s.batch * s.heads * s.seqlen_q * s.seqlen_k <= 1 << 16 {
        let _ = m.build(s, g);
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (head, body) = data.split_at(8);
    let s = shape(&head[1..]);
    let g = Geometry::SUPPORTED[usize::from(head[7]) % Geometry::SUPPORTED.len()];
    match head[0] % 6 {
        0 => {
            let _ = inputs::qkv_from_safetensors(body, "fuzz");
        }
        1 => {
            // Three files: split the body at two points.
            let a = (head[1] as usize * body.len()) / 256;
            let b = a + ((head[2] as usize) * (body.len() - a)) / 256;
            let (q, rest) = body.split_at(a);
            let (k, v) = rest.split_at(b - a);
            if let (Ok(q), Ok(k), Ok(v)) = (
                inputs::tensor_from_bytes(q, "q", "q"),
                inputs::tensor_from_bytes(k, "k", "k"),
                inputs::tensor_from_bytes(v, "v", "v"),
            ) {
                let _ = inputs::qkv_from_views(&q, &k, &v, ["q", "k", "v"]);
            }
        }
        2 => {
            if let Ok(m) = inputs::packed_mask(body, &s, "fuzz") {
                build(m, &s, &g);
            }
        }
        3 => {
            if let Ok(m) = inputs::dense_mask(body, &s, "fuzz") {
                build(m, &s, &g);
            }
        }
        4 => {
            // Flag values as text: --random, --window, --synthetic-mask.
            let text = String::from_utf8_lossy(body);
            let nums: Vec<usize> = text.split(',').filter_map(|t| t.parse().ok()).collect();
            let _ = inputs::random_shape(&nums);
            let ints: Vec<i64> = text.split(',').filter_map(|t| t.parse().ok()).collect();
            if let Ok(w) = inputs::parse_window(&ints, i32::from(head[3] as i8) * 100) {
                let _ = inputs::window_tiles(&w, &s, &g);
            }
            if let Ok(spec) = inputs::parse_synthetic(&text) {
                if let Ok(m) = inputs::synthetic_mask(spec, 1, &s) {
                    build(m, &s, &g);
                }
            }
        }
        _ => {
            // Any shape from the header bytes, checked against the limits.
            let v: Vec<usize> = body
                .chunks_exact(8)
                .take(6)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as usize)
                .collect();
            if let Ok(s) = inputs::random_shape(&v) {
                let _ = inputs::call_bytes(&s);
            }
        }
    }
});
