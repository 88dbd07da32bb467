//! The sizes of a decode call, its typed errors, the host-side checks of lengths and
//! block tables, and the plan (split count, workspace) — all before anything is
//! allocated or launched, and none of it needs a GPU.

use fragmask_kernels::decode::{
    ConfigError, DecodeConfig, KvLayout, CLUSTER_MERGE, MAX_CLUSTER_SPLITS, MAX_PAGE_SIZE,
    TILE_KEYS, TILE_ROWS,
};
use fragmask_kernels::family::dtype::ActDtype;

/// What the split planner charges, in shared-K/V stages, for merging splits through
/// workspace partials and the combine kernel instead of a cluster.
const COMBINE_STAGES: f64 = 2.0;
/// Largest batch: the grid's z extent (CUDA Programming Guide, Table 21).
pub const MAX_BATCH: usize = 65_535;
/// Largest KV head count: the grid's y extent.
pub const MAX_KV_HEADS: usize = 65_535;
/// Largest key capacity of a request (keeps every key index and window sum in `int`).
pub const MAX_CAPACITY: usize = 1 << 30;
/// Largest number of new tokens per request.
pub const MAX_SEQLEN_Q: usize = 1 << 16;
/// Most splits of a request's keys.
pub const MAX_SPLITS: usize = 256;

/// Whether `rows` packed rows per (request, head group) take shared-K/V CTAs: with
/// four or more m16 tiles, one 64-row CTA reads each K/V tile once where four 16-row
/// CTAs read it four times (docs/decode.md, "Row-block CTAs").
pub fn shared_kv_pays(rows: usize) -> bool {
    rows > 3 * TILE_ROWS as usize
}

/// Why a decode call is refused, or failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum DecodeError {
    /// A size is zero or above its limit.
    Size {
        /// What (`batch`, `kv_heads`, ...).
        what: &'static str,
        /// The value given.
        value: usize,
        /// The largest allowed.
        max: usize,
    },
    /// `H` is not a multiple of `Hkv`.
    HeadsNotDivisible {
        /// H.
        heads: usize,
        /// Hkv.
        kv_heads: usize,
    },
    /// The kernel has no variant for this head size.
    HeadDim(usize),
    /// The kernel has no variant for this page size.
    PageSize(usize),
    /// The kernel has no variant for this element type.
    Dtype(ActDtype),
    /// A request's key count exceeds the planned capacity.
    LengthAboveCapacity {
        /// The request.
        request: usize,
        /// Its key count.
        length: i64,
        /// The capacity.
        capacity: usize,
    },
    /// A block table entry a request reads points outside the page pool.
    BlockTable {
        /// The request.
        request: usize,
        /// The slot of its row.
        slot: usize,
        /// The entry.
        page: i64,
        /// Pages in the pool.
        num_pages: usize,
    },
    /// A tensor's length is not the one the shape needs.
    Shape {
        /// The tensor.
        tensor: &'static str,
        /// Its element count.
        got: usize,
        /// The count the shape needs.
        expected: usize,
    },
    /// An element count overflows.
    Overflow(&'static str),
    /// The softmax scale is not finite and positive.
    Scale(f64),
    /// The workspace is smaller than the plan needs.
    Workspace {
        /// Floats provided.
        have: usize,
        /// Floats needed.
        need: usize,
    },
    /// A block-sparse mask does not fit the call (shape, tile, or head packing).
    Mask {
        /// What does not fit.
        what: &'static str,
        /// Why, with the values.
        detail: String,
    },
    /// `cu_seqlens_q` is not `B + 1` non-decreasing offsets within q, each request at
    /// most the planned `seqlen_q` tokens.
    CuSeqlensQ {
        /// The entry.
        index: usize,
        /// Why, with the values.
        detail: String,
    },
    /// A top-k key index lies outside its request's keys.
    TopKIndex {
        /// The request.
        request: usize,
        /// The position in its list.
        slot: usize,
        /// The index given.
        index: i64,
        /// The request's key count.
        seqlen_k: usize,
    },
    /// The host copies of a check's inputs and CPU reference exceed the checking crate's
    /// budget (`fragmask_check::limits::MAX_HOST_BYTES`).
    HostMemory {
        /// What needs the memory.
        what: &'static str,
        /// Bytes needed (`usize::MAX`: overflows).
        need: usize,
        /// The budget.
        max: usize,
    },
    /// The geometry is not supported.
    Config(ConfigError),
    /// The runtime (driver, compiler) failed.
    Gpu(crate::Error),
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::Size { what, value, max } => {
                write!(f, "{what} = {value} is out of range: it must be in 1..={max}")
            }
            DecodeError::HeadsNotDivisible { heads, kv_heads } => write!(
                f,
                "H = {heads} query heads is not a multiple of Hkv = {kv_heads} KV heads"
            ),
            DecodeError::HeadDim(d) => write!(
                f,
                "head size D = {d} is not supported: decode supports D = 64, 128 and 256"
            ),
            DecodeError::PageSize(p) => write!(
                f,
                "page size {p} is not supported: it must be a power of two in 1..={MAX_PAGE_SIZE}"
            ),
            DecodeError::Dtype(t) => write!(
                f,
                "element type {} is not supported: decode takes bf16 or f16",
                t.name()
            ),
            DecodeError::LengthAboveCapacity {
                request,
                length,
                capacity,
            } => write!(
                f,
                "request {request} holds {length} keys, outside 0..={capacity} (the planned capacity)"
            ),
            DecodeError::BlockTable {
                request,
                slot,
                page,
                num_pages,
            } => write!(
                f,
                "block_table[{request}][{slot}] = {page} points outside the pool of {num_pages} pages"
            ),
            DecodeError::Shape {
                tensor,
                got,
                expected,
            } => write!(f, "{tensor} holds {got} elements, the shape needs {expected}"),
            DecodeError::Overflow(what) => write!(f, "the {what} element count overflows"),
            DecodeError::Scale(s) => {
                write!(f, "softmax scale {s} is not supported: it must be finite and positive")
            }
            DecodeError::Workspace { have, need } => write!(
                f,
                "the workspace holds {have} floats, the plan needs {need}"
            ),
            DecodeError::Mask { what, detail } => write!(f, "decode mask: {what}: {detail}"),
            DecodeError::CuSeqlensQ { index, detail } => {
                write!(f, "cu_seqlens_q[{index}]: {detail}")
            }
            DecodeError::TopKIndex {
                request,
                slot,
                index,
                seqlen_k,
            } => write!(
                f,
                "top-k index [{request}][{slot}] = {index} is outside the request's {seqlen_k} keys"
            ),
            DecodeError::HostMemory { what, need, max } => write!(
                f,
                "{what} would take {need} bytes of host memory; at most {max} (4 GiB)"
            ),
            DecodeError::Config(e) => e.fmt(f),
            DecodeError::Gpu(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DecodeError {}

impl From<crate::Error> for DecodeError {
    fn from(e: crate::Error) -> Self {
        DecodeError::Gpu(e)
    }
}

/// The KV cache's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheShape {
    /// `[B, capacity, Hkv, D]`.
    Contiguous {
        /// Keys per request the cache holds.
        capacity: usize,
    },
    /// `[B, Hkv, capacity, D]` (head-major, the `[B, H, S, D]` order of SDPA and
    /// FlexAttention): each KV head's keys are one contiguous run, so a block-sparse
    /// call reads every listed 64-key block as one 16 KB span (D = 128) instead of 64
    /// rows `Hkv · D` elements apart (docs/decode.md, "Head-major caches").
    HeadMajor {
        /// Keys per request the cache holds.
        capacity: usize,
    },
    /// `[num_pages, page_size, Hkv, D]` with `block_table [B, max_pages]`.
    Paged {
        /// Keys per page.
        page_size: usize,
        /// Pages in the pool.
        num_pages: usize,
        /// Block table entries per request.
        max_pages: usize,
    },
}

impl CacheShape {
    /// Keys a request can hold.
    pub fn capacity(&self) -> usize {
        match *self {
            CacheShape::Contiguous { capacity } | CacheShape::HeadMajor { capacity } => capacity,
            CacheShape::Paged {
                page_size,
                max_pages,
                ..
            } => page_size.saturating_mul(max_pages),
        }
    }
}

/// The sizes of one decode call. q and o are `[B, Sq, H, D]`, lse `[B, H, Sq]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodeShape {
    /// B, requests.
    pub batch: usize,
    /// Sq, new tokens per request (the last Sq positions of its keys).
    pub seqlen_q: usize,
    /// H, query heads.
    pub heads: usize,
    /// Hkv, KV heads (H / Hkv query heads share one; 1 is MQA).
    pub kv_heads: usize,
    /// D.
    pub head_dim: usize,
    /// Element type of q, k, v, o.
    pub dtype: ActDtype,
    /// The KV cache.
    pub cache: CacheShape,
    /// Keys a query sees to its left (`None`: all).
    pub window_left: Option<usize>,
    /// Keys a query sees to its right (`Some(0)`: causal; `None`: all).
    pub window_right: Option<usize>,
    /// The softmax scale (`None`: 1/√D).
    pub softmax_scale: Option<f64>,
}

