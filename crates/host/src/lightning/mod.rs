//! Lightning attention decode on the GPU (write-up 003): compile the kernels of
//! `fragmask_kernels::lightning`, choose a geometry, launch on device tensors (the f64
//! reference, the check and the benchmark are in `fragmask-check`).
//!
//! ```no_run
//! use fragmask_host::lightning::{LightningDecode, LightningTensors};
//! use fragmask_host::{Compiler, Device};
//! use fragmask_kernels::family::dtype::ActDtype;
//! use fragmask_kernels::lightning::LightningProblem;
//! # fn main() -> Result<(), fragmask_host::Error> {
//! let problem = LightningProblem { batch: 16, heads: 64, tokens: 1, dim_k: 96, dim_v: 96, dtype: ActDtype::Bf16 }
//!     .validate().map_err(|e| fragmask_host::Error::InvalidArgument(e.to_string()))?;
//! let device = Device::first()?;
//! let decode = LightningDecode::new(&device, &Compiler::new(), 96, 96, ActDtype::Bf16)?;
//! let mut tensors = LightningTensors::zeros(decode.stream(), &problem)?;
//! decode.launch(&problem, &mut tensors, None)?; // state updated in place
//! # Ok(()) }
//! ```

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr};
use fragmask_kernels::family::dtype::ActDtype;
use fragmask_kernels::lightning::{
    source, LightningConfig, LightningParams, LightningProblem, KERNEL_NAME,
};

use crate::device::{multiprocessors, Device};
use crate::error::{Error, Result};
use crate::launch::{KernelArg, Launch};
use crate::module_cache::compile_for_device;
use crate::nvrtc::Compiler;

/// The parameter struct passed by value (kernel parameter `const __grid_constant__
/// FmLightningParams`): #[repr(C)] plain data whose offsets and size equal the CUDA
/// struct's (the kernels crate's test compares `offset_of!` with the C rules, and NVRTC
/// static_asserts the same numbers).
#[derive(Clone, Copy)]
#[repr(transparent)]
struct ParamsArg(LightningParams);

// SAFETY: as above: a by-value kernel argument of exactly the kernel's layout.
unsafe impl DeviceRepr for ParamsArg {}

/// Device tensors of one lightning decode call, sized for a [`LightningProblem`]
/// (contiguous; activations as raw bytes of the problem's dtype).
#[derive(Debug)]
pub struct LightningTensors {
    /// q `[B, H, n, D]`.
    pub q: CudaSlice<u8>,
    /// k `[B, H, n, D]`.
    pub k: CudaSlice<u8>,
    /// v `[B, H, n, E]`.
    pub v: CudaSlice<u8>,
    /// o `[B, H, n, E]`.
    pub o: CudaSlice<u8>,
    /// The state `[B, H, D, E]` fp32.
    pub state: CudaSlice<f32>,
    /// Slopes `[H]`.
    pub slope: CudaSlice<f32>,
}

impl LightningTensors {
    /// Zeroed tensors for `problem` on `stream`.
    pub fn zeros(stream: &Arc<CudaStream>, problem: &LightningProblem) -> Result<Self> {
        let bytes = |t: &'static str| -> Result<usize> {
            problem
                .elements(t)
                .ok()
                .and_then(|n| n.checked_mul(problem.dtype.size()))
                .ok_or_else(|| Error::InvalidArgument(format!("{t}: size overflows")))
        };
        let alloc_u8 = |n: usize| {
            stream
                .alloc_zeros::<u8>(n)
                .map_err(Error::driver("allocating a lightning tensor"))
        };
        let state_len = problem
            .elements("state")
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        Ok(Self {
            q: alloc_u8(bytes("q")?)?,
            k: alloc_u8(bytes("k")?)?,
            v: alloc_u8(bytes("v")?)?,
            o: alloc_u8(bytes("o")?)?,
            state: stream
                .alloc_zeros::<f32>(state_len)
                .map_err(Error::driver("allocating the lightning state"))?,
            slope: stream
                .alloc_zeros::<f32>(problem.heads)
                .map_err(Error::driver("allocating the slopes"))?,
        })
    }

    /// The raw pointers `[q, k, v, o, state, state, slope]` (in place) for
    /// [`LightningDecode::launch_raw`], after [`Self::check`], ordered after earlier
    /// work on `stream`.
    pub fn pointers(
        &self,
        problem: &LightningProblem,
        stream: &Arc<CudaStream>,
    ) -> Result<[u64; 7]> {
        self.check(problem)?;
        let (q, _gq) = self.q.device_ptr(stream);
        let (k, _gk) = self.k.device_ptr(stream);
        let (v, _gv) = self.v.device_ptr(stream);
        let (o, _go) = self.o.device_ptr(stream);
        let (state, _gs) = self.state.device_ptr(stream);
        let (slope, _gl) = self.slope.device_ptr(stream);
        Ok([q, k, v, o, state, state, slope])
    }

    /// Checks every buffer's length against `problem`.
    pub fn check(&self, problem: &LightningProblem) -> Result<()> {
        let want = |t: &'static str, scale: usize| {
            problem.elements(t).map(|n| n * scale).unwrap_or(usize::MAX)
        };
        let s = problem.dtype.size();
        for (name, have, need) in [
            ("q", self.q.len(), want("q", s)),
            ("k", self.k.len(), want("k", s)),
            ("v", self.v.len(), want("v", s)),
            ("o", self.o.len(), want("o", s)),
            ("state", self.state.len(), want("state", 1)),
            ("slope", self.slope.len(), problem.heads),
        ] {
            if have != need {
                return Err(Error::InvalidArgument(format!(
                    "lightning tensor {name} holds {have} elements, the problem needs {need}"
                )));
            }
        }
        Ok(())
    }
}

