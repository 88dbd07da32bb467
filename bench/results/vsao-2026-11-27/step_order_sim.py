import random
def pair_blocks(rows):
    bits=[sum(1<<n for n in r) for r in rows]; m=len(rows); paired=[False]*m; pairs=[]
    for a in range(m):
        if paired[a]: continue
        paired[a]=True; best=None
        for b in range(a+1,m):
            if paired[b]: continue
            s=bin(bits[a]&bits[b]).count('1')
            if best is None or s>best[0]: best=(s,b)
        b=best[1] if best else None
        if b is not None: paired[b]=True
        pairs.append((a,b))
    return pairs
def steps(a,b,run):
    sa,sb=set(a),set(b)
    both=sorted(sa&sb); oa=sorted(sa-sb); ob=sorted(sb-sa)
    qs=[[(n,'ab') for n in both],[(n,'a') for n in oa],[(n,'b') for n in ob]]
    out=[];left=[]
    while True:
        anyp=False
        for q in qs:
            for _ in range(run):
                if len(q)>=2: out.append({q[0][1],q[1][1]}); del q[:2]; anyp=True
                elif len(q)==1: left.append(q.pop(0)); break
                else: break
        if not anyp: break
    while left:
        x=left.pop(0); y=left.pop(0) if left else None
        out.append({x[1]} | ({y[1]} if y else set()))
    return out
def stats(frac, variants, heads=2, nb=364, seed=1):
    rnd=random.Random(seed); k=max(1,round(frac*nb))
    res={v:[0,0,0] for v in variants}
    for h in range(heads):
        rows=[sorted(rnd.sample(range(nb),k)) for _ in range(nb)]
        for a,b in pair_blocks(rows):
            for (run,keep) in variants:
                st=steps(rows[a], rows[b] if b is not None else [], run)
                res[(run,keep)][2]+=len(st)
                for wg in 'ab':
                    prev=None
                    for i,s in enumerate(st):
                        mine=any(wg in x for x in s)
                        if not mine: continue
                        res[(run,keep)][0]+=1
                        if prev is not None and (i-prev==1 or (keep and i-prev<=3)): res[(run,keep)][1]+=1
                        prev=i
    for v,(c,o,n) in res.items():
        print(f"{frac:.0%} run={v[0]} keep={v[1]}: steps/pair {n/(heads*nb/2):.1f}, computed/wg {c/(heads*nb):.1f}, with PV beside {o/c:.2f}")
V=[(1,False),(2,False),(3,False),(1,True),(2,True)]
stats(0.1,V); stats(0.5,V)
