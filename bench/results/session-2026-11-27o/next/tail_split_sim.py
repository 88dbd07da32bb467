import heapq
def makespan(lengths, P=132):
    h=[0.0]*P
    for L in lengths:
        t=heapq.heappop(h); heapq.heappush(h,t+L)
    return max(h)
def best(n, L, ov=3.0, fix=2.0, P=132):
    base = makespan([L+ov]*n, P)
    ideal = n*(L+ov)/P
    res=(base,0,1)
    r = n % P
    for k in range(0,3):
        x = r + k*P
        if x > n or x == 0: continue
        for s in range(2,9):
            lens=[L+ov]*(n-x) + [L/s+ov+fix]*(x*s)
            m=makespan(lens,P)
            if m < res[0]: res=(m,x,s)
    return base, ideal, res
for name,n,L in [("S16k H16",2048,256),("S8k H16",1024,128),("S4k H16",512,64),("S16k GQA32:8 none",1024,1024),("S16k D64 (step128)",2048,128)]:
    base, ideal, (m,x,s) = best(n,L)
    print(f"{name:22s} base {base:8.1f} ideal {ideal:8.1f} ({base/ideal:.3f})  best split x={x} s={s}: {m:8.1f} -> gain {base/m:.3f}")
