# Load ratios of write-up 002's 10% / 50% masks (bench/suite/routines/attention.py's blocks64):
# one-block (1), greedy pairs (the host's PairTable rule: each block with the unpaired block sharing
# most), and greedy pairs of pairs (a 2-CTA cluster walking the union of 4 lists, each block multicast).
import numpy as np
rng = np.random.default_rng(0)
H, QB, KB = 12, 364, 364
for frac in (0.1, 0.5):
    k = round(frac * KB)
    own = pairs_load = quads_load = 0
    for h in range(H):
        scores = rng.random((QB, KB))
        idx = np.argsort(-scores, axis=1)[:, :k]
        m = np.zeros((QB, KB), bool); np.put_along_axis(m, idx, True, axis=1)
        own += m.sum()
        # greedy pairs in block order (each with the unpaired block sharing most)
        free = list(range(QB)); groups = []
        while free:
            a = free.pop(0)
            if not free: groups.append(m[a]); break
            ov = (m[free] & m[a]).sum(1); j = int(np.argmax(ov)); b = free.pop(j)
            groups.append(m[a] | m[b])
        pairs_load += sum(g.sum() for g in groups)
        free = list(range(len(groups)))
        while free:
            a = free.pop(0)
            if not free: quads_load += groups[a].sum(); break
            ov = (np.array([groups[i] for i in free]) & groups[a]).sum(1); j = int(np.argmax(ov)); b = free.pop(j)
            quads_load += (groups[a] | groups[b]).sum()
    print(f"{frac:.0%}: pairs {pairs_load/own:.3f}, quads (2-CTA multicast) {quads_load/own:.3f}")
# per-warpgroup share of its CTA's union walk (blocks): own / union
rng = np.random.default_rng(1)
for frac in (0.1, 0.5):
    k = round(frac * KB)
    m = np.zeros((QB, KB), bool)
    idx = np.argsort(-rng.random((QB, KB)), axis=1)[:, :k]; np.put_along_axis(m, idx, True, axis=1)
    free = list(range(QB)); groups = []
    while len(free) > 1:
        a = free.pop(0); ov = (m[free] & m[a]).sum(1); b = free.pop(int(np.argmax(ov))); groups.append(m[a] | m[b])
    pu = np.mean([g.sum() for g in groups])
    free = list(range(len(groups))); qu = []
    while len(free) > 1:
        a = free.pop(0); ov = (np.array([groups[i] for i in free]) & groups[a]).sum(1); b = free.pop(int(np.argmax(ov))); qu.append((groups[a] | groups[b]).sum())
    print(f"{frac:.0%}: own {k} blocks; pair union {pu:.1f} (share {k/pu:.2f}); quad union {np.mean(qu):.1f} (share {k/np.mean(qu):.2f})")
