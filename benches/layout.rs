//! Criterion benchmarks of the layout algebra on typical tile layouts: the
//! FlashAttention-3 wgmma accumulator TV layout, 128x128 tiles and 64x16 tilers.
//!
//! Run: `cargo bench --bench layout` (add `-- --quick` for a short run).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use fragmask_layout::{
    blocked_product, coalesce, complement, composition, logical_divide, logical_divide_by_mode,
    raked_product, right_inverse, zipped_divide_by_mode, Layout,
};

fn layout(text: &str) -> Layout {
    Layout::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The m64n128k16 accumulator: thread-value layout into a column-major 64x128 tile.
fn tv_64x128() -> Layout {
    layout("((4,8,4),(2,2,16)):((128,1,16),(64,8,512))")
}

fn bench_composition(c: &mut Criterion) {
    let tv = tv_64x128();
    // The same tile stored row-major: composing gives each (thread, value)'s offset.
    let row_major = layout("(64,128):(128,1)");
    let tile_128 = layout("(128,128):(1,128)");
    let tiler = layout("(64,16):(1,128)");
    // Every benchmarked operation is defined on these inputs.
    assert!(composition(&row_major, &tv).is_ok() && composition(&tile_128, &tiler).is_ok());
    assert!(right_inverse(&tv).is_ok_and(|r| r.size() == Ok(64 * 128)));
    let mut group = c.benchmark_group("composition");
    group.bench_function("row_major_64x128 o tv_64x128", |b| {
        b.iter(|| composition(black_box(&row_major), black_box(&tv)))
    });
    group.bench_function("tile_128x128 o (64,16):(1,128)", |b| {
        b.iter(|| composition(black_box(&tile_128), black_box(&tiler)))
    });
    group.bench_function("coalesce tv_64x128", |b| {
        b.iter(|| coalesce(black_box(&tv)))
    });
    group.bench_function("right_inverse tv_64x128", |b| {
        b.iter(|| right_inverse(black_box(&tv)))
    });
    group.finish();
}

fn bench_complement(c: &mut Criterion) {
    let threads = layout("(4,8,4):(128,1,16)");
    let tiler = layout("(64,16):(1,128)");
    assert!(complement(&threads, 64 * 128).is_ok() && complement(&tiler, 128 * 128).is_ok());
    let mut group = c.benchmark_group("complement");
    group.bench_function("thread mode of tv_64x128 in 64x128", |b| {
        b.iter(|| complement(black_box(&threads), black_box(64 * 128)))
    });
    group.bench_function("(64,16):(1,128) in 128x128", |b| {
        b.iter(|| complement(black_box(&tiler), black_box(128 * 128)))
    });
    group.finish();
}

fn bench_logical_divide(c: &mut Criterion) {
    let tile_128 = layout("(128,128):(1,128)");
    let tilers = [layout("64:1"), layout("16:1")];
    let tv = tv_64x128();
    let warp = layout("32:1");
    assert!(logical_divide_by_mode(&tile_128, &tilers).is_ok());
    assert!(
        zipped_divide_by_mode(&tile_128, &tilers).is_ok() && logical_divide(&tv, &warp).is_ok()
    );
    let mut group = c.benchmark_group("logical_divide");
    group.bench_function("tile_128x128 by <64:1,16:1>", |b| {
        b.iter(|| logical_divide_by_mode(black_box(&tile_128), black_box(&tilers)))
    });
    group.bench_function("zipped tile_128x128 by <64:1,16:1>", |b| {
        b.iter(|| zipped_divide_by_mode(black_box(&tile_128), black_box(&tilers)))
    });
    group.bench_function("tv_64x128 by 32:1", |b| {
        b.iter(|| logical_divide(black_box(&tv), black_box(&warp)))
    });
    group.finish();
}

fn bench_blocked_product(c: &mut Criterion) {
    let block = layout("(64,16):(1,64)");
    let tiler = layout("(2,8):(1,2)");
    let product = blocked_product(&block, &tiler).unwrap();
    assert_eq!(product.size(), Ok(128 * 128));
    assert!(raked_product(&block, &tiler).is_ok());
    let mut group = c.benchmark_group("blocked_product");
    group.bench_function("(64,16) block over (2,8) -> 128x128", |b| {
        b.iter(|| blocked_product(black_box(&block), black_box(&tiler)))
    });
    group.bench_function("raked (64,16) block over (2,8)", |b| {
        b.iter(|| raked_product(black_box(&block), black_box(&tiler)))
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_composition,
    bench_complement,
    bench_logical_divide,
    bench_blocked_product
);
criterion_main!(benches);