impl DecodeShape {
    /// The decode form of an attention forward with one query row and no mask, window
    /// or causal bound (the attention entry point's decode shapes, CLI and Python
    /// alike): `B` requests of `H` query heads over `Hkv` KV heads of `seqlen_k` keys,
    /// read as head-major caches `[B, Hkv, Sk, D]` (the attention layout `[B, H, S, D]`)
    /// or, with `bshd`, as contiguous caches `[B, Sk, Hkv, D]` (`[B, S, H, D]`). The
    /// shape is not validated here ([`DecodePlan::new`] does).
    #[allow(clippy::too_many_arguments)]
    pub fn from_attention(
        batch: usize,
        heads: usize,
        kv_heads: usize,
        seqlen_k: usize,
        head_dim: usize,
        dtype: ActDtype,
        bshd: bool,
        softmax_scale: Option<f64>,
    ) -> Self {
        let capacity = seqlen_k;
        DecodeShape {
            batch,
            seqlen_q: 1,
            heads,
            kv_heads,
            head_dim,
            dtype,
            cache: if bshd {
                CacheShape::Contiguous { capacity }
            } else {
                CacheShape::HeadMajor { capacity }
            },
            window_left: None,
            window_right: None,
            softmax_scale,
        }
    }

    /// `H / Hkv`.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }

    /// Packed query rows per (request, KV head): `Sq · G`.
    pub fn rows(&self) -> usize {
        self.seqlen_q * self.group()
    }

    /// CTAs of 16 packed rows per (request, KV head).
    pub fn m_blocks(&self) -> usize {
        self.rows().div_ceil(TILE_ROWS as usize)
    }

    /// The scale actually used.
    pub fn scale(&self) -> f64 {
        self.softmax_scale
            .unwrap_or(1.0 / (self.head_dim as f64).sqrt())
    }