/// The compiled lightning decode kernels of one `(D, E, dtype)` on one stream.
#[derive(Debug)]
pub struct LightningDecode {
    stream: Arc<CudaStream>,
    /// Shared by the copies [`Self::with_stream`] makes.
    kernels: Arc<[(LightningConfig, CudaFunction)]>,
    multiprocessors: usize,
    dependent_launch: bool,
}

impl LightningDecode {
    /// Compiles every candidate geometry of `D`, `E`, `dtype` (through the on-disk
    /// cache) and loads it on `device`'s default stream.
    pub fn new(
        device: &Device,
        compiler: &Compiler,
        dim_k: u32,
        dim_v: u32,
        dtype: ActDtype,
    ) -> Result<Self> {
        let candidates = LightningConfig::candidates(dim_k, dim_v, dtype);
        if candidates.is_empty() {
            let why = LightningConfig::new(dim_k, dim_v, dtype, 8)
                .err()
                .map(|e| e.to_string());
            return Err(Error::Unsupported(why.unwrap_or_default()));
        }
        let mut kernels = Vec::with_capacity(candidates.len());
        for config in candidates {
            let src = source::source(config).map_err(|e| Error::Unsupported(e.to_string()))?;
            let module = compile_for_device(device, compiler, &src, &[KERNEL_NAME])?;
            kernels.push((config, module.function(KERNEL_NAME)?));
        }
        Ok(Self {
            stream: device.default_stream(),
            kernels: kernels.into(),
            multiprocessors: multiprocessors(device)?,
            dependent_launch: true,
        })
    }

    /// The same kernels launching on `stream` (a non-default stream can be captured
    /// into a CUDA graph).
    pub fn with_stream(&self, stream: Arc<CudaStream>) -> Self {
        Self {
            stream,
            kernels: self.kernels.clone(),
            multiprocessors: self.multiprocessors,
            dependent_launch: self.dependent_launch,
        }
    }

    /// Launches with programmatic dependent launch (the default) or plainly.
    pub fn with_dependent_launch(mut self, on: bool) -> Self {
        self.dependent_launch = on;
        self
    }

    /// The stream launches go to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The compiled geometries, widest first.
    pub fn configs(&self) -> Vec<LightningConfig> {
        self.kernels.iter().map(|(c, _)| *c).collect()
    }

    /// The geometry for `problem`: the widest tile that still gives every SM two CTAs
    /// (wave efficiency at small batch), else the narrowest.
    pub fn choose(&self, problem: &LightningProblem) -> LightningConfig {
        let states = problem.batch.saturating_mul(problem.heads);
        let enough = |c: &LightningConfig| {
            states.saturating_mul(c.splits() as usize) >= 2 * self.multiprocessors
        };
        let configs = self.configs();
        configs
            .iter()
            .copied()
            .find(enough)
            .or(configs.last().copied())
            .unwrap_or(configs[0])
    }

    /// Runs `problem.tokens` tokens: reads `tensors.state`, writes the new state to
    /// `state_out` (or in place when `None`) and `tensors.o`. `geometry` overrides
    /// [`Self::choose`] (it must be one of [`Self::configs`]).
    pub fn launch(
        &self,
        problem: &LightningProblem,
        tensors: &mut LightningTensors,
        geometry: Option<LightningConfig>,
    ) -> Result<()> {
        let pointers = tensors.pointers(problem, &self.stream)?;
        // SAFETY (of the launch below): `pointers` checked every buffer's size against
        // `problem`; the tensors stay borrowed until the launch returns and live on.
        unsafe { self.launch_raw(problem, pointers, geometry) }
    }

