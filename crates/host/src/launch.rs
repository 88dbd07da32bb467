//! The one launch mechanism of every kernel family, and typed wrappers over it.
//!
//! Every kernel the runtime (and the checking crate) launches goes through [`launch`]:
//! `cuLaunchKernelEx` (CUDA driver API, "Execution Control") with the launch's shape
//! ([`Launch`]: grid, block, dynamic shared memory) and its attributes (programmatic
//! dependent launch on or off, thread-block clusters), and the kernel's by-value
//! arguments ([`KernelArg`]).
//!
//! A raw CUDA launch is `unsafe`: nothing checks that the arguments match the kernel's
//! parameters. The families confine that to their plan's run. [`OutputKernel`] is the
//! signature of the hardware probes, `extern "C" __global__ void k(float* out)`; its safe
//! constructors ([`OutputKernel::wgmma_probe`], [`OutputKernel::mma_sync_probe`]) build it
//! from sources this workspace generates, so the signature and the output length are
//! known to be right.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{
    sys, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, DriverError,
};

use fragmask_kernels::probe::{
    MmaSyncProbe, WgmmaProbe, MMA_SYNC_PROBE_KERNEL, MMA_SYNC_PROBE_OUT_LEN,
    MMA_SYNC_PROBE_THREADS, WGMMA_PROBE_KERNEL,
};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::module_cache::{self, ContentDigest};
use crate::nvrtc::{Compiler, Cubin};

/// The shape and attributes of one [`launch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads of a block in x, y, z.
    pub block: (u32, u32, u32),
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

impl Launch {
    /// `grid` blocks of `threads` threads (1-D), no dynamic shared memory, no
    /// attribute.
    pub const fn new(grid: (u32, u32, u32), threads: u32) -> Self {
        Self {
            grid,
            block: (threads, 1, 1),
            smem: 0,
            dependent_launch: false,
            cluster: 1,
        }
    }

    /// With `bytes` of dynamic shared memory per block.
    pub const fn smem(self, bytes: u32) -> Self {
        Self {
            smem: bytes,
            ..self
        }
    }

    /// Under programmatic dependent launch when `on` ([`Self::dependent_launch`]).
    pub const fn dependent(self, on: bool) -> Self {
        Self {
            dependent_launch: on,
            ..self
        }
    }

    /// In clusters of `ctas` CTAs along x ([`Self::cluster`]).
    pub const fn clusters(self, ctas: u32) -> Self {
        Self {
            cluster: ctas,
            ..self
        }
    }
}

/// One by-value kernel argument: the address of its bytes, borrowed for the launch
/// (an entry of `cuLaunchKernelEx`'s `kernelParams`; the driver copies the bytes).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct KernelArg<'a>(*mut c_void, PhantomData<&'a ()>);

impl<'a> KernelArg<'a> {
    /// The argument `value` (a scalar, a device address as `u64`, or a `#[repr(C)]`
    /// parameter struct).
    pub fn new<T: DeviceRepr>(value: &'a T) -> Self {
        Self((value as *const T).cast_mut().cast(), PhantomData)
    }
}

/// Launches `func` on `stream` in the shape and with the attributes of `launch`, with
/// `args`, the kernel's parameters in order.
///
/// # Safety
/// `args` must be one value per kernel parameter, each of the parameter's layout; every
/// device address inside them must be valid for what the kernel reads and writes until
/// it completes on `stream`, with the writes it reads ordered before it on `stream`; the
/// grid, block, shared memory and cluster must be within the function's limits.
pub unsafe fn launch(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    launch: Launch,
    args: &[KernelArg<'_>],
) -> std::result::Result<(), DriverError> {
    let Launch {
        grid,
        block,
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
        blockDimX: block.0,
        blockDimY: block.1,
        blockDimZ: block.2,
        sharedMemBytes: smem,
        hStream: stream.cu_stream(),
        attrs: attributes.as_mut_ptr(),
        numAttrs: used,
    };
    stream.context().bind_to_thread()?;
    // SAFETY: `args` is `#[repr(transparent)]` over `*mut c_void`, so it is the driver's
    // `void**` array of argument addresses, each borrowed for the call (the driver reads
    // them, never writes); `config` and `attributes` outlive the call; the arguments'
    // layouts, their device addresses and the launch shape are this function's contract.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            func.cu_function(),
            args.as_ptr().cast_mut().cast(),
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

    fn launch(&self) -> Launch {
        Launch {
            block: self.block,
            ..Launch::new(self.grid, 1).smem(self.dynamic_shared_bytes)
        }
    }
}

/// Loads a cubin into the device's context, once per process and context
/// ([`crate::module_cache`], keyed by the image's digest).
pub fn load_module(device: &Device, cubin: &Cubin) -> Result<Arc<CudaModule>> {
    let loaded = module_cache::load::<Error>(
        device.context(),
        ContentDigest::of_image(&cubin.bytes),
        &[],
        || Ok(cubin.bytes.clone()),
        |_| Ok(()),
    )?;
    Ok(Arc::clone(loaded.module()))
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
        let loaded = module_cache::compile_for_device(device, compiler, &probe.source(), &[])?;
        // SAFETY: the probe source declares `fragmask_wgmma_probe(float* out)`
        // and, launched as one block of `probe.threads()` threads, writes
        // exactly `out[0..probe.out_len()]` (fragmask-kernels documents and
        // tests this layout).
        unsafe {
            Self::from_module(
                loaded.module(),
                WGMMA_PROBE_KERNEL,
                LaunchDims::one_block(probe.threads()),
                probe.out_len(),
            )
        }
    }

    /// Compiles and loads the mma.sync m16n8k16 probe for `device`.
    pub fn mma_sync_probe(device: &Device, compiler: &Compiler) -> Result<Self> {
        let loaded =
            module_cache::compile_for_device(device, compiler, &MmaSyncProbe::source(), &[])?;
        // SAFETY: the probe source declares `fragmask_mma_sync_probe(float* out)`
        // and, launched as one warp, writes exactly `out[0..MMA_SYNC_PROBE_OUT_LEN]`.
        unsafe {
            Self::from_module(
                loaded.module(),
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
        let (address, _written) = out.device_ptr_mut(stream);
        // SAFETY: the constructor's contract guarantees the signature is
        // `(float* out)` and that at most `out_len` floats are written;
        // `out` was checked to be at least that long and lives on `stream` (the guard
        // orders the launch after its earlier uses and records its write).
        unsafe {
            launch(
                stream,
                &self.function,
                self.dims.launch(),
                &[KernelArg::new(&address)],
            )
        }
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
