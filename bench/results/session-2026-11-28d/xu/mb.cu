// Which pipe does P's conversion use? Throughput of ex2.approx, cvt.rn.bf16x2.f32 (F2FP),
// prmt and fmul, alone and mixed, per SM and clock. 16 independent chains per thread.
typedef unsigned int u32;
__device__ __forceinline__ float ex2(float x) { float y; asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ u32 cvt(float a, float b) { u32 d; asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a), "f"(b)); return d; }
__device__ __forceinline__ u32 prmt(u32 a, u32 b) { u32 d; asm volatile("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(d) : "r"(a), "r"(b)); return d; }
__device__ __forceinline__ float fmul(float a, float b) { float d; asm volatile("mul.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b)); return d; }
__device__ __forceinline__ u32 iadd(u32 a, u32 b) { u32 d; asm volatile("add.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b)); return d; }
#define F(u) __uint_as_float(u)
#define U(f) __float_as_uint(f)
#define BODY_BEGIN(name) extern "C" __global__ void name(int iters, long long* out, int w) { \
  float x[16]; _Pragma("unroll") for (int i = 0; i < 16; ++i) x[i] = 0.001f * (threadIdx.x + i); \
  __syncthreads(); long long t0 = clock64(); \
  for (int it = 0; it < iters; ++it) { _Pragma("unroll") for (int i = 0; i < 16; i += 2) {
#define BODY_END } } long long t1 = clock64(); float s = 0; _Pragma("unroll") for (int i = 0; i < 16; ++i) s += x[i]; \
  if (s == 1234.5f) out[1023] = 1; if ((threadIdx.x & 127) == 0) out[blockIdx.x * 4 + threadIdx.x / 128] = t1 - t0; }
// per pair of values per iteration:
BODY_BEGIN(k_ex2)   x[i] = ex2(x[i]); x[i+1] = ex2(x[i+1]); x[i] = ex2(x[i]); x[i+1] = ex2(x[i+1]); BODY_END            // 4 ex2
BODY_BEGIN(k_cvt)   u32 c = cvt(x[i], x[i+1]); x[i] = F(c); u32 d = cvt(x[i+1], x[i]); x[i+1] = F(d); BODY_END            // 2 cvt
BODY_BEGIN(k_prmt)  u32 c = prmt(U(x[i]), U(x[i+1])); x[i] = F(c); u32 d = prmt(U(x[i+1]), c); x[i+1] = F(d); BODY_END   // 2 prmt
BODY_BEGIN(k_ex2cvt) float a = ex2(x[i]), b = ex2(x[i+1]); float a2 = ex2(a), b2 = ex2(b); u32 c = cvt(a2, b2); u32 d = cvt(b2, a); x[i] = F(c); x[i+1] = F(d); BODY_END   // 4 ex2 + 2 cvt
BODY_BEGIN(k_ex2prmt) float a = ex2(x[i]), b = ex2(x[i+1]); float a2 = ex2(a), b2 = ex2(b); u32 c = prmt(U(a2), U(b2)); u32 d = prmt(U(b2), U(a)); x[i] = F(c); x[i+1] = F(d); BODY_END // 4 ex2 + 2 prmt
BODY_BEGIN(k_ex2rnd) float a = ex2(x[i]), b = ex2(x[i+1]); float a2 = ex2(a), b2 = ex2(b); u32 c = prmt(iadd(U(a2), 0x8000u), iadd(U(b2), 0x8000u)); u32 d = prmt(iadd(U(b2), 0x8000u), iadd(U(a), 0x8000u)); x[i] = F(c); x[i+1] = F(d); BODY_END // 4 ex2 + 4 add + 2 prmt
BODY_BEGIN(k_fmulcvt) float a = fmul(x[i], 0.5f), b = fmul(x[i+1], 0.5f); u32 c = cvt(a, b); u32 d = cvt(b, a); x[i] = F(c); x[i+1] = F(d); BODY_END // 2 fmul + 2 cvt
BODY_BEGIN(k_fmul)  x[i] = fmul(x[i], 0.5f); x[i+1] = fmul(x[i+1], 0.5f); BODY_END // 2 fmul
