import re, sys
lines=open(sys.argv[1]).read().splitlines()
lo, hi_ = int(sys.argv[2],16), int(sys.argv[3],16)
i=0; fn=None
while i < len(lines):
    f=re.search(r"Function : (\S+)", lines[i])
    if f: fn=f.group(1)
    m=re.match(r"\s*/\*([0-9a-f]{4,5})\*/\s+(.*?)\s*;\s*/\* 0x([0-9a-f]{16}) \*/", lines[i])
    if m and fn=="fragmask_attention_bwd":
        hi=int(re.search(r"/\* 0x([0-9a-f]{16}) \*/", lines[i+1]).group(1),16)
        a=int(m.group(1),16); t=m.group(2)
        if lo <= a <= hi_:
            ctrl = hi >> 41
            wb=(ctrl>>5)&7; rb=(ctrl>>8)&7; wait=(ctrl>>11)&0x3f
            w=",".join(str(k) for k in range(6) if wait>>k&1)
            print(f"{a:05x} wb{'-' if wb==7 else wb} rb{'-' if rb==7 else rb} wait[{w:7s}] {t[:90]}")
        i+=2; continue
    i+=1
