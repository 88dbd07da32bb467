//! The sizes of one lightning decode call, checked before anything is allocated or
//! launched: every size that comes from a flag or a file goes through here.

use super::config::{ConfigError, LightningConfig};
use crate::family::dtype::ActDtype;

/// Largest batch: the grid's z extent (CUDA Programming Guide, Table 21).
pub const MAX_BATCH: usize = 65_535;
/// Largest head count: the grid's y extent.
pub const MAX_HEADS: usize = 65_535;
/// Largest number of tokens per call.
pub const MAX_TOKENS: usize = 1 << 20;
/// Most bytes one call's tensors take on the device (64 GiB: fits an 80 GB H100 with
/// room for the runtime; the attention forward's limit too).
pub const MAX_DEVICE_BYTES: usize = 64 << 30;

/// Why a lightning decode problem is refused.
#[derive(Clone, Debug, PartialEq)]
pub enum ProblemError {
    /// A size is zero or above its limit.
    Size {
        /// What (`batch`, `heads`, ...).
        what: &'static str,
        /// The value given.
        value: usize,
        /// The largest allowed.
        max: usize,
    },
    /// An element count overflows.
    Overflow(&'static str),
    /// A tensor's shape is not the expected one.
    Shape {
        /// The tensor (`q`, `state`, ...).
        tensor: &'static str,
        /// Its shape.
        got: Vec<usize>,
        /// The shape the problem needs.
        expected: Vec<usize>,
    },
    /// A slope is NaN or infinite.
    Slope {
        /// The head.
        head: usize,
        /// Its value.
        value: f32,
    },
    /// No geometry fits `D`, `E`.
    Config(ConfigError),
}

impl core::fmt::Display for ProblemError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProblemError::Size { what, value, max } => {
                write!(
                    f,
                    "{what} = {value} is out of range: it must be in 1..={max}"
                )
            }
            ProblemError::Overflow(what) => write!(f, "the {what} element count overflows"),
            ProblemError::Shape {
                tensor,
                got,
                expected,
            } => {
                write!(f, "{tensor} has shape {got:?}, expected {expected:?}")
            }
            ProblemError::Slope { head, value } => {
                write!(
                    f,
                    "slope of head {head} is {value}: slopes must be finite and non-negative \
                     (a negative slope makes the decay exp(-slope) grow the state)"
                )
            }
            ProblemError::Config(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ProblemError {}

/// The sizes of a lightning decode call: q, k `[B, H, n, D]`, v, o `[B, H, n, E]`,
/// state `[B, H, D, E]` fp32, slope `[H]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LightningProblem {
    /// `B`.
    pub batch: usize,
    /// `H`.
    pub heads: usize,
    /// `n`, tokens processed in order.
    pub tokens: usize,
    /// `D`.
    pub dim_k: usize,
    /// `E`.
    pub dim_v: usize,
    /// Element type of q, k, v, o.
    pub dtype: ActDtype,
}

impl LightningProblem {
    /// Checks every size and that a geometry exists for `D`, `E`.
    pub fn validate(self) -> Result<Self, ProblemError> {
        let limit = |what, value: usize, max| {
            if value == 0 || value > max {
                Err(ProblemError::Size { what, value, max })
            } else {
                Ok(())
            }
        };
        limit("batch", self.batch, MAX_BATCH)?;
        limit("heads", self.heads, MAX_HEADS)?;
        limit("tokens", self.tokens, MAX_TOKENS)?;
        limit("D (head size of q and k)", self.dim_k, 256)?;
        limit("E (head size of v)", self.dim_v, 256)?;
        for what in ["state", "q", "v"] {
            self.elements(what)?;
        }
        let bytes = self.device_bytes()?;
        if bytes > MAX_DEVICE_BYTES {
            return Err(ProblemError::Size {
                what: "bytes of the state, q, k, v and o on the device",
                value: bytes,
                max: MAX_DEVICE_BYTES,
            });
        }
        if LightningConfig::candidates(self.dim_k as u32, self.dim_v as u32, self.dtype).is_empty()
        {
            let err = LightningConfig::new(self.dim_k as u32, self.dim_v as u32, self.dtype, 8);
            return Err(ProblemError::Config(
                err.err().unwrap_or(ConfigError(String::new())),
            ));
        }
        Ok(self)
    }

    /// The shape of `tensor` (`q`, `k`, `v`, `o`, `state`, `slope`).
    pub fn shape(&self, tensor: &str) -> Vec<usize> {
        let (b, h, n) = (self.batch, self.heads, self.tokens);
        match tensor {
            "q" | "k" => vec![b, h, n, self.dim_k],
            "v" | "o" => vec![b, h, n, self.dim_v],
            "state" => vec![b, h, self.dim_k, self.dim_v],
            _ => vec![h],
        }
    }

    /// Elements of `tensor`, checked.
    pub fn elements(&self, tensor: &'static str) -> Result<usize, ProblemError> {
        self.shape(tensor)
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .filter(|&n| i64::try_from(n).is_ok())
            .ok_or(ProblemError::Overflow(tensor))
    }

