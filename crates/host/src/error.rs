//! The one error type of `fragmask-host`.

use std::fmt;
use std::path::PathBuf;

use cudarc::driver::DriverError;
use cudarc::nvrtc::result::NvrtcError;

/// Everything that can go wrong in the host runtime.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `libcuda` could not be loaded: there is no NVIDIA driver on this machine.
    NoDriver {
        /// What was tried.
        detail: String,
    },
    /// The driver loaded but reports no usable CUDA device.
    NoDevice {
        /// What the driver said.
        detail: String,
    },
    /// A device ordinal past the number of devices.
    DeviceOutOfRange {
        /// The requested ordinal.
        ordinal: usize,
        /// The number of devices present.
        count: usize,
    },
    /// A CUDA driver API call failed.
    Driver {
        /// What was being done.
        context: &'static str,
        /// The driver's error code.
        source: DriverError,
    },
    /// `libnvrtc` could not be loaded.
    NvrtcNotFound {
        /// What was tried.
        detail: String,
    },
    /// An NVRTC API call (other than the compilation itself) failed.
    Nvrtc {
        /// What was being done.
        context: &'static str,
        /// NVRTC's error code.
        source: NvrtcError,
    },
    /// NVRTC rejected the source; `log` is NVRTC's program log.
    Compile {
        /// The options the compilation ran with.
        options: Vec<String>,
        /// NVRTC's program log (errors and warnings).
        log: String,
    },
    /// An argument the caller passed is invalid.
    InvalidArgument(String),
    /// The device cannot run what was asked (e.g. wgmma before Hopper).
    Unsupported(String),
    /// An external tool (`cuobjdump`, `nvdisasm`, `ptxas`) was not found.
    ToolNotFound {
        /// The tool's name.
        tool: &'static str,
        /// Where it was looked for.
        searched: Vec<PathBuf>,
    },
    /// An external tool ran and failed.
    ToolFailed {
        /// The tool's name.
        tool: &'static str,
        /// Its exit status, as text.
        status: String,
        /// The tail of its standard error.
        stderr: String,
    },
    /// A tool's output could not be understood.
    Parse {
        /// Which output.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A file-system operation failed.
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A source generator in `fragmask-kernels` refused its arguments.
    Kernels(fragmask_kernels::Error),
}

impl Error {
    /// True for the two "no GPU here" errors ([`Error::NoDriver`], [`Error::NoDevice`]).
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, Error::NoDriver { .. } | Error::NoDevice { .. })
    }

    /// An I/O failure on `path`, as [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A CUDA driver failure while `context`, as [`Error::Driver`] (for `map_err`).
    pub fn driver(context: &'static str) -> impl FnOnce(DriverError) -> Self {
        move |source| Error::Driver { context, source }
    }

    pub(crate) fn nvrtc(context: &'static str) -> impl FnOnce(NvrtcError) -> Self {
        move |source| Error::Nvrtc { context, source }
    }
}

/// A source generator's refusal as [`Error::InvalidArgument`] (the GPU packer's kernels).
pub(crate) fn codegen(e: fragmask_kernels::apply::CodegenError) -> Error {
    Error::InvalidArgument(format!("code generation: {e}"))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDriver { detail } => write!(f, "no CUDA driver found: {detail}"),
            Error::NoDevice { detail } => write!(f, "no CUDA device: {detail}"),
            Error::DeviceOutOfRange { ordinal, count } => {
                write!(
                    f,
                    "CUDA device {ordinal} requested but only {count} present"
                )
            }
            Error::Driver { context, source } => {
                write!(f, "CUDA driver error while {context}: {source}")
            }
            Error::NvrtcNotFound { detail } => write!(
                f,
                "NVRTC not found ({detail}); run scripts/install-cuda-toolchain.sh and source \
                 the env.sh it writes, or put libnvrtc.so.13 on LD_LIBRARY_PATH"
            ),
            Error::Nvrtc { context, source } => write!(f, "NVRTC error while {context}: {source}"),
            Error::Compile { options, log } => {
                write!(f, "NVRTC compilation failed (options: {options:?}):\n{log}")
            }
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::Unsupported(msg) => write!(f, "unsupported on this device: {msg}"),
            Error::ToolNotFound { tool, searched } => write!(
                f,
                "{tool} not found (searched PATH and {searched:?}); run \
                 scripts/install-cuda-toolchain.sh or set FRAGMASK_CUDA_HOME"
            ),
            Error::ToolFailed {
                tool,
                status,
                stderr,
            } => write!(f, "{tool} failed ({status}): {stderr}"),
            Error::Parse { what, detail } => write!(f, "could not parse {what}: {detail}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Kernels(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Driver { source, .. } => Some(source),
            Error::Nvrtc { source, .. } => Some(source),
            Error::Io { source, .. } => Some(source),
            Error::Kernels(e) => Some(e),
            _ => None,
        }
    }
}

impl From<fragmask_kernels::Error> for Error {
    fn from(e: fragmask_kernels::Error) -> Self {
        Error::Kernels(e)
    }
}

/// Shorthand for `Result<T, fragmask_host::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
