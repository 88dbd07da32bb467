//! The schedule component: which tiles a CTA visits and in which order
//! (docs/architecture.md §3, "scheduler"), each schedule defined once.
//!
//! - [`row_block`]: a query row block walks key blocks (the forward): the window
//!   schedule (causal / sliding window / none, computed from the bounds, diagonal blocks
//!   first), the documents schedule (the same walk inside each document of a varlen
//!   grid) and the listed-blocks schedule (FlexAttention-style partial-then-full lists).
//! - [`key_tile`]: a key tile walks query steps (the backward): the same window, and the
//!   mask's transposed lists, with the host's largest-first order of key tiles and the
//!   deterministic rank of a CTA among the visitors of a query step.
//! - [`SPLIT_RANGE`]: split-KV's share of a schedule (the forward's splits and decode's),
//!   split `s` of `n` taking steps `[T s / n, T (s + 1) / n)`.
//!
//! Each schedule text defines `fm_schedule` and `fm_make_schedule`, and a per-step
//! record (`fm_tile_at` / `fm_step_at`); a kernel pastes exactly one of them.

pub mod key_tile;
pub mod row_block;

/// How a tile-list schedule ([`row_block::LISTS`], [`key_tile::LISTS`]) gets a step's
/// partial entries (docs/masks.md, "Dense tile lists").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ListEntries {
    /// Read from the lists.
    #[default]
    Read,
    /// Computed: every block of every row is partial, in order, its words at tile
    /// `row * row_len + block`, which the host checked (`BlockLists::dense_partial` in
    /// fragmask-masks).
    Dense,
    /// Computed where the lists' partial-tile count, read by each CTA from
    /// `p.lists_partial_count`, equals `p.lists_tiles`; read otherwise. For lists built on
    /// the GPU, whose packer numbers the partial tiles in row order, so that a count of
    /// every tile means dense lists, and whose count the host has not read
    /// ([`LISTS_DENSE_AT_RUN_TIME`]). In the backward only the deterministic rank is
    /// computed so; the entries are read ([`key_tile::list_values`]).
    DenseAtRunTime,
}

impl ListEntries {
    /// The schedules' `$LISTS_DENSE`: a C expression of `p`, nonzero where a step's
    /// entries are computed.
    pub fn dense_expr(self) -> &'static str {
        match self {
            ListEntries::Read => "0",
            ListEntries::Dense => "1",
            ListEntries::DenseAtRunTime => "fm_lists_dense_at_run_time(p)",
        }
    }

    /// The kernel name's suffix (empty for [`ListEntries::Read`]).
    pub fn suffix(self) -> &'static str {
        match self {
            ListEntries::Read => "",
            ListEntries::Dense => " dense",
            ListEntries::DenseAtRunTime => " dense-at-run-time",
        }
    }
}

/// `fm_lists_dense_at_run_time(p)` ([`ListEntries::DenseAtRunTime`]), for the forward's and
/// the backward's params alike: whether the GPU packer's partial-tile count equals the
/// tiles of the grid (a null count: never).
pub const LISTS_DENSE_AT_RUN_TIME: &str = r#"// ---- dense lists at run time (family::schedule::ListEntries::DenseAtRunTime; docs/masks.md, "Dense tile lists") ----
// Lists built on the GPU number their partial tiles in row order: a count of every tile means every block of every
// row is partial, in order, its words at tile row * row_len + block.
template <typename Params>
__device__ __forceinline__ int fm_lists_dense_at_run_time(const Params& p) {
    return p.lists_partial_count != nullptr && __ldg(p.lists_partial_count) == p.lists_tiles;
}
"#;

/// Window bounds at or above this are treated as unbounded.
pub const WINDOW_INFINITE: i32 = 1 << 30;

/// `fm_split_start(total, split, splits)`: the first step of split `split` of `splits`
/// over `total` steps (64-bit product, so `total * split` cannot overflow), the same
/// cut as the host's `reference::split_key_ranges`.
pub const SPLIT_RANGE: &str = r#"// ---- split-KV ranges (family::schedule): split s of n takes steps [total s / n, total (s + 1) / n) ----
__device__ __forceinline__ int fm_split_start(int total, int split, int splits) {
    return (int)((long long)total * split / splits);
}
"#;