    /// The cache layout the kernel is compiled for.
    pub fn kv_layout(&self) -> KvLayout {
        match self.cache {
            // The kernel reads both contiguous orders through the cache's strides.
            CacheShape::Contiguous { .. } | CacheShape::HeadMajor { .. } => KvLayout::Contiguous,
            CacheShape::Paged { page_size, .. } => KvLayout::Paged {
                page_size: u32::try_from(page_size).unwrap_or(u32::MAX),
            },
        }
    }

    /// Checks every size, the head ratio, and that a kernel variant exists.
    pub fn validate(self) -> Result<Self, DecodeError> {
        let limit = |what, value: usize, max| {
            if value == 0 || value > max {
                Err(DecodeError::Size { what, value, max })
            } else {
                Ok(())
            }
        };
        limit("batch", self.batch, MAX_BATCH)?;
        limit("seqlen_q", self.seqlen_q, MAX_SEQLEN_Q)?;
        limit("kv_heads", self.kv_heads, MAX_KV_HEADS)?;
        limit("heads", self.heads, MAX_KV_HEADS.saturating_mul(256))?;
        if self.heads % self.kv_heads != 0 {
            return Err(DecodeError::HeadsNotDivisible {
                heads: self.heads,
                kv_heads: self.kv_heads,
            });
        }
        if ![64, 128, 256].contains(&self.head_dim) {
            return Err(DecodeError::HeadDim(self.head_dim));
        }
        if self.dtype == ActDtype::F32 {
            return Err(DecodeError::Dtype(self.dtype));
        }
        match self.cache {
            CacheShape::Contiguous { capacity } | CacheShape::HeadMajor { capacity } => {
                limit("capacity", capacity, MAX_CAPACITY)?
            }
            CacheShape::Paged {
                page_size,
                num_pages,
                max_pages,
            } => {
                if !page_size.is_power_of_two() || page_size > MAX_PAGE_SIZE as usize {
                    return Err(DecodeError::PageSize(page_size));
                }
                limit("num_pages", num_pages, i32::MAX as usize)?;
                limit("max_pages", max_pages, MAX_CAPACITY / page_size)?;
            }
        }
        for (what, w) in [
            ("window_left", self.window_left),
            ("window_right", self.window_right),
        ] {
            if let Some(w) = w {
                if w > MAX_CAPACITY {
                    return Err(DecodeError::Size {
                        what,
                        value: w,
                        max: MAX_CAPACITY,
                    });
                }
            }
        }
        let scale = self.scale();
        if !scale.is_finite()
            || scale <= 0.0
            || !((scale * core::f64::consts::LOG2_E) as f32).is_finite()
        {
            return Err(DecodeError::Scale(scale));
        }
        // rows and m_blocks stay in int; every tensor's element count in i64.
        let rows = self
            .seqlen_q
            .checked_mul(self.group())
            .filter(|&r| r <= i32::MAX as usize / 2)
            .ok_or(DecodeError::Overflow("packed query rows"))?;
        let _ = rows;
        for t in ["q", "k", "block_table"] {
            self.elements(t)?;
        }
        self.config()?;
        Ok(self)
    }

    /// The kernel geometry for this shape without a mask: shared-K/V CTAs of 64 rows
    /// when a (request, KV head) has more than 48 packed rows ([`shared_kv_pays`]), 16-row
    /// CTAs otherwise.
    pub fn config(&self) -> Result<DecodeConfig, DecodeError> {
        let base = self.base_config()?;
        if shared_kv_pays(self.rows()) {
            base.with_shared_kv().map_err(DecodeError::Config)
        } else {
            Ok(base)
        }
    }

    /// The 16-row geometry of D, dtype and cache layout (no mask).
    pub fn base_config(&self) -> Result<DecodeConfig, DecodeError> {
        DecodeConfig::new(self.head_dim as u32, self.dtype, self.kv_layout())
            .map_err(DecodeError::Config)
    }

    /// The shape of `tensor`: `q`, `o` `[B, Sq, H, D]`; `lse` `[B, H, Sq]`; `k`, `v`
    /// `[B, capacity, Hkv, D]`, `[B, Hkv, capacity, D]` (head-major) or
    /// `[num_pages, page_size, Hkv, D]`; `block_table`
    /// `[B, max_pages]` (`[B, 0]` when contiguous); `seqlens_k` `[B]`.
    pub fn dims(&self, tensor: &str) -> Vec<usize> {
        let (b, sq, h, d) = (self.batch, self.seqlen_q, self.heads, self.head_dim);
        match tensor {
            "q" | "o" => vec![b, sq, h, d],
            "lse" => vec![b, h, sq],
            "k" | "v" => match self.cache {
                CacheShape::Contiguous { capacity } => vec![b, capacity, self.kv_heads, d],
                CacheShape::HeadMajor { capacity } => vec![b, self.kv_heads, capacity, d],
                CacheShape::Paged {
                    page_size,
                    num_pages,
                    ..
                } => vec![num_pages, page_size, self.kv_heads, d],
            },
            "block_table" => match self.cache {
                CacheShape::Contiguous { .. } | CacheShape::HeadMajor { .. } => vec![b, 0],
                CacheShape::Paged { max_pages, .. } => vec![b, max_pages],
            },
            _ => vec![b],
        }
    }

    /// Elements of `tensor`, checked (and within `i64`).
    pub fn elements(&self, tensor: &'static str) -> Result<usize, DecodeError> {
        self.dims(tensor)
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .filter(|&n| i64::try_from(n).is_ok() && n.checked_mul(4).is_some())
            .ok_or(DecodeError::Overflow(tensor))
    }

