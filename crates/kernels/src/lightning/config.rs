//! The geometry of the lightning decode kernel: one value from which the source takes
//! every number (threads, launch bounds, rows per thread, columns per CTA, splits).

use crate::family::dtype::ActDtype;

/// Floats per vector access of the state (16 bytes, one `float4`).
pub const VECTOR: u32 = 4;

/// The geometry of one compiled lightning decode kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LightningConfig {
    /// `D`, the key/query head size (rows of the state).
    pub dim_k: u32,
    /// `E`, the value head size (columns of the state).
    pub dim_v: u32,
    /// Threads along the columns of a CTA's tile, each owning one `float4` per row.
    pub col_vectors: u32,
    /// Threads per CTA.
    pub threads: u32,
    /// Element type of q, k, v and o.
    pub dtype: ActDtype,
    /// Tokens whose `o` partials are reduced per pass through shared memory.
    pub tokens_per_pass: u32,
    /// CTAs per SM the register budget is sized for (`__launch_bounds__`' second
    /// argument): 65536 / (threads · this) registers per thread at most.
    pub min_ctas_per_sm: u32,
}

/// Why a geometry cannot be built; the message lists what is supported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "unsupported lightning decode geometry: {}. Supported: D and E multiples of 4 in 4..=256, \
             col_vectors a power of two in 1..=32 with 4*col_vectors dividing E, threads a multiple \
             of 32 in 32..=1024 and of col_vectors, threads/col_vectors dividing D with at most 16 \
             rows per thread, tokens_per_pass in 1..=16, min_ctas_per_sm x threads <= 2048",
            self.0
        )
    }
}

impl std::error::Error for ConfigError {}

impl LightningConfig {
    /// Checks the geometry.
    pub fn validate(self) -> Result<Self, ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        let (d, e, cv, t) = (self.dim_k, self.dim_v, self.col_vectors, self.threads);
        if !(4..=256).contains(&d) || d % 4 != 0 || !(4..=256).contains(&e) || e % 4 != 0 {
            return err(format!("D = {d}, E = {e}"));
        }
        if !cv.is_power_of_two() || cv > 32 || e % (VECTOR * cv) != 0 {
            return err(format!("col_vectors = {cv} with E = {e}"));
        }
        if t % 32 != 0 || !(32..=1024).contains(&t) || t % cv != 0 {
            return err(format!("threads = {t} with col_vectors = {cv}"));
        }
        let row_threads = t / cv;
        if d % row_threads != 0 || d / row_threads > 16 {
            return err(format!("{row_threads} row threads for D = {d}"));
        }
        if !(1..=16).contains(&self.tokens_per_pass) {
            return err(format!("tokens_per_pass = {}", self.tokens_per_pass));
        }
        if self.min_ctas_per_sm == 0 || self.min_ctas_per_sm * t > 2048 {
            return err(format!(
                "min_ctas_per_sm = {} with {t} threads",
                self.min_ctas_per_sm
            ));
        }
        Ok(self)
    }

    /// The geometry for `D`, `E` and a dtype, with `col_vectors` threads along the
    /// columns and 128 threads, 8 tokens per pass, and the register budget of its rows.
    pub fn new(
        dim_k: u32,
        dim_v: u32,
        dtype: ActDtype,
        col_vectors: u32,
    ) -> Result<Self, ConfigError> {
        let config = LightningConfig {
            dim_k,
            dim_v,
            col_vectors,
            threads: 128,
            dtype,
            tokens_per_pass: 8,
            min_ctas_per_sm: 1,
        }
        .validate()?;
        // Registers: the state's 4 per row plus about 48 for indices, v, o and the
        // pointers (ptxas' report for D = E = 96); as many CTAs as that budget allows.
        let registers = (4 * config.rows_per_thread() + 48).next_multiple_of(8);
        let min_ctas_per_sm = (crate::family::sm90::SM_REGISTERS / (config.threads * registers))
            .clamp(1, 2048 / config.threads);
        LightningConfig {
            min_ctas_per_sm,
            ..config
        }
        .validate()
    }

    /// Threads along the rows: `threads / col_vectors`.
    pub const fn row_threads(self) -> u32 {
        self.threads / self.col_vectors
    }

    /// State rows each thread holds: `D / row_threads`.
    pub const fn rows_per_thread(self) -> u32 {
        self.dim_k / self.row_threads()
    }

    /// Columns of the state one CTA owns: `4 * col_vectors`.
    pub const fn cols_per_cta(self) -> u32 {
        VECTOR * self.col_vectors
    }

    /// CTAs per `(batch, head)` state: `E / cols_per_cta`.
    pub const fn splits(self) -> u32 {
        self.dim_v / self.cols_per_cta()
    }

    /// Warps per CTA.
    pub const fn warps(self) -> u32 {
        self.threads / 32
    }

    /// Rows of the tile one warp covers: `32 / col_vectors`.
    pub const fn rows_per_warp(self) -> u32 {
        32 / self.col_vectors
    }

    /// The geometries the host chooses between for `D`, `E`: the widest tile (fewest
    /// CTAs, most bytes in flight per thread) first.
    pub fn candidates(dim_k: u32, dim_v: u32, dtype: ActDtype) -> Vec<LightningConfig> {
        [8, 4, 2]
            .into_iter()
            .filter_map(|cv| LightningConfig::new(dim_k, dim_v, dtype, cv).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimax_geometry_splits_each_state_in_three() {
        let c = LightningConfig::new(96, 96, ActDtype::Bf16, 8).unwrap();
        assert_eq!(
            (
                c.row_threads(),
                c.rows_per_thread(),
                c.cols_per_cta(),
                c.splits()
            ),
            (16, 6, 32, 3)
        );
        let c = LightningConfig::new(96, 96, ActDtype::Bf16, 4).unwrap();
        assert_eq!(
            (c.row_threads(), c.rows_per_thread(), c.splits()),
            (32, 3, 6)
        );
    }

    #[test]
    fn unsupported_geometries_are_config_errors_that_list_the_rules() {
        for (d, e, cv) in [
            (96, 96, 16),
            (95, 96, 8),
            (96, 96, 3),
            (512, 96, 8),
            (40, 96, 8),
        ] {
            let err = LightningConfig::new(d, e, ActDtype::F32, cv).unwrap_err();
            assert!(err.to_string().contains("Supported:"), "{err}");
        }
    }

    #[test]
    fn candidates_exist_for_the_issue_head_sizes() {
        for d in [64, 96, 128, 256] {
            assert!(
                !LightningConfig::candidates(d, d, ActDtype::Bf16).is_empty(),
                "D = {d}"
            );
        }
    }
}