    /// Checks that `got` is the shape of `tensor`.
    pub fn check_shape(&self, tensor: &'static str, got: &[usize]) -> Result<(), ProblemError> {
        let expected = self.shape(tensor);
        if got == expected.as_slice() {
            Ok(())
        } else {
            Err(ProblemError::Shape {
                tensor,
                got: got.to_vec(),
                expected,
            })
        }
    }

    /// Checks the slopes: one per head, each finite and non-negative (the decay
    /// `exp(-slope)` is then at most 1, so the state stays bounded).
    pub fn check_slopes(&self, slopes: &[f32]) -> Result<(), ProblemError> {
        self.check_shape("slope", &[slopes.len()])?;
        match slopes.iter().position(|s| !s.is_finite() || *s < 0.0) {
            Some(head) => Err(ProblemError::Slope {
                head,
                value: slopes[head],
            }),
            None => Ok(()),
        }
    }

    /// Bytes of one call's tensors on the device: the f32 state, q, k, v and o in the
    /// element type, and the f32 slopes.
    pub fn device_bytes(&self) -> Result<usize, ProblemError> {
        let size = self.dtype.size();
        let term = |t: &'static str, bytes: usize| {
            self.elements(t)?
                .checked_mul(bytes)
                .ok_or(ProblemError::Overflow(t))
        };
        [
            term("state", 4)?,
            term("q", size)?,
            term("k", size)?,
            term("v", size)?,
            term("o", size)?,
            term("slope", 4)?,
        ]
        .iter()
        .try_fold(0usize, |acc, &b| acc.checked_add(b))
        .ok_or(ProblemError::Overflow("device bytes"))
    }

    /// Bytes of one read and one write of the state: the kernel's memory floor.
    pub fn state_bytes_moved(&self) -> Result<usize, ProblemError> {
        self.elements("state")?
            .checked_mul(8)
            .ok_or(ProblemError::Overflow("state"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(batch: usize, heads: usize, tokens: usize, d: usize) -> LightningProblem {
        LightningProblem {
            batch,
            heads,
            tokens,
            dim_k: d,
            dim_v: d,
            dtype: ActDtype::Bf16,
        }
    }

    #[test]
    fn calls_beyond_the_device_limit_and_negative_slopes_are_refused() {
        let huge = LightningProblem {
            dim_v: 256,
            ..problem(65_535, 65_535, 1, 256)
        };
        assert!(matches!(
            huge.validate(),
            Err(ProblemError::Size { value, max: MAX_DEVICE_BYTES, .. }) if value > MAX_DEVICE_BYTES
        ));
        assert!(problem(4768, 64, 1, 256).validate().is_err());
        let p = problem(1, 2, 1, 64).validate().unwrap();
        assert!(p.device_bytes().unwrap() < 1 << 20);
        assert!(p.check_slopes(&[0.0, 0.5]).is_ok());
        assert!(matches!(
            p.check_slopes(&[0.5, -0.25]),
            Err(ProblemError::Slope { head: 1, .. })
        ));
    }

    #[test]
    fn sizes_out_of_range_are_refused_with_their_limit() {
        let e = problem(0, 64, 1, 96).validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "batch = 0 is out of range: it must be in 1..=65535"
        );
        assert!(problem(1, 70_000, 1, 96).validate().is_err());
        assert!(problem(1, 64, 0, 96).validate().is_err());
        assert!(problem(1, 64, 1, 300).validate().is_err());
        assert!(matches!(
            problem(1, 64, 1, 95).validate(),
            Err(ProblemError::Config(_))
        ));
    }

    #[test]
    fn huge_products_are_overflow_errors_not_wraps() {
        let p = problem(usize::MAX / 4, 64, 1, 96);
        assert_eq!(p.elements("state"), Err(ProblemError::Overflow("state")));
        assert_eq!(p.state_bytes_moved(), Err(ProblemError::Overflow("state")));
        // Validation stops at the batch limit before any product is formed.
        assert!(matches!(
            p.validate(),
            Err(ProblemError::Size { what: "batch", .. })
        ));
        assert_eq!(
            problem(1, 64, 1, 96).state_bytes_moved().unwrap(),
            64 * 96 * 96 * 8
        );
    }

    #[test]
    fn shapes_and_slopes_are_checked() {
        let p = problem(2, 4, 3, 96);
        assert!(p.check_shape("q", &[2, 4, 3, 96]).is_ok());
        let e = p.check_shape("state", &[2, 4, 96, 95]).unwrap_err();
        assert!(e.to_string().contains("expected [2, 4, 96, 96]"));
        assert!(p.check_slopes(&[0.1; 4]).is_ok());
        assert!(p.check_slopes(&[0.1; 3]).is_err());
        let e = p.check_slopes(&[0.1, f32::NAN, 0.2, 0.3]).unwrap_err();
        assert!(e.to_string().contains("head 1"));
    }
}
