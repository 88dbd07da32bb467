//! Thin typed launch wrappers over cudarc.
//!
//! A raw CUDA launch is `unsafe`: nothing checks that the arguments match
//! the kernel's parameters. This module confines that to one place per
//! kernel *signature*. [`OutputKernel`] is the signature of the hardware
//! probes, `extern "C" __global__ void k(float* out)`; its safe
//! constructors ([`OutputKernel::wgmma_probe`], [`OutputKernel::mma_sync_probe`])
//! build it from sources this workspace generates, so the signature and the
//! output length are known to be right.

use std::sync::Arc;

use cudarc::driver::{
    sys, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx as CudarcImage;

use fragmask_kernels::probe::{
    MmaSyncProbe, WgmmaProbe, MMA_SYNC_PROBE_KERNEL, MMA_SYNC_PROBE_OUT_LEN,
    MMA_SYNC_PROBE_THREADS, WGMMA_PROBE_KERNEL,
};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::nvrtc::{CompileOptions, Compiler, Cubin};

/// The shape of one [`launch_struct`] launch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StructLaunch {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads of a 1-D block.
    pub threads: u32,
    /// Dynamic shared memory per block, in bytes.
    pub smem: u32,
    /// Under programmatic stream serialization (CUDA Programming Guide, "Programmatic
    /// Dependent Launch"): the kernel may start while the previous kernel of the stream
    /// drains, and must wait (`griddepcontrol.wait`) before its first dependent global read.
    pub dependent_launch: bool,
    /// Thread-block clusters of this many CTAs along x (1: none; `grid.0` must be a
    /// multiple of it).
    pub cluster: u32,
}

/// Launches `func` on `stream` with one by-value parameter struct `params` in the shape
/// `launch`.
///
/// # Safety
/// `func` must take exactly one parameter, of `T`'s layout (a `#[repr(C)]` mirror whose
/// offsets the kernel's ABI test pins); every pointer inside `params` must be valid for
/// what the kernel reads and writes until it completes on `stream`; the grid, threads,
/// shared memory and cluster must be within the function's limits.
pub(crate) unsafe fn launch_struct<T>(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    launch: StructLaunch,
    params: T,
) -> std::result::Result<(), DriverError> {
    let mut arg = params;
    let mut kernel_params = [(&mut arg as *mut T).cast::<std::ffi::c_void>()];
    // SAFETY: one pointer to the one by-value argument, alive for the call; the rest is
    // this function's contract.
    unsafe { launch_args(stream, func, launch, &mut kernel_params) }
}

/// Launches `func` on `stream` in the shape `launch` with the by-value arguments that
/// `kernel_params` points to, in order (cuLaunchKernelEx's `kernelParams`).
///
/// # Safety
/// `kernel_params` must point to one live value per kernel parameter, each of the
/// parameter's layout; every device pointer inside them must be valid for what the kernel
/// reads and writes until it completes on `stream`; the launch shape must be within the
/// function's limits.
pub(crate) unsafe fn launch_args(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    launch: StructLaunch,
    kernel_params: &mut [*mut std::ffi::c_void],
) -> std::result::Result<(), DriverError> {
    let StructLaunch {
        grid,
        threads,
        smem,
        dependent_launch,
        cluster,
    } = launch;
    // SAFETY: an all-zero launch attribute value (a C union of plain data) is valid.
    let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    value.programmaticStreamSerializationAllowed = 1;
    // SAFETY: as above.
    let mut cluster_value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    cluster_value.clusterDim.x = cluster;
    cluster_value.clusterDim.y = 1;
    cluster_value.clusterDim.z = 1;
    // The attributes in use come first (no allocation on the launch path).
    let serialization = sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        pad: [0; 4],
        value,
    };
    let clusters = sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value: cluster_value,
    };
    let (mut attributes, used) = match (dependent_launch, cluster > 1) {
        (true, true) => ([serialization, clusters], 2),
        (true, false) => ([serialization, clusters], 1),
        (false, true) => ([clusters, serialization], 1),
        (false, false) => ([serialization, clusters], 0),
    };
    let config = sys::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: threads,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: smem,
        hStream: stream.cu_stream(),
        attrs: attributes.as_mut_ptr(),
        numAttrs: used,
    };
    stream.context().bind_to_thread()?;
    // SAFETY: `kernel_params` points at the by-value arguments for the duration of the
    // call, `config` and `attributes` outlive it; the argument's layout, its pointers and the
    // launch dimensions are this function's contract with its caller.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            func.cu_function(),
            kernel_params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
}

/// Grid and block shape of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub dynamic_shared_bytes: u32,
}

impl LaunchDims {
    /// One block of `threads` threads, no dynamic shared memory.
    pub fn one_block(threads: u32) -> Self {
        Self {
            grid: (1, 1, 1),
            block: (threads, 1, 1),
            dynamic_shared_bytes: 0,
        }
    }

    /// Threads per block.
    pub fn threads_per_block(&self) -> u64 {
        u64::from(self.block.0) * u64::from(self.block.1) * u64::from(self.block.2)
    }

    fn validate(&self) -> Result<()> {
        let t = self.threads_per_block();
        if t == 0 || t > 1024 {
            return Err(Error::InvalidArgument(format!(
                "{t} threads per block (must be 1..=1024)"
            )));
        }
        if self.grid.0 == 0 || self.grid.1 == 0 || self.grid.2 == 0 {
            return Err(Error::InvalidArgument("empty grid".into()));
        }
        Ok(())
    }

