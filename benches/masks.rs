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
//! The roof: `read_only_roof` reads the same bytes with the same scheduling and no
//! output (a XOR reduction), the memory bound both packers share. Because this box's
//! memory bandwidth drifts by several percent over seconds, `dense_bool_pairs` also
//! times the two packers in interleaved pairs (order flipped every pair) and prints
//! the median of the per-pair speed ratios, which drift cannot bias.
//!
//! `transposed_pairs` prices the backward pass's transposed lists
//! (`pack_transposed`: the forward packing plus the transposed lists and every partial
//! tile re-encoded for the backward accumulator) against `pack` alone, on the same
//! random 50% dense mask, again in interleaved pairs with the median ratio printed.
//!
//! `cargo bench --bench masks` (docs/PERF.md records a run). FRAGMASK_BENCH_SIZES
//! (comma-separated S, default 8192,16384) and FRAGMASK_BENCH_TIME (seconds of
//! measurement per point, default 5) shorten a run.

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fragmask_masks::{
    pack, pack_transposed, plain_bit_pack, DenseMask, Encoding, MaskShape, PackOptions,
    TiledAccumulator, TopKMask,
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

/// Reads every byte of `bytes` once with all available threads, drawing 128-row bands
/// from a shared counter as the packers do, and returns the XOR of its 8-byte words.
fn read_only_roof(bytes: &[u8], s: usize) -> u64 {
    let band = 128 * s;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = AtomicUsize::new(0);
    let total = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut acc = 0u64;
                while let Some(chunk) = bytes.chunks(band).nth(next.fetch_add(1, Ordering::Relaxed))
                {
                    for word in chunk.chunks_exact(8) {
                        acc ^= u64::from_le_bytes(word.try_into().unwrap());
                    }
                }
                total.fetch_xor(acc, Ordering::Relaxed);
            });
        }
    });
    total.into_inner()
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
        group.bench_with_input(BenchmarkId::new("read_only_roof", s), &bools, |b, bools| {
            b.iter(|| black_box(read_only_roof(bools, s)))
        });
        group.bench_with_input(
            BenchmarkId::new("plain_row_major_bits", s),
            &bools,
            |b, bools| b.iter(|| black_box(plain_bit_pack(bools, s, s, 0))),
        );
        let mask = DenseMask::new(&bools, &[s, s]).unwrap();
        group.bench_with_input(BenchmarkId::new("fragment_native", s), &mask, |b, mask| {
            b.iter(|| black_box(pack(mask, &acc, Encoding::FragmentNative, &options).unwrap()))
        });
        let backward = TiledAccumulator::new(128, 128, 2, true).unwrap();
        group.bench_with_input(
            BenchmarkId::new("fragment_native_transposed", s),
            &mask,
            |b, mask| {
                b.iter(|| {
                    black_box(
                        pack_transposed(mask, &acc, Encoding::FragmentNative, &backward, &options)
                            .unwrap(),
                    )
                })
            },
        );
    }
    group.finish();
}

/// Plain and FragmentNative timed in interleaved pairs; prints the median, quartiles
/// and count of the per-pair ratios plain time / FragmentNative time (> 1: the
/// FragmentNative packer is faster). Criterion's own line is the time of a pair.
fn dense_pairs(c: &mut Criterion) {
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let options = PackOptions::default();
    let mut group = c.benchmark_group("dense_bool_pairs");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(2 * measurement());
    for s in sizes() {
        let bools = random_bools(s);
        let mask = DenseMask::new(&bools, &[s, s]).unwrap();
        let plain = || {
            let start = Instant::now();
            black_box(plain_bit_pack(&bools, s, s, 0));
            start.elapsed()
        };
        let fused = || {
            let start = Instant::now();
            black_box(pack(&mask, &acc, Encoding::FragmentNative, &options).unwrap());
            start.elapsed()
        };
        group.throughput(Throughput::Bytes(2 * (s * s) as u64));
        let id = BenchmarkId::new("plain_and_fragment_native", s);
        let ratios = interleaved_ratios(&mut group, id, plain, fused);
        print_ratios(
            &format!("dense_bool_pairs/{s}: plain / fragment_native time"),
            ratios,
        );
    }
    group.finish();
}

/// Forward-only and forward + transposed packing of the same dense mask, timed in
/// interleaved pairs (order flipped every pair); prints the median, quartiles and count
/// of the per-pair ratios (with transposed) / (forward only): the extra cost of the
/// transposed lists as a factor.
fn transposed_pairs(c: &mut Criterion) {
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let backward = TiledAccumulator::new(128, 128, 2, true).unwrap();
    let options = PackOptions::default();
    let mut group = c.benchmark_group("transposed_pairs");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(2 * measurement());
    for s in sizes() {
        let bools = random_bools(s);
        let mask = DenseMask::new(&bools, &[s, s]).unwrap();
        let forward = || {
            let start = Instant::now();
            black_box(pack(&mask, &acc, Encoding::FragmentNative, &options).unwrap());
            start.elapsed()
        };
        let both = || {
            let start = Instant::now();
            black_box(
                pack_transposed(&mask, &acc, Encoding::FragmentNative, &backward, &options)
                    .unwrap(),
            );
            start.elapsed()
        };
        group.throughput(Throughput::Bytes(2 * (s * s) as u64));
        let id = BenchmarkId::new("forward_and_transposed", s);
        let ratios = interleaved_ratios(&mut group, id, both, forward);
        print_ratios(
            &format!("transposed_pairs/{s}: pack_transposed / pack time"),
            ratios,
        );
    }
    group.finish();
}

/// Times `first` and `second` in interleaved pairs (the order flipped every pair) as one
/// benchmark `id` of `group`, and returns each pair's time ratio `first / second`: drift
/// of the box's memory bandwidth over seconds cannot bias a ratio of neighbours. Empty
/// when the command line filtered the benchmark out.
fn interleaved_ratios(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    first: impl Fn() -> Duration,
    second: impl Fn() -> Duration,
) -> Vec<f64> {
    let ratios = RefCell::new(Vec::new());
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                let (a, z) = if i % 2 == 0 {
                    let a = first();
                    (a, second())
                } else {
                    let z = second();
                    (first(), z)
                };
                total += a + z;
                ratios.borrow_mut().push(a.as_secs_f64() / z.as_secs_f64());
            }
            total
        })
    });
    ratios.into_inner()
}

/// Prints the median, quartiles and count of per-pair ratios (nothing when empty).
fn print_ratios(what: &str, mut ratios: Vec<f64>) {
    if ratios.is_empty() {
        return;
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    println!(
        "{what}, {} interleaved pairs: median {:.3}x, quartiles [{:.3}x, {:.3}x]",
        ratios.len(),
        at(0.5),
        at(0.25),
        at(0.75)
    );
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

criterion_group!(benches, dense, dense_pairs, transposed_pairs, topk);
criterion_main!(benches);
