import ctypes, torch, statistics
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
cu = ctypes.CDLL("libcuda.so.1")
mod = ctypes.c_void_p()
data = open(".carry/s15/mb/mb.cubin", "rb").read()
assert cu.cuModuleLoadData(ctypes.byref(mod), data) == 0
SM = torch.cuda.get_device_properties(0).multi_processor_count
out = torch.zeros(SM * 4, dtype=torch.int64, device="cuda")
def launch(name, threads, iters, flags):
    f = ctypes.c_void_p()
    assert cu.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()) == 0
    assert cu.cuFuncSetAttribute(f, 8, 65536 + 1024) == 0  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    a_iters = ctypes.c_int(iters); a_out = ctypes.c_void_p(out.data_ptr()); a_w = ctypes.c_int(flags)
    args = (ctypes.c_void_p * 3)(ctypes.cast(ctypes.byref(a_iters), ctypes.c_void_p), ctypes.cast(ctypes.byref(a_out), ctypes.c_void_p), ctypes.cast(ctypes.byref(a_w), ctypes.c_void_p))
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    assert cu.cuLaunchKernel(f, SM, 1, 1, threads, 1, 1, 65536 + 1024, stream, args, None) == 0
    torch.cuda.synchronize()
    c = out.view(SM, 4)[:, : threads // 128].float()
    return c.mean().item()
iters = 2000
names = {"mb0": "dQ: A MN-major (tnspA), B MN-major", "mb1": "A K-major, B MN-major (FA4 dQ)", "mb2": "A, B K-major (S^T)"}
print("cycles per m64n64k16 wgmma (mean over SMs and warpgroups), 132 CTAs")
for wgs in (1, 2):
    for chains in (1, 2):
        for name, title in names.items():
            launch(name, 128 * wgs, 50, 4 if chains == 2 else 0)
            cyc = [launch(name, 128 * wgs, iters, 4 if chains == 2 else 0) for _ in range(3)]
            per = statistics.median(cyc) / (iters * 8 * chains)
            print(f"  {wgs} WG, {chains} chain(s): {title:40s} {per:7.2f}")
