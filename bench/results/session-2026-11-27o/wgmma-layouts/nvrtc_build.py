import ctypes, sys, glob
lib = ctypes.CDLL(glob.glob("/work/main/.cache/cuda-toolchain/nvidia/cu13/lib/libnvrtc.so*")[0])
src = open(sys.argv[1], "rb").read()
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"mb.cu", 0, None, None) == 0
opts = [b"--gpu-architecture=sm_90a", b"--std=c++17"]
arr = (ctypes.c_char_p * len(opts))(*opts)
rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n)); log = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log)
print(log.value.decode()[:2000])
assert rc == 0, rc
lib.nvrtcGetCUBINSize(prog, ctypes.byref(n)); buf = ctypes.create_string_buffer(n.value); lib.nvrtcGetCUBIN(prog, buf)
open(sys.argv[2], "wb").write(buf.raw)
print("cubin", n.value)
