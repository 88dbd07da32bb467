//! Deterministic random sources of the checks and benchmarks: SplitMix64 and the dense
//! mask patterns of `fragmask verify` and `fragmask bench packer`.

/// SplitMix64: the benchmark's and the checks' deterministic random source.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Contents of generated dense masks (tests, `fragmask verify`, `fragmask bench packer`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DensePattern {
    /// Each byte 1 with this probability (SplitMix64, deterministic per seed).
    Random(f64),
    /// `k <= q` (top-left aligned causal).
    Causal,
    /// Per 128 × 128 block of the mask: all 1, all 0, or random 50%, in turn — so a
    /// tiled packer sees full, empty and partial tiles (and ragged edges).
    Blocks,
}

impl DensePattern {
    /// A short name, e.g. `random-50%`.
    pub fn name(&self) -> String {
        match self {
            DensePattern::Random(p) => format!("random-{}%", (p * 100.0).round()),
            DensePattern::Causal => "causal".into(),
            DensePattern::Blocks => "blocks".into(),
        }
    }

    /// `planes × seqlen_q × seqlen_k` bytes (0 or 1).
    pub fn generate(&self, planes: usize, seqlen_q: usize, seqlen_k: usize, seed: u64) -> Vec<u8> {
        let n = planes * seqlen_q * seqlen_k;
        let mut state = seed;
        match *self {
            DensePattern::Random(p) => {
                let threshold = (p.clamp(0.0, 1.0) * 65536.0) as u64;
                let mut out = Vec::with_capacity(n);
                while out.len() < n {
                    let r = splitmix64(&mut state);
                    for k in 0..4 {
                        if out.len() < n {
                            out.push(u8::from((r >> (16 * k)) & 0xffff < threshold));
                        }
                    }
                }
                out
            }
            DensePattern::Causal => (0..n)
                .map(|i| {
                    let q = i / seqlen_k % seqlen_q;
                    let k = i % seqlen_k;
                    u8::from(k <= q)
                })
                .collect(),
            DensePattern::Blocks => (0..n)
                .map(|i| {
                    let q = i / seqlen_k % seqlen_q;
                    let k = i % seqlen_k;
                    let plane = i / (seqlen_k * seqlen_q);
                    match (q / 128 * 7 + k / 128 * 3 + plane) % 3 {
                        0 => 1,
                        1 => 0,
                        _ => (splitmix64(&mut state) & 1) as u8,
                    }
                })
                .collect(),
        }
    }
}
