//! CPU packers: dense bool → FragmentNative against plain row-major bit packing of the
//! same input (GB/s of bool input), and top-k lists → FragmentNative (nonzeros/s).
//!
//! The two dense packers are matched: both take all available threads, drawing
//! 128-row bands from a shared counter and writing into one preallocated output, and
//! both run AVX2 kernels (when detected) with the same software prefetch distance:
//! `plain_bit_pack` is `vpaddusb` + `vpmovmskb` per 32 bytes, `pack` the fused
//! FragmentNative kernel (the same two instructions plus the byte shuffles of the
//! reorder).
//!
//! `cargo bench --bench masks` (docs/PERF.md records a run). FRAGMASK_BENCH_SIZES
//! (comma-separated S, default 8192,16384) and FRAGMASK_BENCH_TIME (seconds of
//! measurement per point, default 5) shorten a run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fragmask_masks::{
    pack, plain_bit_pack, DenseMask, Encoding, MaskShape, PackOptions, TiledAccumulator, TopKMask,
};

fn sizes() -> Vec<usize> {
    std::env::var("FRAGMASK_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![8192, 16384])
}

fn measurement() -> Duration {
    let secs = std::env::var("FRAGMASK_BENCH_TIME")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    Duration::from_secs_f64(secs)
}

/// splitmix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A random token mask, 50% kept: every 128×128 tile is partial (the packer's worst
/// case: nothing skipped, every tile reordered).
fn random_bools(s: usize) -> Vec<u8> {
    let mut rng = Rng(s as u64);
    let mut out = vec![0u8; s * s];
    for chunk in out.chunks_mut(64) {
        let bits = rng.next();
        for (i, b) in chunk.iter_mut().enumerate() {
            *b = ((bits >> i) & 1) as u8;
        }
    }
    out
}

/// k = S/8 distinct random keys per query, as fixed-k lists (unsorted).
fn random_topk(s: usize) -> TopKMask {
    let k = s / 8;
    let mut rng = Rng(7 * s as u64);
    let mut keys: Vec<i32> = (0..s as i32).collect();
    let mut fixed = Vec::with_capacity(s * k);
    for _ in 0..s {
        for j in 0..k {
            let pick = j + (rng.next() % (s - j) as u64) as usize;
            keys.swap(j, pick);
        }
        fixed.extend_from_slice(&keys[..k]);
    }
    TopKMask::from_fixed_k(MaskShape::new(1, 1, s, s).unwrap(), k, &fixed).unwrap()
}

fn dense(c: &mut Criterion) {
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let options = PackOptions::default();
    let mut group = c.benchmark_group("dense_bool");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(measurement());
    for s in sizes() {
        let bools = random_bools(s);
        group.throughput(Throughput::Bytes((s * s) as u64));
        group.bench_with_input(
            BenchmarkId::new("plain_row_major_bits", s),
            &bools,
            |b, bools| b.iter(|| black_box(plain_bit_pack(bools, s, s, 0))),
        );
        let mask = DenseMask::new(&bools, &[s, s]).unwrap();
        group.bench_with_input(BenchmarkId::new("fragment_native", s), &mask, |b, mask| {
            b.iter(|| black_box(pack(mask, &acc, Encoding::FragmentNative, &options).unwrap()))
        });
    }
    group.finish();
}

fn topk(c: &mut Criterion) {
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let options = PackOptions::default();
    let mut group = c.benchmark_group("topk");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(measurement());
    for s in sizes() {
        let topk = random_topk(s);
        group.throughput(Throughput::Elements(topk.nnz() as u64));
        group.bench_with_input(BenchmarkId::new("fragment_native", s), &topk, |b, topk| {
            b.iter(|| black_box(pack(topk, &acc, Encoding::FragmentNative, &options).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, dense, topk);
criterion_main!(benches);
