import csv, gzip, sys, re, collections
def kernels(path):
    out = {}; name=None; rows=None; head=None
    with gzip.open(path,'rt') as f:
        for r in csv.reader(f):
            if len(r)>=1 and r[0]=="Kernel Name":
                name=r[1]; out[name]=[]; head=None; continue
            if r and r[0]=="Address": head=r; continue
            if head and name and len(r)==len(head):
                out[name].append(dict(zip(head,r)))
    return out
path=sys.argv[1]; pat=sys.argv[2]
for name, rows in kernels(path).items():
    if not re.search(pat, name): continue
    hist=collections.Counter(); samp=collections.Counter(); tot=0; stot=0
    for r in rows:
        src=r["Source"].strip()
        op=re.sub(r"^@!?U?P\w+\s+","",src).split(" ")[0]
        base=op.split(".")[0]
        n=int(r["Instructions Executed"] or 0); s=int(r["Warp Stall Sampling (All Samples)"] or 0)
        hist[base]+=n; samp[base]+=s; tot+=n; stot+=s
    print(name[:70], "executed", tot, "samples", stot)
    for op,n in hist.most_common(40):
        print(f"  {op:12s} {n/1e6:9.2f} M  {100*n/tot:5.1f}%  samples {100*samp[op]/max(stot,1):5.1f}%")