/// The launch order of a one-tile grid (docs/architecture.md, "Launch order"; FlashAttention-4's
/// `SingleTileLPTScheduler`): the CTA of linear block index `x + xs (y + ys z)` (the order
/// the hardware dispatches them) takes x index `xi` of (head or KV head, batch) plane
/// `plane`, with the planes cut into sections of `section`: the sections one after the
/// other, and inside a section the x indices in order with the section's planes fastest.
/// A section of one plane is the grid itself. The host's mirror is
/// `attention::persistent::grid_tile`.
pub const SECTION_TILE: &str = r#"// ---- launch order: sections of head_section planes (y + gridDim.y z), x in order inside a section, planes fastest ----
__device__ __forceinline__ uint2 fm_section_tile(int head_section) {
    const unsigned xs = gridDim.x;
    const unsigned planes = gridDim.y * gridDim.z;
    const unsigned section = head_section > 1 ? min((unsigned)head_section, planes) : 1u;
    unsigned xi, plane;
    if (section == 1u) {
        xi = blockIdx.x;
        plane = blockIdx.y + gridDim.y * blockIdx.z;
    } else {
        const unsigned lin = blockIdx.x + xs * (blockIdx.y + gridDim.y * blockIdx.z);
        const unsigned sec = lin / (section * xs);
        const unsigned rem = lin - sec * section * xs;
        const unsigned first = sec * section;                 // the section's first plane
        const unsigned width = min(section, planes - first);  // the last section may be narrower
        xi = rem / width;
        plane = first + (rem - xi * width);
    }
    return make_uint2(xi, plane);
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_schedule_defines_its_walk_and_no_mask() {
        for text in [row_block::WINDOW, row_block::LISTS] {
            for f in ["struct fm_schedule", "fm_make_schedule(", "fm_tile_at("] {
                assert!(text.contains(f), "{f}");
            }
            assert!(!text.contains("fm_apply_mask"));
        }
        // The window walk on the whole sequence (the documents grid has no deterministic rank).
        let mut values = key_tile::KeyGrid::Global.values();
        values.push(("WINDOW_INFINITE", WINDOW_INFINITE.to_string()));
        let global = crate::family::template::fill(key_tile::WINDOW, &values).unwrap();
        for text in [global.as_str(), key_tile::LISTS, key_tile::PAIRED_LISTS] {
            for f in [
                "struct fm_schedule",
                "fm_make_schedule(",
                "fm_step_at(",
                "fm_cta_of_block(",
                "fm_step_rank(",
            ] {
                assert!(text.contains(f), "{f}");
            }
            assert!(!text.contains("fm_apply_mask"));
        }
        assert!(SPLIT_RANGE.contains("(long long)total * split / splits"));
    }

    #[test]
    fn only_the_run_time_variants_read_the_count_and_the_deterministic_mode_reads_its_entries() {
        use crate::attention::backward::{BackwardKernel, BackwardMask};
        use crate::attention::{AttentionKernel, MaskMode};
        let check = "fm_lists_dense_at_run_time(p)";
        for d in [64, 128, 256] {
            let k = AttentionKernel::default_for(d, MaskMode::Blocks).unwrap();
            for entries in [
                ListEntries::Read,
                ListEntries::Dense,
                ListEntries::DenseAtRunTime,
            ] {
                let src = k.with_list_entries(entries).unwrap().source().unwrap();
                assert_eq!(
                    src.contains(check),
                    entries == ListEntries::DenseAtRunTime,
                    "d{d}"
                );
                assert_eq!(src.contains("s.dense = 1;"), entries == ListEntries::Dense);
            }
        }
        // The backward computes its entries only for host-checked dense lists outside the
        // deterministic mode; the deterministic mode and the run-time check the rank alone.
        let mask = BackwardMask::Blocks {
            block_m: 128,
            block_n: 128,
        };
        for det in [false, true] {
            for entries in [
                ListEntries::Read,
                ListEntries::Dense,
                ListEntries::DenseAtRunTime,
            ] {
                let values = key_tile::list_values(entries, det);
                assert_eq!(values[0].1, entries.dense_expr());
                let computed = entries == ListEntries::Dense && !det;
                assert_eq!(values[1].1, u8::from(computed).to_string());
                let k = BackwardKernel::default_for(128, mask)
                    .unwrap()
                    .with_deterministic(det)
                    .with_list_entries(entries)
                    .unwrap();
                let src = k.source().unwrap();
                assert_eq!(src.contains(check), entries == ListEntries::DenseAtRunTime);
                assert_eq!(src.contains("if (1) {   // dense lists"), computed);
            }
        }
    }

    #[test]
    fn only_tile_lists_on_the_one_tile_grid_read_the_row_order() {
        use crate::attention::{AttentionKernel, Geometry, MaskMode};
        let reads = |k: &AttentionKernel| k.source().unwrap().contains("__ldg(p.row_order + row)");
        for d in [64, 128, 256] {
            for mode in [MaskMode::Window, MaskMode::Blocks, MaskMode::Documents] {
                let Ok(k) = AttentionKernel::default_for(d, mode) else {
                    continue;
                };
                assert_eq!(reads(&k), mode == MaskMode::Blocks, "d{d} {mode:?}");
                // Split-KV keeps the grid (a row's splits side by side); persistent CTAs and
                // the split tail have their own order.
                assert_eq!(reads(&k.with_split_kv(true)), mode == MaskMode::Blocks);
                if let Ok(p) = k.with_persistent(true) {
                    assert!(!reads(&p), "d{d} {mode:?} persistent");
                }
                if let Ok(t) = k.with_split_kv(true).with_tail_split(true) {
                    assert!(!reads(&t), "d{d} {mode:?} tail");
                }
            }
        }
        // The shared-K/V tile walks its pairs' table.
        let shared =
            AttentionKernel::new(Geometry::TILE_64X64_SHARED, 128, MaskMode::Blocks, 1, true)
                .unwrap();
        assert!(!reads(&shared));
    }

    #[test]
    fn the_window_walk_is_the_call_s_or_a_document_s() {
        use crate::family::template::fill;
        use row_block::RowGrid;
        let with = |grid: RowGrid| {
            let mut values = grid.values();
            values.push(("WINDOW_INFINITE", WINDOW_INFINITE.to_string()));
            fill(row_block::WINDOW, &values).unwrap()
        };
        let global = with(RowGrid::Global);
        assert!(global.contains("int m_block) {\n    fm_schedule s;"));
        assert!(global.contains("min(s.m0 + FM_BLOCK_M, p.seqlen_q)"));
        assert!(!global.contains("doc_"));
        let documents = with(RowGrid::Documents);
        assert!(documents.contains(row_block::DOCUMENTS));
        assert!(documents.contains("min(s.m0 + FM_BLOCK_M, doc_len)"));
        assert!(documents.contains("s.row0 = item.x;"));
        assert!(!documents.contains("p.seqlen_q") && !documents.contains("p.n_blocks"));
        for grid in [RowGrid::Global, RowGrid::Documents] {
            let place = grid.placement();
            assert_eq!(place.row_bound == "p.seqlen_q", grid == RowGrid::Global);
        }
    }
}