    fn config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: self.grid,
            block_dim: self.block,
            shared_mem_bytes: self.dynamic_shared_bytes,
        }
    }
}

/// Loads a cubin into the device's context.
pub fn load_module(device: &Device, cubin: &Cubin) -> Result<Arc<CudaModule>> {
    device
        .context()
        .load_module(CudarcImage::from_binary(cubin.bytes.clone()))
        .map_err(Error::driver(
            "loading the cubin (is it for this GPU's architecture?)",
        ))
}

/// A loaded kernel with signature `extern "C" __global__ void k(float* out)`
/// that writes at most `out_len` floats when launched with its dims.
#[derive(Debug, Clone)]
pub struct OutputKernel {
    function: CudaFunction,
    name: String,
    dims: LaunchDims,
    out_len: usize,
}

impl OutputKernel {
    /// Wraps kernel `name` of a loaded module.
    ///
    /// # Safety
    ///
    /// The kernel must have exactly the signature `(float* out)`, and when
    /// launched with `dims` it must write only `out[0..out_len]`.
    pub unsafe fn from_module(
        module: &Arc<CudaModule>,
        name: &str,
        dims: LaunchDims,
        out_len: usize,
    ) -> Result<Self> {
        dims.validate()?;
        let function = module
            .load_function(name)
            .map_err(Error::driver("looking up the kernel in the module"))?;
        Ok(Self {
            function,
            name: name.to_string(),
            dims,
            out_len,
        })
    }

    /// Compiles and loads the wgmma accumulator probe for `device`.
    pub fn wgmma_probe(device: &Device, compiler: &Compiler, probe: &WgmmaProbe) -> Result<Self> {
        let cubin = compiler.compile_cubin(&probe.source(), &CompileOptions::new(device.arch()))?;
        let module = load_module(device, &cubin)?;
        // SAFETY: the probe source declares `fragmask_wgmma_probe(float* out)`
        // and, launched as one block of `probe.threads()` threads, writes
        // exactly `out[0..probe.out_len()]` (fragmask-kernels documents and
        // tests this layout).
        unsafe {
            Self::from_module(
                &module,
                WGMMA_PROBE_KERNEL,
                LaunchDims::one_block(probe.threads()),
                probe.out_len(),
            )
        }
    }

    /// Compiles and loads the mma.sync m16n8k16 probe for `device`.
    pub fn mma_sync_probe(device: &Device, compiler: &Compiler) -> Result<Self> {
        let cubin =
            compiler.compile_cubin(&MmaSyncProbe::source(), &CompileOptions::new(device.arch()))?;
        let module = load_module(device, &cubin)?;
        // SAFETY: the probe source declares `fragmask_mma_sync_probe(float* out)`
        // and, launched as one warp, writes exactly `out[0..MMA_SYNC_PROBE_OUT_LEN]`.
        unsafe {
            Self::from_module(
                &module,
                MMA_SYNC_PROBE_KERNEL,
                LaunchDims::one_block(MMA_SYNC_PROBE_THREADS),
                MMA_SYNC_PROBE_OUT_LEN,
            )
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its launch shape.
    pub fn dims(&self) -> LaunchDims {
        self.dims
    }

    /// Floats it writes.
    pub fn out_len(&self) -> usize {
        self.out_len
    }

    /// Enqueues one launch writing into `out` (which must hold `out_len` floats).
    pub fn launch(&self, stream: &Arc<CudaStream>, out: &mut CudaSlice<f32>) -> Result<()> {
        if out.len() < self.out_len {
            return Err(Error::InvalidArgument(format!(
                "output buffer holds {} floats, kernel {} writes {}",
                out.len(),
                self.name,
                self.out_len
            )));
        }
        let mut builder = stream.launch_builder(&self.function);
        builder.arg(out);
        // SAFETY: the constructor's contract guarantees the signature is
        // `(float* out)` and that at most `out_len` floats are written;
        // `out` was checked to be at least that long and lives on `stream`.
        unsafe { builder.launch(self.dims.config()) }
            .map_err(Error::driver("launching the kernel"))?;
        Ok(())
    }

    /// Runs the kernel once on `stream` and returns its output.
    ///
    /// The buffer is pre-filled with NaN, so slots the kernel failed to write
    /// are recognisable (NaN never decodes to a coordinate).
    pub fn run(&self, stream: &Arc<CudaStream>) -> Result<Vec<f32>> {
        let mut out = stream
            .clone_htod(&vec![f32::NAN; self.out_len])
            .map_err(Error::driver("allocating the output buffer"))?;
        self.launch(stream, &mut out)?;
        stream
            .synchronize()
            .map_err(Error::driver("running the kernel"))?;
        let host = stream
            .clone_dtoh(&out)
            .map_err(Error::driver("copying the output back"))?;
        stream
            .synchronize()
            .map_err(Error::driver("copying the output back"))?;
        Ok(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_validation() {
        assert!(LaunchDims::one_block(32).validate().is_ok());
        assert!(LaunchDims::one_block(0).validate().is_err());
        assert!(LaunchDims::one_block(1025).validate().is_err());
        assert_eq!(LaunchDims::one_block(512).threads_per_block(), 512);
    }
}
