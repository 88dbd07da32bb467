//! Element types of activations (q, k, v, o) and the CUDA helpers that load them as
//! `float` and store `float` as them. Header-free: bf16 and fp16 are converted with
//! PTX `cvt` (PTX ISA §9.7.9.21), never through `cuda_bf16.h`.

/// An activation element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActDtype {
    /// bfloat16.
    Bf16,
    /// IEEE half.
    F16,
    /// IEEE single.
    F32,
}

impl ActDtype {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            ActDtype::Bf16 | ActDtype::F16 => 2,
            ActDtype::F32 => 4,
        }
    }

    /// The name used in messages and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            ActDtype::Bf16 => "bf16",
            ActDtype::F16 => "f16",
            ActDtype::F32 => "f32",
        }
    }

    /// Parses `bf16`, `f16`/`fp16`/`half` or `f32`/`fp32`/`float`.
    pub fn parse(text: &str) -> Option<ActDtype> {
        match text {
            "bf16" | "bfloat16" => Some(ActDtype::Bf16),
            "f16" | "fp16" | "half" | "float16" => Some(ActDtype::F16),
            "f32" | "fp32" | "float" | "float32" => Some(ActDtype::F32),
            _ => None,
        }
    }

    /// The PTX type of the 16-bit MMA operands this activation type is computed in:
    /// `f16` for fp16, `bf16` otherwise.
    pub const fn mma_ptx_type(self) -> &'static str {
        match self {
            ActDtype::F16 => "f16",
            _ => "bf16",
        }
    }

    /// The body of `float fm_act_to_f32(unsigned short h)`: a 16-bit activation's bits as a
    /// float (fp16 through `cvt.f32.f16`, bf16 as the upper half of the float's bits).
    pub const fn bits16_to_f32_body(self) -> &'static str {
        match self {
            ActDtype::F16 => {
                "    float x; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(x) : \"h\"(h)); return x;"
            }
            _ => "    return __uint_as_float(((unsigned)h) << 16);",
        }
    }

    /// CUDA definitions of `fm_act` (the storage type), `fm_act_load(const fm_act*)`
    /// and `fm_act_store(fm_act*, float)` (round to nearest even) for this type.
    pub fn cuda_helpers(self) -> String {
        let (storage, load, store) = match self {
            ActDtype::Bf16 => (
                "unsigned short",
                "unsigned u = ((unsigned)*p) << 16; float x; asm(\"mov.b32 %0, %1;\" : \"=f\"(x) : \"r\"(u)); return x;",
                "unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x)); *p = h;",
            ),
            ActDtype::F16 => (
                "unsigned short",
                "float x; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(x) : \"h\"(*p)); return x;",
                "unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x)); *p = h;",
            ),
            ActDtype::F32 => ("float", "return *p;", "*p = x;"),
        };
        format!(
            "// Activations are {name} (fragmask_kernels::family::dtype).\n\
             typedef {storage} fm_act;\n\
             __device__ __forceinline__ float fm_act_load(const fm_act* p) {{ {load} }}\n\
             __device__ __forceinline__ void fm_act_store(fm_act* p, float x) {{ {store} }}\n",
            name = self.name()
        )
    }
}
