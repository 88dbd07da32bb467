import re, sys
# step_regions.py [OURS_LOOP FA4_LOOP OURS_SAMPLES FA4_SAMPLES]: defaults, this folder's profiles.
args = sys.argv[1:] or ['ours_loop.txt', 'fa4_loop.txt', '469655', '424801']
def load(path):
    rows=[]
    for l in open(path):
        a, n, pct, *src = l.split(None, 3)
        rows.append((int(a,16), float(pct.rstrip('%')), src[0] if src else ''))
    return rows
def regions(rows, cuts):
    # cuts: list of (name, predicate on (addr, src)) marking the START of each region, in order
    out={}; cur='prologue'; i=0
    for a,p,s in rows:
        while i < len(cuts) and cuts[i][1](a, s):
            cur=cuts[i][0]; i+=1
        out[cur]=out.get(cur,0)+p
    return out
ours=load(args[0]); fa4=load(args[1])
tot_o=sum(p for _,p,_ in ours); tot_f=sum(p for _,p,_ in fa4)
print("loop share of all samples: ours %.1f%%, fa4 %.1f%%" % (tot_o, tot_f))
def first(rows, pat, after=0):
    for a,p,s in rows:
        if a>=after and re.search(pat, s): return a
O=lambda a0: (lambda a,s: a>=a0)
# ours
o_q=first(ours, r"TRYWAIT"); o_s=first(ours, r"HGMMA.64x64x16.F32.BF16 R184, gdesc\[UR16\], RZ")
o_do=first(ours, r"TRYWAIT", o_s); o_dp=first(ours, r"HGMMA.64x64x16.F32.BF16 R152, gdesc\[UR16\], RZ", o_do)
o_w1=first(ours, r"DEPBAR.LE gsb0, 0x1", o_dp); o_w0=first(ours, r"DEPBAR.LE gsb0, 0x0", o_w1)
o_stsm=first(ours, r"STSM", o_w0); o_bar=first(ours, r"BAR.SYNC.DEFER_BLOCKING 0x1", o_stsm)
o_dq=first(ours, r"tnspA.tnspB, RZ", o_bar); o_w2=first(ours, r"DEPBAR.LE gsb0, 0x1", o_dq)
o_end=first(ours, r"DEPBAR.LE gsb0, 0x0", o_w2)
cuts_o=[("wait Q",O(o_q)),("S issue",O(o_s)),("wait dO",O(o_do)),("dP issue",O(o_dp)),("wait S + P",O(o_w1)),("wait dP + dS + convert",O(o_w0)),("dS store + dV issue",O(o_stsm)),("dS barrier",O(o_bar)),("dQ+dK issue",O(o_dq)),("wait dQ + staging + sync + bulk",O(o_w2)),("wait dK + release",O(o_end))]
# fa4
f_q=first(fa4, r"TRYWAIT"); f_s=first(fa4, r"HGMMA.64x64x16.F32.BF16 R184, gdesc\[UR8\], RZ")
f_do=first(fa4, r"TRYWAIT", f_s); f_dp=first(fa4, r"HGMMA.64x64x16.F32.BF16 R152, gdesc\[UR8\], RZ", f_do)
f_w1=first(fa4, r"DEPBAR.LE gsb0, 0x1", f_dp); f_w0=first(fa4, r"DEPBAR.LE gsb0, 0x0", f_w1)
f_stsm=first(fa4, r"STSM", f_w0); f_bar=first(fa4, r"BAR.SYNC", f_stsm)
f_dq=first(fa4, r"tnspB, RZ", f_bar); f_w2=first(fa4, r"DEPBAR.LE gsb0, 0x1", f_dq)
f_end=first(fa4, r"DEPBAR.LE gsb0, 0x0", f_w2)
cuts_f=[("wait Q",O(f_q)),("S issue",O(f_s)),("wait dO",O(f_do)),("dP issue",O(f_dp)),("wait S + P",O(f_w1)),("wait dP + dS + convert",O(f_w0)),("dS store + dV issue",O(f_stsm)),("dS barrier",O(f_bar)),("dQ+dK issue",O(f_dq)),("wait dQ + staging + sync + bulk",O(f_w2)),("wait dK + release",O(f_end))]
print([hex(x) if x else None for x in (f_q,f_s,f_do,f_dp,f_w1,f_w0,f_stsm,f_bar,f_dq,f_w2,f_end)])
ro=regions(ours,cuts_o); rf=regions(fa4,cuts_f)
# scale samples to time: ours 469655 samples over 4.153 ms, fa4 424801 over 4.012 ms -> convert % to warp-ms
so=float(args[2]); sf=float(args[3])
print(f"{'region':38s} {'ours %':>7s} {'fa4 %':>7s}   (ours samples / fa4 samples)")
for k in ["prologue"]+[c[0] for c in cuts_o]:
    print(f"{k:38s} {ro.get(k,0):7.2f} {rf.get(k,0):7.2f}   {ro.get(k,0)*so/100:9.0f} {rf.get(k,0)*sf/100:9.0f}")
