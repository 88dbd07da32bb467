// Microbenchmark: m64n64k16 SS wgmma chains with the dQ GEMM's operand layouts (A MN-major vs K-major).

#define ACC32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define OUTS(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
template <int TA, int TB>
__device__ __forceinline__ void mma(float (&d)[32], unsigned long long a, unsigned long long b) {
  if (TA && TB) asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " ACC32 ", %32, %33, 1, 1, 1, 1, 1;\n" : OUTS(d) : "l"(a), "l"(b));
  else if (!TA && TB) asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " ACC32 ", %32, %33, 1, 1, 1, 0, 1;\n" : OUTS(d) : "l"(a), "l"(b));
  else asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " ACC32 ", %32, %33, 1, 1, 1, 0, 0;\n" : OUTS(d) : "l"(a), "l"(b));
}
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned long long bits) { return bits | (unsigned long long)((addr & 0x3FFFFu) >> 4); }
// MODE 0: A MN-major (tnspA), B MN-major (tnspB): our dQ = dS K. MODE 1: A K-major, B MN-major: FlashAttention-4's.
// MODE 2: both K-major (S^T = K Q^T).
template <int MODE>
__device__ void run(int iters, unsigned long long* out, int wgs) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned base = (unsigned)__cvta_generic_to_shared(smem);
  base = (base + 1023u) & ~1023u;
  const unsigned a_s = base, b_s = base + 16384u;
  const int wg = threadIdx.x / 128;
  float acc[32], acc2[32];
  for (int i = 0; i < 32; ++i) { acc[i] = 0.f; acc2[i] = 0.f; }
  const unsigned long long MN = 0x4000004000400000ull, KM = 0x4000004000010000ull;
  unsigned long long da, db;
  if (MODE == 0) { da = desc(a_s, MN); db = desc(b_s + wg * 16384u, MN); }
  else if (MODE == 1) { da = desc(a_s, KM); db = desc(b_s + wg * 16384u, MN); }
  else { da = desc(a_s, KM); db = desc(b_s + wg * 16384u, KM); }
  __syncthreads();
  unsigned long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      unsigned long long oa, ob;
      if (MODE == 0) { oa = 128ull * k; ob = 128ull * k; }
      else if (MODE == 1) { oa = (k / 4) * 512ull + (k % 4) * 2ull; ob = 128ull * k; }
      else { oa = (k / 4) * 512ull + (k % 4) * 2ull; ob = (k / 4) * 512ull + (k % 4) * 2ull; }
      if (MODE == 0) mma<1, 1>(acc, da + oa, db + ob);
      else if (MODE == 1) mma<0, 1>(acc, da + oa, db + ob);
      else mma<0, 0>(acc, da + oa, db + ob);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if (wgs & 4) {   // a second chain in flight (two GEMMs per warpgroup, as S^T and dP^T)
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        unsigned long long oa, ob;
        if (MODE == 0) { oa = 128ull * k; ob = 128ull * k; }
        else if (MODE == 1) { oa = (k / 4) * 512ull + (k % 4) * 2ull; ob = 128ull * k; }
        else { oa = (k / 4) * 512ull + (k % 4) * 2ull; ob = (k / 4) * 512ull + (k % 4) * 2ull; }
        if (MODE == 0) mma<1, 1>(acc2, da + oa, db + ob);
        else if (MODE == 1) mma<0, 1>(acc2, da + oa, db + ob);
        else mma<0, 0>(acc2, da + oa, db + ob);
      }
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  unsigned long long t1 = clock64();
  float s = 0.f;
  for (int i = 0; i < 32; ++i) s += acc[i] + acc2[i];
  if (threadIdx.x % 128 == 0) out[blockIdx.x * 4 + wg] = (t1 - t0) + (s == 12345.f ? 1 : 0);
}
extern "C" __global__ void __launch_bounds__(256, 1) mb0(int iters, unsigned long long* out, int wgs) { run<0>(iters, out, wgs); }
extern "C" __global__ void __launch_bounds__(256, 1) mb1(int iters, unsigned long long* out, int wgs) { run<1>(iters, out, wgs); }
extern "C" __global__ void __launch_bounds__(256, 1) mb2(int iters, unsigned long long* out, int wgs) { run<2>(iters, out, wgs); }
