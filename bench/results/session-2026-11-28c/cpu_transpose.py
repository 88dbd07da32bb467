import time, numpy as np, fragmask
from fragmask import Mask
N,H=23296,12; nb=N//64
rng=np.random.default_rng(0)
out=[]
for rep in range(3):
  for keep in (0.1,0.5):
    kk=int(round(keep*nb))
    index=np.sort(np.argsort(rng.random((H,nb,nb)),axis=-1)[...,:kk],axis=-1).astype(np.int32)
    num=np.full((H,nb),kk,dtype=np.int32)
    t=time.perf_counter(); m=Mask.from_blocks(index,num,seqlen_q=N,seqlen_k=N,block=(64,64)); t1=time.perf_counter()
    mt=m._with_transposed_host(); t2=time.perf_counter()
    out.append(f"{keep:.0%} from_blocks {1e3*(t1-t):.1f} transposed {1e3*(t2-t1):.1f}")
print("; ".join(out))