    /// Launches on raw device pointers `[q, k, v, o, state_in, state_out, slope]` of
    /// contiguous tensors (state_out may equal state_in): [`Self::plan`], then
    /// [`LightningPlan::launch`] on [`Self::stream`].
    ///
    /// # Safety
    /// As [`LightningPlan::launch`], on [`Self::stream`].
    pub unsafe fn launch_raw(
        &self,
        problem: &LightningProblem,
        pointers: [u64; 7],
        geometry: Option<LightningConfig>,
    ) -> Result<()> {
        let plan = self.plan(problem, geometry)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { plan.launch(&self.stream, pointers) }
    }

    /// Plans `problem` once: validates it, chooses the geometry ([`Self::choose`], or
    /// `geometry`, which must be one of [`Self::configs`]) and fills the parameter
    /// block's strides, so a launch only patches the addresses.
    pub fn plan(
        &self,
        problem: &LightningProblem,
        geometry: Option<LightningConfig>,
    ) -> Result<LightningPlan> {
        let problem = problem
            .validate()
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let config = geometry.unwrap_or_else(|| self.choose(&problem));
        let func = self
            .kernels
            .iter()
            .find(|(c, _)| *c == config)
            .map(|(_, f)| f.clone())
            .ok_or_else(|| Error::Unsupported(format!("geometry {config:?} is not compiled")))?;
        // `validate` bounds every extent, so the strides and counts below fit.
        let (n, d, e) = (
            problem.tokens as i64,
            problem.dim_k as i64,
            problem.dim_v as i64,
        );
        let h = problem.heads as i64;
        let params = LightningParams {
            q: 0,
            k: 0,
            v: 0,
            o: 0,
            state_in: 0,
            state_out: 0,
            slope: 0,
            q_stride_batch: h * n * d,
            q_stride_head: n * d,
            q_stride_token: d,
            k_stride_batch: h * n * d,
            k_stride_head: n * d,
            k_stride_token: d,
            v_stride_batch: h * n * e,
            v_stride_head: n * e,
            v_stride_token: e,
            o_stride_batch: h * n * e,
            o_stride_head: n * e,
            o_stride_token: e,
            heads: problem.heads as i32,
            tokens: problem.tokens as i32,
        };
        // Programmatic stream serialization (CUDA Programming Guide, "Programmatic
        // Dependent Launch"): the kernel may launch while the previous kernel of the
        // stream drains; it waits (griddepcontrol.wait) before its first global read.
        let launch = Launch::new(
            (config.splits(), problem.heads as u32, problem.batch as u32),
            config.threads,
        )
        .dependent(self.dependent_launch);
        Ok(LightningPlan {
            config,
            func,
            launch,
            params,
        })
    }
}

/// One lightning decode call planned by [`LightningDecode::plan`]: the geometry's
/// function, the launch shape and the parameter block without addresses.
#[derive(Debug, Clone)]
pub struct LightningPlan {
    config: LightningConfig,
    func: CudaFunction,
    launch: Launch,
    params: LightningParams,
}

impl LightningPlan {
    /// The geometry the plan launches.
    pub fn config(&self) -> LightningConfig {
        self.config
    }

    /// Launches on `stream` at raw device pointers `[q, k, v, o, state_in, state_out,
    /// slope]` of contiguous tensors of the planned problem (state_out may equal
    /// state_in).
    ///
    /// # Safety
    /// `stream` belongs to the context the plan's kernels were loaded in. Each pointer
    /// must address a device allocation of at least the size of its tensor in the
    /// planned problem, live until the kernel completes on `stream`; q, k, v, slope and
    /// state_in must not overlap o or (unless equal to state_in) state_out.
    pub unsafe fn launch(&self, stream: &Arc<CudaStream>, pointers: [u64; 7]) -> Result<()> {
        let [q, k, v, o, state_in, state_out, slope] = pointers;
        let params = ParamsArg(LightningParams {
            q,
            k,
            v,
            o,
            state_in,
            state_out,
            slope,
            ..self.params
        });
        // SAFETY: the kernel takes one by-value FmLightningParams (the ABI test pins the
        // layout, `ParamsArg` is its transparent mirror); the grid is (splits, H, B) within
        // the limits `validate` checked; the caller guarantees the pointers inside the
        // parameters (this function's contract).
        unsafe {
            crate::launch::launch(stream, &self.func, self.launch, &[KernelArg::new(&params)])
        }
        .map_err(Error::driver("launching the lightning decode kernel"))?;
        Ok(())
    }
}
