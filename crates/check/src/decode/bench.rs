//! Measuring decode: the median of CUDA-event timings after a warm-up, rotating among
//! enough KV caches that they do not sit in L2, beside a device-to-device copy measured
//! the same way (the roof: bytes read plus written), and the same launches replayed as
//! one CUDA graph.

use fragmask_host::cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use fragmask_host::decode::{
    driver, DecodeError, DecodeMask, DecodeMaskDevice, DecodeOutput, DecodePlan, DecodePointers,
    DecodeRunner, DecodeTensors, DecodeWorkspace,
};

/// What a benchmarked call adds to the plain one.
#[derive(Clone, Copy, Debug, Default)]
pub struct BenchExtra<'a> {
    /// A block-sparse mask (the runner and plan masked for it).
    pub mask: Option<&'a DecodeMask>,
    /// A block table to use for every input set instead of a generated one (top-k
    /// gathers: [`fragmask_host::decode::mask::topk_gather`]).
    pub block_table: Option<&'a [i32]>,
    /// `cu_seqlens_q` of a varlen plan ([`DecodePlan::with_varlen`]).
    pub cu_seqlens_q: Option<&'a [i32]>,
}

/// Bytes a masked call must read at least: K and V of the union of the key blocks any
/// row block of each (request, KV head) lists (clamped to the keys), q, and o.
pub fn masked_bytes(plan: &DecodePlan, mask: &DecodeMask) -> usize {
    let s = &plan.shape;
    let e = s.dtype.size();
    let g = s.group();
    let mut keys = 0usize;
    for b in 0..s.batch {
        for hkv in 0..s.kv_heads {
            let mut seen = vec![false; mask.n_blocks];
            // Heads of the KV head's group share its K and V (a per-head mask has G = 1).
            for h in hkv * g..(hkv + 1) * g {
                let mb = if mask.batch == 1 { 0 } else { b };
                let mh = if mask.heads == 1 { 0 } else { h };
                for m in 0..mask.m_blocks {
                    let r = (mb * mask.heads + mh) * mask.m_blocks + m;
                    for e in 0..mask.count[r] as usize {
                        seen[mask.list[(r * mask.n_blocks + e) * 2] as usize] = true;
                    }
                }
            }
            for (n, _) in seen.iter().enumerate().filter(|(_, &x)| x) {
                let lo = n * mask.block_n;
                keys += (lo + mask.block_n)
                    .min(mask.seqlen_k)
                    .min(s.cache.capacity())
                    .saturating_sub(lo);
            }
        }
    }
    2 * keys * s.head_dim * e + 2 * s.batch * s.seqlen_q * s.heads * s.head_dim * e
}

use super::check::block_table;
use crate::lightning::check::random_activations;
use crate::random::splitmix64;
use crate::timing::{time_on_stream, TimingConfig};

/// One measured decode call.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// The plan that ran.
    pub plan: DecodePlan,
    /// Input sets rotated through.
    pub sets: usize,
    /// Median time of one call, ms.
    pub ms: f64,
    /// Bytes one call must move (K and V of every key, q read, o written).
    pub bytes: usize,
    /// `bytes / ms`, GB/s.
    pub gbps: f64,
    /// Median time of one call replayed in a CUDA graph, ms.
    pub graph_ms: f64,
}

/// A device-to-device copy of `bytes`: `(median ms, GB/s counting read + write)`.
pub fn copy_roof(
    runner: &DecodeRunner,
    bytes: usize,
    timing: TimingConfig,
) -> Result<(f64, f64), DecodeError> {
    let s = runner.stream();
    let src: CudaSlice<u8> = s
        .alloc_zeros(bytes)
        .map_err(driver("allocating the copy buffers"))?;
    let mut dst: CudaSlice<u8> = s
        .alloc_zeros(bytes)
        .map_err(driver("allocating the copy buffers"))?;
    let t = time_on_stream(s, timing, |s| {
        s.memcpy_dtod(&src, &mut dst)
            .map_err(fragmask_host::Error::driver("copying"))
    })?;
    Ok((t.median_ms, 2.0 * bytes as f64 / (t.median_ms * 1e6)))
}

/// `n` random activations of the plan's dtype: a block of at most 4 Mi values, repeated
/// (timing needs non-zero data, not fresh data).
fn random_bytes(plan: &DecodePlan, n: usize, seed: &mut u64) -> Result<Vec<u8>, DecodeError> {
    let block = n.min(4 << 20);
    let (one, _) = random_activations(plan.shape.dtype, block, seed);
    let total = n
        .checked_mul(plan.shape.dtype.size())
        .ok_or(DecodeError::Overflow("benchmark inputs"))?;
    let mut out = Vec::new();
    out.try_reserve_exact(total).map_err(|_| {
        DecodeError::Gpu(fragmask_host::Error::InvalidArgument(format!(
            "{total} bytes of host memory for the benchmark inputs are not available"
        )))
    })?;
    while out.len() < total {
        let take = (total - out.len()).min(one.len());
        out.extend_from_slice(&one[..take]);
    }
    Ok(out)
}

