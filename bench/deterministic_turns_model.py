"""A model of the deterministic backward's dQ turns (docs/backward.md, "Deterministic mode").

Each key tile (CTA) walks its query tiles, two 64-query steps each; a step takes one unit of
time: a fraction ``a`` before the turn's wait (the Sᵀ and dPᵀ GEMMs), the rest after it (the
dQ chunk). On each query step, the key tiles visiting it add their dQ in their plane's launch
order (the kernel's rank: no CTA waits for one launched after it), and a turn reaches the next
tile ``h`` units after the step that passes it ends. ``slots`` CTAs run at once, started in
launch order as slots free up. It has no L2, no latency but ``h``, and no cost of the
deterministic mode outside the waits; so it shows what the launch order and the walk order do to
the waits, not the kernel's time (on one H200, block-sparse 10% at S = 16384 ran 2.0x its
non-deterministic time with 8 planes per section, where this model says 1.34x).

    python3 bench/deterministic_turns_model.py                      # block-sparse 10%, S = 16384, H = 16
    python3 bench/deterministic_turns_model.py --keep 0.5 --tiles 64 --planes 32

Prints the makespan of each (launch order, walk order) over the non-deterministic one's, whose
key tiles start largest first and never wait. Needs numpy.
"""
import argparse
import heapq

import numpy as np


def block_mask(tiles, keep, seed):
    """keep[q, n]: whether query tile q sees key tile n (one mask for every plane)."""
    return np.random.default_rng(seed).random((tiles, tiles)) < keep


def makespan(keep, order, walks, slots, a, h, det=True):
    """The time the last CTA ends: ``order`` the launch order of (plane, key tile), ``walks``
    each key tile's query tiles in walk order."""
    tiles = keep.shape[0]
    pos = {c: i for i, c in enumerate(order)}
    rank = {}
    for plane in {p for p, _ in order}:
        for q in range(tiles):
            visitors = sorted((n for n in range(tiles) if keep[q, n]), key=lambda n: pos[(plane, n)])
            for r, n in enumerate(visitors):
                rank[(plane, q, n)] = r
    ctas = [c for c in order if walks[c[1]]]
    turns, waiting, events = {}, {}, []
    seq = started = running = 0
    end = 0.0

    def push(t, ci, step, phase):
        nonlocal seq
        heapq.heappush(events, (t, seq, ci, step, phase))
        seq += 1

    while started < len(ctas) and running < slots:
        push(0.0, started, 0, 0)
        started, running = started + 1, running + 1
    while events:
        t, _, ci, step, phase = heapq.heappop(events)
        plane, n = ctas[ci]
        if step == 2 * len(walks[n]):            # the walk's end: the slot goes to the next CTA
            end, running = max(end, t), running - 1
            if started < len(ctas):
                push(t, started, 0, 0)
                started, running = started + 1, running + 1
            continue
        key = (plane, walks[n][step // 2], step % 2)
        if phase == 0:                            # the GEMMs before the wait
            push(t + a, ci, step, 1)
        elif phase == 1:                          # the turn
            count, free_at = turns.get(key, (0, 0.0))
            r = rank[(plane, key[1], n)] if det else 0
            if not det or count == r:
                push(max(t, free_at), ci, step, 2)
            else:
                waiting[key + (r,)] = (ci, step)
        else:                                     # the dQ chunk, then the turn passes on
            done = t + (1 - a)
            if det:
                count, _ = turns.get(key, (0, 0.0))
                turns[key] = (count + 1, done + h)
                woken = waiting.pop(key + (count + 1,), None)
                if woken is not None:
                    push(done + h, woken[0], woken[1], 2)
            push(done, ci, step + 1, 0)
    return end


def greedy_walks(keep, slots, section, h):
    """Each key tile's query tiles by when the tile before it in their rank leaves them,
    estimated in launch order with a plane's tiles starting ``slots / section`` at a time."""
    tiles = keep.shape[0]
    free = {}
    walks = {}
    at_once = max(1, slots // section)
    length = 2 * keep.sum(0).mean()
    for n in range(tiles):
        t = (n // at_once) * length
        qs = sorted((q for q in range(tiles) if keep[q, n]), key=lambda q: (free.get(q, -1.0), q))
        for q in qs:
            t = max(t, free.get(q, 0.0)) + 2
            free[q] = t + h
        walks[n] = qs
    return walks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiles", type=int, default=128, help="key and query tiles per plane (S / 128)")
    ap.add_argument("--keep", type=float, default=0.1, help="fraction of the tiles kept")
    ap.add_argument("--planes", type=int, default=16, help="(head, batch) planes")
    ap.add_argument("--slots", type=int, default=132, help="CTAs resident at once")
    ap.add_argument("--a", type=float, default=0.45, help="fraction of a step before the wait")
    ap.add_argument("--h", type=float, default=0.3, help="latency of a turn, in steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sections", type=int, nargs="*", default=[1, 8, 16])
    args = ap.parse_args()
    keep = block_mask(args.tiles, args.keep, args.seed)
    tiles, planes = args.tiles, args.planes
    ascending = {n: [q for q in range(tiles) if keep[q, n]] for n in range(tiles)}
    counts = keep.sum(0)
    largest_first = sorted(range(tiles), key=lambda n: (-counts[n], n))
    base = makespan(keep, [(p, n) for p in range(planes) for n in largest_first], ascending,
                    args.slots, args.a, args.h, det=False)
    print(f"non-deterministic, largest first: {base:.0f} units")
    print("| planes per section | ascending walks | greedy walks |")
    for section in args.sections:
        order = [(p, n) for first in range(0, planes, section) for n in range(tiles)
                 for p in range(first, min(first + section, planes))]
        walks = greedy_walks(keep, args.slots, section, args.h)
        cells = [makespan(keep, order, w, args.slots, args.a, args.h) / base for w in (ascending, walks)]
        print(f"| {section} | {cells[0]:.3f} | {cells[1]:.3f} |")


if __name__ == "__main__":
    main()