    /// Checks that `seqlens_k` holds `B` lengths, each in `0..=capacity`.
    pub fn check_lengths_only(&self, seqlens_k: &[i32]) -> Result<(), DecodeError> {
        let capacity = self.cache.capacity();
        if seqlens_k.len() != self.batch {
            return Err(DecodeError::Shape {
                tensor: "seqlens_k",
                got: seqlens_k.len(),
                expected: self.batch,
            });
        }
        for (request, &len) in seqlens_k.iter().enumerate() {
            if len < 0 || len as usize > capacity {
                return Err(DecodeError::LengthAboveCapacity {
                    request,
                    length: i64::from(len),
                    capacity,
                });
            }
        }
        Ok(())
    }

    /// Checks host-side lengths (`None`: every request at capacity) and the block
    /// table entries each request reads.
    pub fn check_lengths(
        &self,
        seqlens_k: Option<&[i32]>,
        block_table: &[i32],
    ) -> Result<(), DecodeError> {
        let capacity = self.cache.capacity();
        if let Some(lens) = seqlens_k {
            self.check_lengths_only(lens)?;
        }
        let expected = self.elements("block_table")?;
        if block_table.len() != expected {
            return Err(DecodeError::Shape {
                tensor: "block_table",
                got: block_table.len(),
                expected,
            });
        }
        if let CacheShape::Paged {
            page_size,
            num_pages,
            max_pages,
        } = self.cache
        {
            for request in 0..self.batch {
                let len = seqlens_k.map_or(capacity, |l| l[request] as usize);
                for slot in 0..len.div_ceil(page_size) {
                    let page = block_table[request * max_pages + slot];
                    if page < 0 || page as usize >= num_pages {
                        return Err(DecodeError::BlockTable {
                            request,
                            slot,
                            page: i64::from(page),
                            num_pages,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// How one decode call is split, fixed when it is planned so that nothing on the launch
/// path depends on the lengths it will see (CUDA-graph safe).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodePlan {
    /// The validated shape.
    pub shape: DecodeShape,
    /// The kernel geometry.
    pub config: DecodeConfig,
    /// Splits of each request's key tiles (1: no combine, no workspace).
    pub num_splits: usize,
    /// The longest key count the plan is sized for.
    pub max_seqlen_k: usize,
    /// The block-sparse mask's geometry (masked runners only).
    pub mask: Option<super::mask::MaskGeometry>,
    /// Variable query lengths: the rows of q and o (`[total_q, H, D]`, lse `[H, total_q]`)
    /// that `cu_seqlens_q [B + 1]` indexes; `shape.seqlen_q` is then the most tokens a
    /// request may have (the grid is sized for it). `None`: `[B, Sq, H, D]`.
    pub total_q: Option<usize>,
    /// Whether the G query heads of a KV head are packed into one CTA's rows (`true`),
    /// or each query head has its own CTAs (per-head masks with G > 1: each head walks
    /// its own list; K and V are read once per query head, mostly from L2).
    pub pack_heads: bool,
}

fn check_splits(s: usize) -> Result<usize, DecodeError> {
    if s == 0 || s > MAX_SPLITS {
        Err(DecodeError::Size {
            what: "splits",
            value: s,
            max: MAX_SPLITS,
        })
    } else {
        Ok(s)
    }
}

impl DecodePlan {
    /// Plans `shape` for requests of at most `max_seqlen_k` keys on `multiprocessors`
    /// SMs, with `splits` splits or ([`Self::choose_splits`]) the fewest that fill the
    /// SMs once.
    pub fn new(
        shape: DecodeShape,
        max_seqlen_k: usize,
        multiprocessors: usize,
        splits: Option<usize>,
    ) -> Result<Self, DecodeError> {
        let shape = shape.validate()?;
        let config = shape.config()?;
        let capacity = shape.cache.capacity();
        if max_seqlen_k > capacity {
            return Err(DecodeError::LengthAboveCapacity {
                request: 0,
                length: max_seqlen_k as i64,
                capacity,
            });
        }
        let mut plan = DecodePlan {
            shape,
            config,
            num_splits: 1,
            max_seqlen_k,
            mask: None,
            total_q: None,
            pack_heads: true,
        };
        plan.num_splits = match splits {
            Some(s) => check_splits(s)?,
            None if config.shared_kv => {
                let steps = plan.steps_of(max_seqlen_k);
                plan.choose_splits_balanced(&[steps], plan.grid_rows(), multiprocessors)
            }
            None => Self::choose_splits(&shape, config, max_seqlen_k, multiprocessors),
        };
        plan.check_grid()?;
        Ok(plan)
    }

    /// A plan for a block-sparse mask (from [`DecodeRunner::plan_masked`](super::DecodeRunner::plan_masked)):
    /// `config` is the masked runner's, `listed` the listed key blocks of every mask row
    /// block the grid visits (one entry per (request, head, row block) of the grid),
    /// and the splits balance those blocks over the SMs ([`Self::choose_splits_balanced`];
    /// 16-row CTAs size them for the longest list, [`Self::choose_splits`]).
    pub fn new_masked(
        shape: DecodeShape,
        config: DecodeConfig,
        geometry: super::mask::MaskGeometry,
        listed: &[usize],
        multiprocessors: usize,
        splits: Option<usize>,
    ) -> Result<Self, DecodeError> {
        let shape = shape.validate()?;
        let block_keys = geometry.block_n as usize;
        let most = listed.iter().copied().max().unwrap_or(0);
        let max_seqlen_k = most
            .saturating_mul(block_keys)
            .clamp(1, shape.cache.capacity());
        let mut plan = DecodePlan {
            shape,
            config,
            num_splits: 1,
            max_seqlen_k,
            mask: Some(geometry),
            total_q: None,
            pack_heads: geometry.pack_heads,
        };
        plan.num_splits = match splits {
            Some(s) => check_splits(s)?,
            None if config.shared_kv => {
                let steps: Vec<usize> = listed
                    .iter()
                    .map(|&n| plan.steps_of(n.saturating_mul(block_keys)))
                    .collect();
                plan.choose_splits_balanced(&steps, 1, multiprocessors)
            }
            None => Self::choose_splits(&shape, config, max_seqlen_k, multiprocessors),
        };
        plan.check_grid()?;
        Ok(plan)
    }

    /// The plan of `shape` under `mask` on `multiprocessors` SMs (no GPU): the mask is
    /// fitted ([`DecodeMask::fit`](super::DecodeMask::fit)), the geometry is the masked
    /// one ([`super::masked_config`]), and the splits balance the listed blocks of the
    /// grid's CTAs ([`Self::new_masked`]).
    pub fn for_mask(
        shape: DecodeShape,
        mask: &super::DecodeMask,
        multiprocessors: usize,
        splits: Option<usize>,
    ) -> Result<Self, DecodeError> {
        let shape = shape.validate()?;
        let geometry = mask.fit(&shape)?;
        let config = super::masked_config(&shape, &geometry)?;
        let (row_group, grid_heads) = if geometry.pack_heads {
            (shape.group(), shape.kv_heads)
        } else {
            (1, shape.heads)
        };
        let listed = mask.listed_per_cta(
            shape.batch,
            grid_heads,
            shape.seqlen_q,
            row_group,
            config.cta_rows() as usize,
        );
        Self::new_masked(shape, config, geometry, &listed, multiprocessors, splits)
    }

    /// Shared-K/V stages (of `config.step_tiles()` 16-key tiles) covering `keys` keys.
    fn steps_of(&self, keys: usize) -> usize {
        keys.div_ceil(TILE_KEYS as usize * self.config.step_tiles() as usize)
    }

    /// CTA rows of the grid per split: requests × grid heads × m-blocks.
    fn grid_rows(&self) -> usize {
        self.shape.batch * self.grid_heads() * self.m_blocks()
    }

    fn check_grid(&self) -> Result<(), DecodeError> {
        self.workspace_floats()?;
        self.num_splits
            .checked_mul(self.m_blocks())
            .filter(|&x| x <= i32::MAX as usize)
            .ok_or(DecodeError::Overflow("grid"))?;
        Ok(())
    }

    /// The split count that balances shared-K/V stages over the SMs: `steps` holds the
    /// stages of each CTA row of the grid (each repeated `repeat` times), and a split
    /// count `s` costs, in stages, the longer of the longest CTA (`⌈steps / s⌉` plus one
    /// stage of overhead: prologue, partial write, combine read) and the total work
    /// spread over every CTA slot (`ctas_per_sm` per SM), plus one longest CTA more when
    /// the CTAs do not fit the slots at once; the cheapest `s` with at least two stages
    /// per split wins (ties: the fewer splits).
    ///
    /// Counting listed blocks rather than capacity keys is what sizes a masked call:
    /// write-up 002's 50% lists (182 blocks of 64 keys per head, 12 heads) give 22 splits
    /// of 8 to 9 blocks, its 10% lists (36 blocks) 18 splits of 2 (one wave of two CTAs
    /// per SM either way).
    pub fn choose_splits_balanced(
        &self,
        steps: &[usize],
        repeat: usize,
        multiprocessors: usize,
    ) -> usize {
        let slots = (multiprocessors.max(1) * self.config.ctas_per_sm() as usize) as f64;
        let most = steps.iter().copied().max().unwrap_or(0);
        let limit = (most / 2).clamp(1, MAX_SPLITS);
        let rows = (steps.len() * repeat.max(1)) as f64;
        let cost = |s: usize| {
            let longest = (most.div_ceil(s) + 1) as f64;
            let total: usize = steps.iter().map(|&n| s * (n.div_ceil(s) + 1)).sum();
            let spread = (total * repeat.max(1)) as f64 / slots;
            if rows * s as f64 <= slots {
                longest.max(spread)
            } else {
                // More CTAs than slots: some wait for a slot, a longest CTA late.
                longest.max(spread) + longest
            }
        };
        // Split counts a cluster cannot merge pay the partials' round trip and the
        // combine launch, about two stages (docs/PERF.md, write-up 002's decode).
        let merge_cost = |s: usize| {
            if CLUSTER_MERGE && self.config.shared_kv && s > MAX_CLUSTER_SPLITS as usize {
                COMBINE_STAGES
            } else {
                0.0
            }
        };
        let mut best = (f64::INFINITY, 1);
        for s in 1..=limit {
            let c = cost(s) + merge_cost(s);
            if c < best.0 - 1e-9 {
                best = (c, s);
            }
        }
        best.1
    }

    /// Whether the splits merge inside one thread-block cluster through distributed
    /// shared memory (shared-K/V CTAs, 2 to [`MAX_CLUSTER_SPLITS`] splits): no partials
    /// in the workspace and no combine kernel (docs/decode.md, "Cluster merge").
    pub fn cluster_merge(&self) -> bool {
        CLUSTER_MERGE
            && self.config.shared_kv
            && (2..=MAX_CLUSTER_SPLITS as usize).contains(&self.num_splits)
    }

    /// Query heads packed per grid head: G, or 1 when heads are not packed.
    pub fn row_group(&self) -> usize {
        if self.pack_heads {
            self.shape.group()
        } else {
            1
        }
    }

    /// The grid's y extent: KV heads (packed) or query heads.
    pub fn grid_heads(&self) -> usize {
        if self.pack_heads {
            self.shape.kv_heads
        } else {
            self.shape.heads
        }
    }

    /// Packed rows per (request, grid head): `Sq · row_group`.
    pub fn rows(&self) -> usize {
        self.shape.seqlen_q * self.row_group()
    }

    /// CTAs of `config.cta_rows()` packed rows per (request, grid head).
    pub fn m_blocks(&self) -> usize {
        self.rows().div_ceil(self.config.cta_rows() as usize)
    }

    /// Rows of a partial (request, grid head) block: `m_blocks · cta_rows`.
    pub fn m_pad(&self) -> usize {
        self.m_blocks() * self.config.cta_rows() as usize
    }

    /// The fewest splits whose CTAs fill the SMs, one CTA each, to at least 95% of the
    /// best split count's fill, with at least two tiles per warp per split; a plan that
    /// comes out unsplit with at most one wave of CTAs is planned again on two CTA slots
    /// per SM (where two fit).
    ///
    /// One CTA per SM keeps at most 4 warps x 2 stages x 8 KB in flight (D = 128), which
    /// saturates HBM in some processes and not in others: measured on one H100 in one
    /// job (bench/results/python-overhead-2026-11-25-h100), B=16, Hkv=8, Sk=8192 read
    /// from torch tensors reaches 0.85 of the copy roof with 1 split (128 CTAs) and 0.99
    /// with 2, 0.96 with 4, 0.95 with 8, where `fragmask bench decode`'s own buffers
    /// give 0.98 with 1 split. Split plans stay on one slot per SM: B=1, Sk=65536 read
    /// 0.88 with 16 splits and 0.83 with 33 (docs/decode.md).
    pub fn choose_splits(
        shape: &DecodeShape,
        config: DecodeConfig,
        max_seqlen_k: usize,
        multiprocessors: usize,
    ) -> usize {
        let sms = multiprocessors.max(1);
        let base = (shape.batch * shape.kv_heads * shape.m_blocks()).max(1);
        let tiles = max_seqlen_k.div_ceil(TILE_KEYS as usize);
        let most = (tiles / (2 * config.warps as usize)).clamp(1, MAX_SPLITS);
        let plan_on = |slots: usize| {
            let fill = |s: usize| {
                let ctas = base * s;
                ctas as f64 / (ctas.div_ceil(slots) * slots) as f64
            };
            let best = (1..=most).map(fill).fold(0.0, f64::max);
            (1..=most).find(|&s| fill(s) >= 0.95 * best).unwrap_or(1)
        };
        let splits = plan_on(sms);
        if splits == 1 && base <= sms && config.ctas_per_sm() >= 2 {
            plan_on(2 * sms)
        } else {
            splits
        }
    }

    /// The same plan with variable query lengths over `total_q` rows of q and o
    /// (`shape.seqlen_q` becomes the most tokens one request may have). CUDA-graph safe:
    /// the grid depends only on the plan; each CTA reads its request's tokens from
    /// `cu_seqlens_q` on the device.
    pub fn with_varlen(mut self, total_q: usize) -> Result<Self, DecodeError> {
        if total_q == 0 || total_q > i32::MAX as usize {
            return Err(DecodeError::Size {
                what: "total_q",
                value: total_q,
                max: i32::MAX as usize,
            });
        }
        total_q
            .checked_mul(self.shape.heads * self.shape.head_dim)
            .filter(|&n| n <= i64::MAX as usize / 4)
            .ok_or(DecodeError::Overflow("q"))?;
        self.total_q = Some(total_q);
        Ok(self)
    }

    /// Elements of `tensor` under this plan (q, o and lse follow `total_q` when varlen).
    pub fn elements(&self, tensor: &'static str) -> Result<usize, DecodeError> {
        let s = &self.shape;
        match (self.total_q, tensor) {
            (Some(t), "q" | "o") => Ok(t * s.heads * s.head_dim),
            (Some(t), "lse") => Ok(t * s.heads),
            _ => s.elements(tensor),
        }
    }

    /// Checks `cu_seqlens_q` against the plan: `B + 1` non-decreasing offsets from 0,
    /// each request at most `shape.seqlen_q` tokens, the last at most `total_q`.
    pub fn check_cu_seqlens_q(&self, cu: &[i32]) -> Result<(), DecodeError> {
        let s = &self.shape;
        let total = self.total_q.unwrap_or(s.batch * s.seqlen_q);
        if cu.len() != s.batch + 1 {
            return Err(DecodeError::Shape {
                tensor: "cu_seqlens_q",
                got: cu.len(),
                expected: s.batch + 1,
            });
        }
        if cu[0] != 0 {
            return Err(DecodeError::CuSeqlensQ {
                index: 0,
                detail: format!("is {}, the offsets start at 0", cu[0]),
            });
        }
        for i in 1..cu.len() {
            let n = i64::from(cu[i]) - i64::from(cu[i - 1]);
            if n < 0 || n > s.seqlen_q as i64 || cu[i] as i64 > total as i64 {
                return Err(DecodeError::CuSeqlensQ {
                    index: i,
                    detail: format!(
                        "is {} after {}: request {} must hold 0..={} tokens within the {total} rows of q",
                        cu[i],
                        cu[i - 1],
                        i - 1,
                        s.seqlen_q
                    ),
                });
            }
        }
        Ok(())
    }

    /// Floats of the workspace: partial o `[splits, B, Hkv, m_pad, D]` and lse
    /// `[splits, B, Hkv, m_pad]` (both empty with one split or a cluster merge; H in place of Hkv when heads
    /// are not packed).
    pub fn workspace_floats(&self) -> Result<(usize, usize), DecodeError> {
        if self.num_splits == 1 || self.cluster_merge() {
            return Ok((0, 0));
        }
        let s = &self.shape;
        let _ = s;
        let lse = [self.num_splits, s.batch, self.grid_heads(), self.m_pad()]
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| i64::try_from(n).is_ok())
            .ok_or(DecodeError::Overflow("workspace"))?;
        let o = lse
            .checked_mul(s.head_dim)
            .filter(|&n| i64::try_from(n).is_ok() && n.checked_mul(4).is_some())
            .ok_or(DecodeError::Overflow("workspace"))?;
        Ok((o, lse))
    }

    /// Bytes one call must read at least: K and V of every visible key (at
    /// `seqlens_k`), q, and o written.
    pub fn bytes_moved(&self, total_keys: usize) -> usize {
        let s = &self.shape;
        let e = s.dtype.size();
        2 * total_keys * s.kv_heads * s.head_dim * e
            + 2 * s.batch * s.seqlen_q * s.heads * s.head_dim * e
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn shape(batch: usize, heads: usize, kv_heads: usize, sk: usize) -> DecodeShape {
        DecodeShape {
            batch,
            seqlen_q: 1,
            heads,
            kv_heads,
            head_dim: 128,
            dtype: ActDtype::Bf16,
            cache: CacheShape::Contiguous { capacity: sk },
            window_left: None,
            window_right: None,
            softmax_scale: None,
        }
    }

    #[test]
    fn attention_decode_shapes_plan_the_decode_commands_splits() {
        // B=16, H=32, Hkv=8, Sk=8192, D=128 on an H100's 132 SMs: `fragmask decode`
        // plans 2 splits (two CTAs per SM, `choose_splits`); the attention entry point's
        // form of it, in either layout, gets the same plan.
        let decode = DecodePlan::new(shape(16, 32, 8, 8192), 8192, 132, None).unwrap();
        assert_eq!(decode.num_splits, 2);
        for bshd in [false, true] {
            let s = DecodeShape::from_attention(16, 32, 8, 8192, 128, ActDtype::Bf16, bshd, None);
            let p = DecodePlan::new(s, 8192, 132, None).unwrap();
            assert_eq!(
                (p.num_splits, p.config, p.grid_rows()),
                (decode.num_splits, decode.config, decode.grid_rows()),
                "bshd={bshd}"
            );
        }
        // A long single request splits, the same way in both forms.
        let decode = DecodePlan::new(shape(1, 32, 8, 65536), 65536, 132, None).unwrap();
        let s = DecodeShape::from_attention(1, 32, 8, 65536, 128, ActDtype::Bf16, false, None);
        let p = DecodePlan::new(s, 65536, 132, None).unwrap();
        assert!(decode.num_splits > 1);
        assert_eq!(p.num_splits, decode.num_splits);
    }

    #[test]
    fn bad_shapes_are_typed_errors_checked_before_any_launch() {
        let e = shape(16, 30, 8, 64).validate().unwrap_err();
        assert!(
            matches!(
                e,
                DecodeError::HeadsNotDivisible {
                    heads: 30,
                    kv_heads: 8
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "H = 30 query heads is not a multiple of Hkv = 8 KV heads"
        );
        let mut s = shape(1, 8, 8, 64);
        s.head_dim = 96;
        assert!(matches!(s.validate(), Err(DecodeError::HeadDim(96))));
        s.head_dim = 128;
        s.cache = CacheShape::Paged {
            page_size: 24,
            num_pages: 4,
            max_pages: 4,
        };
        assert!(matches!(s.validate(), Err(DecodeError::PageSize(24))));
        s.cache = CacheShape::Contiguous { capacity: 64 };
        s.dtype = ActDtype::F32;
        assert!(matches!(
            s.validate(),
            Err(DecodeError::Dtype(ActDtype::F32))
        ));
        assert!(matches!(
            shape(0, 8, 8, 64).validate(),
            Err(DecodeError::Size { what: "batch", .. })
        ));
        assert!(matches!(
            shape(usize::MAX / 2, 8, 8, 64).validate(),
            Err(DecodeError::Size { what: "batch", .. })
        ));
        let mut s = shape(1, 8, 8, 64);
        s.softmax_scale = Some(f64::NAN);
        assert!(matches!(s.validate(), Err(DecodeError::Scale(_))));
    }

    #[test]
    fn lengths_above_capacity_and_block_tables_past_the_pool_are_refused() {
        let s = shape(2, 8, 8, 64);
        let e = s.check_lengths(Some(&[64, 65]), &[]).unwrap_err();
        assert!(
            matches!(
                e,
                DecodeError::LengthAboveCapacity {
                    request: 1,
                    length: 65,
                    capacity: 64
                }
            ),
            "{e}"
        );
        assert!(s.check_lengths(Some(&[-1, 3]), &[]).is_err());
        let paged = DecodeShape {
            cache: CacheShape::Paged {
                page_size: 16,
                num_pages: 4,
                max_pages: 2,
            },
            ..s
        };
        // Request 0 reads slots 0 and 1; request 1 (17 keys) reads slot 1 = page 4.
        let e = paged
            .check_lengths(Some(&[32, 17]), &[0, 1, 2, 4])
            .unwrap_err();
        assert!(
            matches!(
                e,
                DecodeError::BlockTable {
                    request: 1,
                    slot: 1,
                    page: 4,
                    num_pages: 4
                }
            ),
            "{e}"
        );
        // An unused slot may hold anything (-1 padding).
        paged
            .check_lengths(Some(&[32, 16]), &[0, 1, 2, -1])
            .unwrap();
        assert!(paged.check_lengths(Some(&[32, 16]), &[0, 1, 2]).is_err());
    }

    #[test]
    fn bad_cu_seqlens_q_are_typed_errors() {
        let mut s = shape(3, 8, 2, 64);
        s.seqlen_q = 4;
        let plan = DecodePlan::new(s, 64, 132, None)
            .unwrap()
            .with_varlen(10)
            .unwrap();
        assert_eq!(plan.elements("q").unwrap(), 10 * 8 * 128);
        assert_eq!(plan.elements("lse").unwrap(), 10 * 8);
        assert!(plan.check_cu_seqlens_q(&[0, 4, 4, 7]).is_ok());
        for (cu, index) in [
            (vec![1, 4, 4, 7], 0),
            (vec![0, 5, 5, 7], 1),
            (vec![0, 4, 3, 7], 2),
            (vec![0, 4, 8, 11], 3),
        ] {
            match plan.check_cu_seqlens_q(&cu) {
                Err(DecodeError::CuSeqlensQ { index: i, .. }) => assert_eq!(i, index, "{cu:?}"),
                other => panic!("{cu:?}: {other:?}"),
            }
        }
        assert!(matches!(
            plan.check_cu_seqlens_q(&[0, 1]),
            Err(DecodeError::Shape {
                tensor: "cu_seqlens_q",
                ..
            })
        ));
        assert!(DecodePlan::new(s, 64, 132, None)
            .unwrap()
            .with_varlen(0)
            .is_err());
    }

    #[test]
    fn cluster_merge_takes_shared_kv_plans_of_2_to_16_splits_and_drops_their_workspace() {
        let mut s = shape(1, 12, 12, 4096);
        s.seqlen_q = 64;
        for splits in [1, 2, 16, 17] {
            let plan = DecodePlan::new(s, 4096, 132, Some(splits)).unwrap();
            assert!(plan.config.shared_kv);
            let merged = CLUSTER_MERGE && (2..=16).contains(&splits);
            assert_eq!(plan.cluster_merge(), merged, "{splits}");
            let (o, lse) = plan.workspace_floats().unwrap();
            assert_eq!(o == 0 && lse == 0, splits == 1 || merged, "{splits}");
        }
        // 16-row CTAs never merge in a cluster.
        let plan = DecodePlan::new(shape(2, 16, 4, 4096), 4096, 132, Some(4)).unwrap();
        assert!(!plan.config.shared_kv && !plan.cluster_merge());
    }

    #[test]
    fn balanced_splits_give_every_cta_slot_a_near_equal_share_of_listed_blocks() {
        // Write-up 002's decode: 64 tokens, 12 heads, 64-key blocks; shared-K/V CTAs.
        let mut s = shape(1, 12, 12, 23296);
        s.seqlen_q = 64;
        let plan = DecodePlan::new(s, 23296, 132, Some(1)).unwrap();
        assert!(plan.config.shared_kv && plan.m_blocks() == 1);
        let slots = 132 * plan.config.ctas_per_sm() as usize;
        for blocks in [182usize, 36] {
            let n = plan.choose_splits_balanced(&[blocks; 12], 1, 132);
            // One wave: every CTA has a slot, and no CTA holds more than one block above
            // an even share of the 12 lists over the slots.
            assert!(12 * n <= slots, "{blocks}: {n} splits");
            let even = (12 * blocks).div_ceil(slots);
            assert!(
                blocks.div_ceil(n) <= even + 1 + blocks / n / 8,
                "{blocks}: {n}"
            );
        }
        // Uneven lists: the longest list is cut finer than a capacity planner would.
        let uneven: Vec<usize> = (0..12).map(|h| if h == 0 { 300 } else { 20 }).collect();
        let n = plan.choose_splits_balanced(&uneven, 1, 132);
        assert!(300usize.div_ceil(n) <= 20, "{n}");
    }

    #[test]
    fn splits_fill_the_waves_of_132_sms() {
        let plan = |b, h, hkv, sk| {
            DecodePlan::new(shape(b, h, hkv, sk), sk, 132, None)
                .unwrap()
                .num_splits
        };
        // The four serving workloads, 95% of the best fill. B=16: 128 rows, unsplit on
        // one slot per SM, so planned on two: 2 splits = 256 of 264 slots; B=64: 512 rows
        // fill four waves unsplit; B=1: 8 rows x 16; B=8, H=64: 64 rows x 2.
        assert_eq!(plan(16, 32, 8, 8192), 2);
        assert_eq!(plan(64, 32, 8, 4096), 1);
        assert_eq!(plan(1, 32, 8, 65536), 16);
        assert_eq!(plan(8, 64, 8, 16384), 2);
        // Short requests: at least two tiles per warp per split.
        assert_eq!(plan(1, 32, 8, 64), 1);
        let p = DecodePlan::new(shape(1, 32, 8, 65536), 65536, 132, None).unwrap();
        assert_eq!(p.workspace_floats().unwrap().1, p.num_splits * 8 * 16);
        // A capacity plan: short requests split as much as long ones would.
        assert_eq!(
            DecodePlan::new(shape(1, 32, 8, 65536), 65536, 132, None)
                .unwrap()
                .num_splits,
            plan(1, 32, 8, 65536)
        );
        assert!(DecodePlan::new(shape(1, 32, 8, 64), 65, 132, None).is_err());
        assert!(DecodePlan::new(shape(1, 32, 8, 64), 64, 132, Some(0)).is_err());
    }
}