/// Most bytes of K and V one benchmarked call may hold (an H100 has 80 GB).
pub const MAX_BENCH_CACHE_BYTES: usize = 32 << 30;

/// Times `plan` with every request at `plan.max_seqlen_k` keys (masked: at capacity) (paged: pages shuffled
/// when `shuffle_pages`), rotating among input sets whose caches add up to at least
/// `rotate_bytes` (at most 64 sets).
pub fn bench(
    runner: &DecodeRunner,
    plan: &DecodePlan,
    shuffle_pages: bool,
    timing: TimingConfig,
    rotate_bytes: usize,
    extra: BenchExtra<'_>,
) -> Result<BenchRow, DecodeError> {
    let shape = plan.shape;
    let s = runner.stream().clone();
    let mut seed = 0x00de_c0de_u64;
    let e = shape.dtype.size();
    let cache_bytes = 2 * shape.elements("k")? * e;
    if cache_bytes > MAX_BENCH_CACHE_BYTES {
        return Err(DecodeError::Size {
            what: "bytes of K and V",
            value: cache_bytes,
            max: MAX_BENCH_CACHE_BYTES,
        });
    }
    let sets = rotate_bytes.div_ceil(cache_bytes.max(1)).clamp(1, 64);
    // Every request full: at the plan's length, or (masked: the plan is sized for the
    // listed keys) at capacity.
    let full = if extra.mask.is_some() {
        shape.cache.capacity()
    } else {
        plan.max_seqlen_k
    };
    let lens = vec![full as i32; shape.batch];
    let mut all = Vec::with_capacity(sets);
    for _ in 0..sets {
        let q = random_bytes(plan, plan.elements("q")?, &mut seed)?;
        let k = random_bytes(plan, shape.elements("k")?, &mut seed)?;
        let v = random_bytes(plan, shape.elements("v")?, &mut seed)?;
        let table = match extra.block_table {
            Some(t) => t.to_vec(),
            None => block_table(&shape, shuffle_pages, &mut seed)?,
        };
        let _ = splitmix64(&mut seed);
        let tensors = match extra.cu_seqlens_q {
            Some(cu) => {
                DecodeTensors::upload_varlen(&s, plan, &q, &k, &v, &table, Some(&lens), cu)?
            }
            None => DecodeTensors::upload(&s, &shape, &q, &k, &v, &table, Some(&lens))?,
        };
        let out = DecodeOutput::for_plan(&s, plan)?;
        let ws = DecodeWorkspace::new(&s, plan)?;
        all.push((tensors, out, ws));
    }
    let device_mask = extra
        .mask
        .map(|m| DecodeMaskDevice::upload(&s, m))
        .transpose()?;
    let t = time_on_stream(&s, timing, |_| {
        for (tensors, out, ws) in all.iter_mut() {
            runner
                .launch_masked(plan, tensors, device_mask.as_ref(), out, ws)
                .map_err(|e| fragmask_host::Error::InvalidArgument(e.to_string()))?;
        }
        Ok(())
    })?;
    let ms = t.median_ms / sets as f64;
    // The same launches captured once into a CUDA graph on a capturable stream.
    let graph_stream = s
        .context()
        .new_stream()
        .map_err(driver("creating the capture stream"))?;
    s.synchronize()
        .map_err(driver("synchronising before capture"))?;
    let captured = runner.with_stream(graph_stream.clone());
    let mask_ptrs = device_mask.as_ref().map(|m| {
        (
            m.list.device_ptr(&graph_stream),
            m.count.device_ptr(&graph_stream),
            m.bits.device_ptr(&graph_stream),
        )
    });
    let (mask_list, mask_count, mask_bits) = mask_ptrs
        .as_ref()
        .map_or((0, 0, 0), |(l, c, b)| (l.0, c.0, b.0));
    let mut pointers = Vec::with_capacity(sets);
    for (tensors, out, ws) in all.iter_mut() {
        let (q, _a) = tensors.q.device_ptr(&graph_stream);
        let (k, _b) = tensors.k.device_ptr(&graph_stream);
        let (v, _c) = tensors.v.device_ptr(&graph_stream);
        let (block_table, _d) = tensors.block_table.device_ptr(&graph_stream);
        let seqlens = tensors
            .seqlens_k
            .as_ref()
            .map(|l| l.device_ptr(&graph_stream));
        let cu = tensors
            .cu_seqlens_q
            .as_ref()
            .map(|l| l.device_ptr(&graph_stream));
        let (o, _f) = out.o.device_ptr_mut(&graph_stream);
        let (lse, _g) = out.lse.device_ptr_mut(&graph_stream);
        let (ws_o, _h) = ws.o.device_ptr_mut(&graph_stream);
        let (ws_lse, _i) = ws.lse.device_ptr_mut(&graph_stream);
        pointers.push(DecodePointers {
            q,
            k,
            v,
            o,
            lse,
            ws_o,
            ws_lse,
            seqlens_k: seqlens.as_ref().map_or(0, |(p, _)| *p),
            block_table,
            mask_list,
            mask_count,
            mask_bits,
            cu_seqlens_q: cu.as_ref().map_or(0, |(p, _)| *p),
        });
    }
    graph_stream
        .synchronize()
        .map_err(driver("synchronising before capture"))?;
    graph_stream
        .begin_capture(
            cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
        .map_err(driver("beginning a graph capture"))?;
    for p in &pointers {
        // SAFETY: each pointer set comes from a live input set of `plan` (sizes checked
        // by upload and the allocations), which outlives every replay below.
        let launched = unsafe { captured.launch_raw(plan, p) };
        if let Err(e) = launched {
            let _ = graph_stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
            return Err(e);
        }
    }
    let graph = graph_stream
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
        .map_err(driver("ending the graph capture"))?
        .ok_or_else(|| {
            DecodeError::Gpu(fragmask_host::Error::InvalidArgument(
                "the graph capture recorded nothing".into(),
            ))
        })?;
    let g = time_on_stream(&graph_stream, timing, |_| {
        graph
            .launch()
            .map_err(fragmask_host::Error::driver("replaying the graph"))
    })?;
    let bytes = match (extra.mask, extra.cu_seqlens_q) {
        (Some(m), _) => masked_bytes(plan, m),
        // Varlen: K and V of every key once, q read and o written for the covered rows.
        (None, Some(cu)) => {
            let rows = cu.last().map_or(0, |&r| r.max(0) as usize);
            let e = shape.dtype.size();
            2 * plan.max_seqlen_k * shape.batch * shape.kv_heads * shape.head_dim * e
                + 2 * rows * shape.heads * shape.head_dim * e
        }
        (None, None) => plan.bytes_moved(plan.max_seqlen_k * shape.batch),
    };
    Ok(BenchRow {
        plan: *plan,
        sets,
        ms,
        bytes,
        gbps: bytes as f64 / (ms * 1e6),
        graph_ms: g.median_ms / sets as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_shape;
    use fragmask_gmma_frag::TiledAccumulator;
    use fragmask_masks::{pack, DenseMask, Encoding, PackOptions};

    #[test]
    fn masked_bytes_count_each_listed_key_of_each_kv_head_once() {
        // Sq = 80 (two row blocks of 64), Sk = 200 (4 blocks, the last of 8 keys): row block
        // 0 lists key blocks {0, 3}, row block 1 lists {1, 3}; per-head masks, G = 1.
        let (sq, sk, heads) = (80usize, 200usize, 2usize);
        let mut bytes = vec![0u8; heads * sq * sk];
        for h in 0..heads {
            for t in 0..sq {
                for key in 0..sk {
                    let block = key / 64;
                    let on = if t < 64 {
                        block == 0 || block == 3
                    } else {
                        block == 1 || block == 3
                    };
                    bytes[(h * sq + t) * sk + key] = u8::from(on && (h == 0 || block != 1));
                }
            }
        }
        let dense = DenseMask::new(&bytes, &[1, heads, sq, sk]).unwrap();
        let acc = TiledAccumulator::new(64, 64, 1, false).unwrap();
        let packed = pack(
            &dense,
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .unwrap();
        let mask = DecodeMask::from_packed(&packed).unwrap();
        let mut s = test_shape(1, heads, heads, sk);
        s.seqlen_q = sq;
        let plan = DecodePlan::new(s, sk, 132, None).unwrap();
        // Head 0 reads blocks 0, 1, 3 (64 + 64 + 8 keys), head 1 blocks 0, 3 (64 + 8).
        let keys = (64 + 64 + 8) + (64 + 8);
        let e = 2;
        let expected = 2 * keys * 128 * e + 2 * sq * heads * 128 * e;
        assert_eq!(masked_bytes(&plan, &mask), expected);
    }
}
