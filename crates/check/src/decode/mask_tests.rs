//! Unit tests of the decode mask forms against the CPU reference (they draw the checking
//! crate's random inputs, so they live here rather than in the runtime).

use fragmask_host::decode::mask::topk_gather;
use fragmask_host::decode::{DecodeError, DecodeMask};

use super::check::random_inputs;
use super::masks::{random_packed_mask, random_topk};
use super::merge::attend;
use super::reference::{decode_reference, decode_reference_masked};
use super::test_shape;

#[test]
fn random_topk_lists_are_distinct_sorted_and_within_the_budget() {
    let lens = [1000usize, 5, 64, 0];
    let idx = random_topk(&lens, 8, 3).unwrap();
    for (r, &len) in lens.iter().enumerate() {
        let row = &idx[r * 8..(r + 1) * 8];
        let take = 8.min(len);
        assert!(row[..take].windows(2).all(|w| w[0] < w[1]), "{row:?}");
        assert!(row[..take].iter().all(|&x| (x as usize) < len), "{row:?}");
        assert!(row[take..].iter().all(|&x| x == 0), "{row:?}");
    }
    assert!(matches!(
        random_topk(&vec![1 << 30; 65_535], 1 << 30, 1),
        Err(DecodeError::HostMemory { .. })
    ));
}

#[test]
fn masked_reference_equals_attention_over_the_listed_keys() {
    let packed = random_packed_mask(5, 100, 1, 64, 64, 11).unwrap();
    let m = DecodeMask::from_packed(&packed).unwrap();
    let mut s = test_shape(2, 4, 2, 100);
    s.seqlen_q = 5;
    let inputs = random_inputs(&s, Some(vec![100, 77]), false, 5).unwrap();
    let (o, lse) = decode_reference_masked(&s, &inputs.reference, Some(&m));
    let (d, sq, h) = (s.head_dim, s.seqlen_q, s.heads);
    for b in 0..2 {
        let len = [100usize, 77][b];
        for t in 0..sq {
            for head in 0..h {
                let keys: Vec<usize> = (0..len).filter(|&k| packed.get(0, 0, t, k)).collect();
                let q0 = ((b * sq + t) * h + head) * d;
                let q = &inputs.reference.q[q0..q0 + d];
                let hkv = head / s.group();
                let mut scores = Vec::new();
                let mut values = Vec::new();
                for &k in &keys {
                    let off = ((b * 100 + k) * s.kv_heads + hkv) * d;
                    scores.push(
                        s.scale()
                            * q.iter()
                                .zip(&inputs.reference.k[off..off + d])
                                .map(|(x, y)| x * y)
                                .sum::<f64>(),
                    );
                    values.push(&inputs.reference.v[off..off + d]);
                }
                let (ro, rl) = attend(&scores, &values, d);
                let at = ((b * sq + t) * h + head) * d;
                assert!(o[at..at + d]
                    .iter()
                    .zip(&ro)
                    .all(|(x, y)| (x - y).abs() < 1e-12));
                let l = lse[(b * h + head) * sq + t];
                assert!(l == rl || (l - rl).abs() < 1e-12);
            }
        }
    }
}

#[test]
fn topk_gather_reads_exactly_the_listed_keys() {
    let s = test_shape(3, 8, 2, 200);
    let lens = [200usize, 150, 31];
    let k = 40;
    let idx = random_topk(&lens, k, 9).unwrap();
    let lens_i: Vec<i32> = lens.iter().map(|&x| x as i32).collect();
    // Requests shorter than k repeat key 0 in their padding slots: give them k valid keys.
    let (g, table) = topk_gather(
        &s,
        31,
        &idx.chunks(k)
            .flat_map(|c| c[..31].to_vec())
            .collect::<Vec<_>>(),
        Some(&lens_i),
    )
    .unwrap();
    let dense = random_inputs(&s, Some(lens_i.clone()), false, 3).unwrap();
    let mut gathered = dense.reference.clone();
    gathered.block_table = table;
    gathered.seqlens_k = Some(vec![31; 3]);
    let (o, lse) = decode_reference(&g, &gathered);
    let d = s.head_dim;
    for b in 0..3 {
        for head in 0..s.heads {
            let keys = &idx[b * k..b * k + 31];
            let q0 = (b * s.heads + head) * d;
            let q = &dense.reference.q[q0..q0 + d];
            let hkv = head / s.group();
            let mut scores = Vec::new();
            let mut values = Vec::new();
            for &key in keys {
                let off = ((b * 200 + key as usize) * s.kv_heads + hkv) * d;
                scores.push(
                    s.scale()
                        * q.iter()
                            .zip(&dense.reference.k[off..off + d])
                            .map(|(x, y)| x * y)
                            .sum::<f64>(),
                );
                values.push(&dense.reference.v[off..off + d]);
            }
            let (ro, rl) = attend(&scores, &values, d);
            assert!(o[q0..q0 + d]
                .iter()
                .zip(&ro)
                .all(|(x, y)| (x - y).abs() < 1e-12));
            assert!((lse[b * s.heads + head] - rl).abs() < 1e-12);
        }
    }
    let bad = topk_gather(&s, k, &vec![150; 3 * k], Some(&lens_i));
    assert!(matches!(
        bad,
        Err(DecodeError::TopKIndex {
            request: 1,
            slot: 0,
            index: 150,
            ..
        })
    ));
    let mut causal = s;
    causal.window_right = Some(0);
    assert!(matches!(
        topk_gather(&causal, k, &idx, None),
        Err(DecodeError::Mask { .. })
    ));
}

#[test]
fn random_topk_lists_are_distinct_ascending_and_in_range() {
    let idx = random_topk(&[1000, 5], 8, 1).unwrap();
    let (a, b) = idx.split_at(8);
    assert!(a.windows(2).all(|w| w[0] < w[1]) && a.iter().all(|&x| (0..1000).contains(&x)));
    assert_eq!(&b[..5], &[0, 1, 2, 3, 4]);
}
