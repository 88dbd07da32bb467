import ctypes, torch, statistics, sys
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
cu = ctypes.CDLL("libcuda.so.1")
mod = ctypes.c_void_p()
assert cu.cuModuleLoadData(ctypes.byref(mod), open(sys.argv[1], "rb").read()) == 0
SM = torch.cuda.get_device_properties(0).multi_processor_count
out = torch.zeros(1024, dtype=torch.int64, device="cuda")
def launch(name, threads, iters):
    f = ctypes.c_void_p()
    assert cu.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()) == 0
    a = [ctypes.c_int(iters), ctypes.c_void_p(out.data_ptr()), ctypes.c_int(0)]
    args = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in a])
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    assert cu.cuLaunchKernel(f, SM, 1, 1, threads, 1, 1, 0, stream, args, None) == 0
    torch.cuda.synchronize()
    return out[: SM * 4].view(SM, 4)[:, : threads // 128].float().mean().item()
# instructions per thread per iteration (8 pairs per iteration)
kernels = {"k_ex2": "32 ex2", "k_cvt": "16 cvt", "k_prmt": "16 prmt", "k_fmul": "16 fmul",
           "k_ex2cvt": "32 ex2 + 16 cvt", "k_ex2prmt": "32 ex2 + 16 prmt", "k_ex2rnd": "32 ex2 + 32 add + 16 prmt",
           "k_fmulcvt": "16 fmul + 16 cvt"}
iters = 4000
print(f"{torch.cuda.get_device_name()}; cycles per iteration per warp-slot, {SM} CTAs")
print("threads  kernel       body                         cycles/iter  warp-instr/clk/SMSP of the body")
for threads in (128, 384, 512):
    for k, body in kernels.items():
        launch(k, threads, 100)
        cyc = statistics.median(launch(k, threads, iters) for _ in range(3)) / iters
        n = sum(int(p.split()[0]) for p in body.split(" + "))
        warps_per_smsp = threads // 32 / 4
        print(f"{threads:7d}  {k:11s}  {body:27s}  {cyc:10.2f}  {n * warps_per_smsp / cyc:6.3f}")
