import numpy as np, fragmask, sys
N,H=23296,12; QB=KB=N//64
rng=np.random.default_rng(int(sys.argv[2]))
frac=float(sys.argv[1]); k=max(1,round(frac*KB))
index=np.sort(np.argsort(rng.random((H,QB,KB)),axis=-1)[...,:k],axis=-1).astype(np.int32)
num=np.full((H,QB),k,dtype=np.int32)
fragmask.Mask.from_blocks(index,num,block_size=64,seqlen_q=N,seqlen_k=N,block=(64,64),warpgroups=1).save('/tmp/u.safetensors')
