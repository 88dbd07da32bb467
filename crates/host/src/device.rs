//! GPU discovery: is there a driver, how many devices, and opening one.
//!
//! cudarc loads `libcuda` lazily and *panics* if it is missing. This module
//! never lets that happen: [`driver_available`] first probes the library
//! with a plain `dlopen` (cudarc's `is_culib_present`), and every call into
//! the driver made here runs under `catch_unwind` as a second guard (for
//! example against a driver too old to export a symbol cudarc resolves).
//! The outcome is one of two clearly worded errors:
//! [`Error::NoDriver`] ("no CUDA driver found") or [`Error::NoDevice`]
//! ("no CUDA device").

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaStream, DriverError};

use crate::error::{Error, Result};
use crate::nvrtc::Arch;

/// Compute capability `major.minor` (9.0 for H100).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl ComputeCapability {
    /// The architecture to compile for: the arch-specific `a` target where
    /// one exists (sm_90a, sm_100a, ...), so wgmma/tcgen05 are available;
    /// plain `sm_XY` before Hopper.
    pub fn arch(self) -> Arch {
        Arch::from_compute_capability(self.major, self.minor)
    }
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Runs a driver call, converting a cudarc panic into [`Error::NoDriver`].
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| Error::NoDriver {
        detail: "libcuda was found but cudarc could not load it (driver too old?)".into(),
    })
}

/// Maps the driver's "no device" codes to [`Error::NoDevice`].
fn classify(context: &'static str, e: DriverError) -> Error {
    use sys::cudaError_enum as E;
    match e.0 {
        E::CUDA_ERROR_NO_DEVICE => Error::NoDevice {
            detail: "the driver reports no CUDA-capable device".into(),
        },
        E::CUDA_ERROR_NOT_INITIALIZED | E::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH => Error::NoDevice {
            detail: format!("the driver could not initialise ({:?})", e.0),
        },
        _ => Error::Driver { context, source: e },
    }
}

/// Checks that the CUDA driver library can be loaded. Never panics.
pub fn driver_available() -> Result<()> {
    // SAFETY: `is_culib_present` only tries `dlopen` on candidate names of
    // libcuda and closes what it opened.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::NoDriver {
            detail: "libcuda.so could not be loaded (no NVIDIA driver on this machine)".into(),
        })
    }
}

/// Number of CUDA devices. `Err(NoDriver)` without a driver; `Err(NoDevice)`
/// when the driver sees no device (never `Ok(0)`).
pub fn device_count() -> Result<usize> {
    driver_available()?;
    let count = guarded(CudaContext::device_count)?.map_err(|e| classify("counting devices", e))?;
    if count <= 0 {
        return Err(Error::NoDevice {
            detail: "the driver reports 0 devices".into(),
        });
    }
    Ok(count as usize)
}

/// An opened CUDA device: its primary context plus what we know about it.
#[derive(Debug, Clone)]
pub struct Device {
    ctx: Arc<CudaContext>,
    name: String,
    cc: ComputeCapability,
}

impl Device {
    /// Opens device `ordinal` (retaining its primary context).
    pub fn open(ordinal: usize) -> Result<Self> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::DeviceOutOfRange { ordinal, count });
        }
        let ctx = guarded(|| CudaContext::new(ordinal))?
            .map_err(|e| classify("creating the device context", e))?;
        let name = guarded(|| ctx.name())?.map_err(Error::driver("reading the device name"))?;
        let (major, minor) = guarded(|| ctx.compute_capability())?
            .map_err(Error::driver("reading the compute capability"))?;
        Ok(Self {
            ctx,
            name,
            cc: ComputeCapability {
                major: major.max(0) as u32,
                minor: minor.max(0) as u32,
            },
        })
    }

    /// Opens device 0.
    pub fn first() -> Result<Self> {
        Self::open(0)
    }

    /// The device's marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its compute capability.
    pub fn compute_capability(&self) -> ComputeCapability {
        self.cc
    }

    /// The architecture to compile for on this device (sm_90a on Hopper).
    pub fn arch(&self) -> Arch {
        self.cc.arch()
    }

    /// The cudarc context, for work this crate does not wrap.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Wraps a stream another library owns (torch's `cuda_stream`, say) on this
    /// device's primary context, the context torch and cudarc share.
    ///
    /// # Safety
    /// `cu_stream` must be a live stream of this device's primary context (or 0, the
    /// legacy default stream), kept alive by its owner while the wrapper is used.
    pub unsafe fn borrowed_stream(&self, cu_stream: u64) -> Arc<CudaStream> {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            self.ctx
                .wrap_borrowed_stream(cu_stream as cudarc::driver::sys::CUstream)
        }
    }

    /// The context's default stream.
    pub fn default_stream(&self) -> Arc<CudaStream> {
        self.ctx.default_stream()
    }

    /// A new non-default stream.
    pub fn new_stream(&self) -> Result<Arc<CudaStream>> {
        self.ctx
            .new_stream()
            .map_err(Error::driver("creating a stream"))
    }
}

/// The device's multiprocessor count (`CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`), at
/// least 1: the split planners and the GPU packer size their grids with it.
pub fn multiprocessors(device: &Device) -> Result<usize> {
    let n = device
        .context()
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(Error::driver("reading the multiprocessor count"))?;
    Ok(n.max(1) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_never_panics_and_errors_are_worded_plainly() {
        match device_count() {
            Ok(n) => assert!(n > 0),
            Err(Error::NoDriver { .. }) => {
                let msg = device_count().unwrap_err().to_string();
                assert!(msg.starts_with("no CUDA driver found"), "{msg}");
            }
            Err(Error::NoDevice { .. }) => {
                let msg = device_count().unwrap_err().to_string();
                assert!(msg.starts_with("no CUDA device"), "{msg}");
            }
            Err(other) => panic!("unexpected discovery error: {other}"),
        }
    }

    #[test]
    fn compute_capability_picks_arch_specific_targets() {
        let hopper = ComputeCapability { major: 9, minor: 0 };
        assert_eq!(hopper.arch().as_str(), "sm_90a");
        let ampere = ComputeCapability { major: 8, minor: 0 };
        assert_eq!(ampere.arch().as_str(), "sm_80");
    }
}
