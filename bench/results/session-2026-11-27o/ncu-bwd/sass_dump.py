import csv, gzip, sys, re
path, pat = sys.argv[1], sys.argv[2]
lo = int(sys.argv[3],16) if len(sys.argv)>3 else 0
hi = int(sys.argv[4],16) if len(sys.argv)>4 else 1<<62
name=None; head=None; rows=[]
with gzip.open(path,'rt') as f:
    for r in csv.reader(f):
        if r and r[0]=="Kernel Name": name=r[1]; head=None; continue
        if r and r[0]=="Address": head=r; continue
        if head and name and re.search(pat,name) and len(r)==len(head):
            rows.append(dict(zip(head,r)))
base=int(rows[0]["Address"],16)
tot=sum(int(r["Warp Stall Sampling (All Samples)"] or 0) for r in rows)
for r in rows:
    a=int(r["Address"],16)-base
    if not (lo<=a<hi): continue
    s=int(r["Warp Stall Sampling (All Samples)"] or 0); n=int(r["Instructions Executed"] or 0)
    if n==0: continue
    print(f"{a:05x} {n/1e6:6.2f}M {100*s/tot:5.2f}% {r['Source'].strip()[:110]}")
