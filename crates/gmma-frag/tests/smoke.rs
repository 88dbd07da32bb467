use fragmask_gmma_frag::TiledAccumulator;

fn ptx(w_total: u32, t: u32, i: u32, n: u32) -> (u32, u32) {
    let (w, lt) = (t / 128, t % 128);
    let regs = n / 2;
    let (mma_m, r) = (i / regs, i % regs);
    (
        64 * (w + w_total * mma_m) + 16 * (lt / 32) + (lt % 32) / 4 + 8 * ((r / 2) % 2),
        8 * (r / 4) + 2 * (lt % 4) + (r % 2),
    )
}

#[test]
fn smoke() {
    for (bm, bn, wg) in [(128, 128, 2), (256, 64, 2), (192, 176, 3), (64, 8, 1)] {
        let acc = TiledAccumulator::new(bm, bn, wg, false).unwrap();
        for t in 0..acc.threads() {
            for v in 0..acc.values_per_thread() {
                let c = acc.coord(t, v).unwrap();
                assert_eq!(c, ptx(wg, t, v, bn));
                assert_eq!(acc.owner(c.0, c.1).unwrap(), (t, v));
                let s = TiledAccumulator::new(bn, bm, wg, true).unwrap();
                let (r, cc) = s.coord(t, v).unwrap();
                assert_eq!((cc, r), ptx(wg, t, v, bn));
                assert_eq!(s.owner(r, cc).unwrap(), (t, v));
            }
        }
    }
}
