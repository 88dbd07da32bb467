//! `fragmask._fragmask`, the extension module of the `fragmask` Python package.
//!
//! Thin glue over the workspace crates: the Python side (`python/fragmask`) validates
//! arguments, converts arrays and builds numpy arrays; this module packs, loads, saves
//! and evaluates. Every error is the library's typed message, raised as `ValueError`
//! (`fragmask.FileError`, an `OSError` and a `ValueError`, for files; `MemoryError`
//! when memory for the output cannot be had). Nothing here prints.
//!
//! Host arrays arrive as Python buffers (the buffer protocol: numpy arrays,
//! `bytes`, `memoryview`), never as addresses: [`host_array`] copies a C-contiguous
//! buffer of the expected element type, so no Python integer is ever dereferenced.
//! The functions that take device addresses (the GPU launches) are not attributes of
//! this module: [`claim_device_api`] hands them to the `fragmask` package once, at its
//! import (docs in `device_api`).

use std::path::PathBuf;

mod backward;
mod decode;
mod device_api;
mod gpu;
mod merge;
mod plan;
mod transpose;

use fragmask::calc::{self, Value};
use fragmask_layout::IntTuple;
use fragmask_masks::io::read_packed_file;
use fragmask_masks::{
    pack, parse_predicate, BlockSparseMask, BlockSparseOptions, DenseMask, DocumentIds, Encoding,
    MaskError, MaskShape, MaskSource, PackOptions, PackedMask, Predicate, PredicateMask,
    TiledAccumulator, TopKMask, TransposedLists, MAX_SEQLEN, MAX_THREADS,
};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyMemoryError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyDict, PyTuple, PyType};

/// `fragmask.FileError`: a file could not be read or written (subclass of both
/// `OSError` and `ValueError`).
static FILE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn file_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    FILE_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(
                py,
                [py.get_type::<PyOSError>(), py.get_type::<PyValueError>()],
            )?;
            let namespace = PyDict::new(py);
            namespace.set_item("__module__", "fragmask")?;
            namespace.set_item(
                "__doc__",
                "A file fragmask could not read or write (an OSError and a ValueError).",
            )?;
            let class =
                py.import("builtins")?
                    .getattr("type")?
                    .call1(("FileError", bases, namespace))?;
            Ok::<_, PyErr>(class.cast_into::<PyType>()?.unbind())
        })
        .map(|t| t.bind(py))
}

/// A library error as the Python exception its kind calls for, `context` (the argument
/// or file it concerns) first.
fn raise(context: &str, error: MaskError) -> PyErr {
    let message = if context.is_empty() {
        error.to_string()
    } else {
        format!("{context}: {error}")
    };
    match error {
        MaskError::OutOfMemory { .. } => PyMemoryError::new_err(message),
        MaskError::Io { .. } | MaskError::OutputRefused { .. } => {
            Python::attach(|py| match file_error_type(py) {
                Ok(t) => PyErr::from_type(t.clone(), message),
                Err(e) => e,
            })
        }
        _ => PyValueError::new_err(message),
    }
}

fn value_error(message: String) -> PyErr {
    PyValueError::new_err(message)
}

/// The values and dimensions of a host array passed as a buffer (a C- or
/// Fortran-contiguous buffer whose element format is `T`'s; copied, so the caller may
/// not change it under a packer running with the GIL released). `what` names the
/// argument in errors.
fn host_array<T: pyo3::buffer::Element + Copy>(
    py: Python<'_>,
    object: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<(Vec<T>, Vec<usize>)> {
    let buffer = PyBuffer::<T>::get(object).map_err(|e| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{what}: expected a buffer of {} (a numpy array), got {}: {}",
            std::any::type_name::<T>(),
            type_name(object),
            e.value(py)
        ))
    })?;
    if !buffer.is_c_contiguous() {
        return Err(value_error(format!(
            "{what}: the buffer must be C-contiguous (numpy.ascontiguousarray)"
        )));
    }
    let values = buffer
        .to_vec(py)
        .map_err(|e| value_error(format!("{what}: {e}")))?;
    Ok((values, buffer.shape().to_vec()))
}

/// The name of `object`'s type for error messages ("?" when it has none).
fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `(batch, heads, seqlen_q)` of CSR top-k lists, each optional.
type CsrShapeArgs<'py> = (
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
);

/// A host array argument (any object with the buffer protocol; see [`host_array`]).
type RawArray<'py> = Bound<'py, PyAny>;

/// A count argument: a Python int (not a bool, str or float) in `lo..=hi`; errors name
/// `what`.
pub(crate) fn int_arg(value: &Bound<'_, PyAny>, what: &str, lo: u64, hi: u64) -> PyResult<u64> {
    use pyo3::types::{PyBool, PyInt};
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            type_name(value)
        )));
    }
    match value.extract::<i128>() {
        Ok(v) if v < lo as i128 => Err(value_error(format!("{what}={v} must be at least {lo}"))),
        Ok(v) if v > hi as i128 => Err(value_error(format!(
            "{what}={v} is too large: the limit is {hi}"
        ))),
        Ok(v) => Ok(v as u64),
        Err(_) => Err(value_error(format!(
            "{what}={value} is out of range {lo}..={hi}"
        ))),
    }
}

fn threads_arg(threads: &Bound<'_, PyAny>) -> PyResult<usize> {
    Ok(int_arg(threads, "threads", 0, MAX_THREADS as u64)? as usize)
}

fn seqlen_arg(value: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    Ok(int_arg(value, what, 1, MAX_SEQLEN)? as usize)
}

fn optional_count(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<usize>> {
    value
        .map(|v| int_arg(v, what, 1, i64::MAX as u64).map(|n| n as usize))
        .transpose()
}

/// [`tile`] of Python arguments, each checked and named in errors.
fn tile_args(
    block_m: &Bound<'_, PyAny>,
    block_n: &Bound<'_, PyAny>,
    warpgroups: &Bound<'_, PyAny>,
    swap_ab: bool,
    encoding: &str,
    threads: &Bound<'_, PyAny>,
) -> PyResult<Tile> {
    let u32_arg = |v, what| int_arg(v, what, 1, u32::MAX as u64).map(|n| n as u32);
    tile(
        u32_arg(block_m, "block_m")?,
        u32_arg(block_n, "block_n")?,
        u32_arg(warpgroups, "warpgroups")?,
        swap_ab,
        encoding,
        threads_arg(threads)?,
    )
}

/// Tile configuration of every constructor.
#[derive(Clone, Copy)]
struct Tile {
    acc: TiledAccumulator,
    encoding: Encoding,
    threads: usize,
}

fn tile(
    block_m: u32,
    block_n: u32,
    warpgroups: u32,
    swap_ab: bool,
    encoding: &str,
    threads: usize,
) -> PyResult<Tile> {
    let acc = TiledAccumulator::new(block_m, block_n, warpgroups, swap_ab).map_err(|e| {
        raise(
            &format!("block=({block_m}, {block_n}), warpgroups={warpgroups}, swap_ab={swap_ab}"),
            MaskError::from(e),
        )
    })?;
    let encoding = Encoding::from_name(encoding).ok_or_else(|| {
        let names: Vec<&str> = Encoding::ALL.iter().map(|e| e.name()).collect();
        value_error(format!(
            "encoding '{encoding}' is not one of {}",
            names.join(", ")
        ))
    })?;
    if threads > MAX_THREADS {
        return Err(value_error(format!(
            "threads={threads} is too large: the limit is {MAX_THREADS}"
        )));
    }
    Ok(Tile {
        acc,
        encoding,
        threads,
    })
}

/// Packs `source` with the GIL released (the packer runs on its own worker threads).
fn pack_source<S: MaskSource + Sync>(
    py: Python<'_>,
    source: &S,
    tile: Tile,
    context: &str,
) -> PyResult<Packed> {
    let options = PackOptions {
        threads: tile.threads,
        progress: None,
    };
    py.detach(|| pack(source, &tile.acc, tile.encoding, &options))
        .map(Packed::new)
        .map_err(|e| raise(context, e))
}

/// A packed mask (`fragmask_masks::PackedMask`); `fragmask.Mask` wraps it.
#[pyclass(frozen, module = "fragmask._fragmask", name = "Packed")]
pub(crate) struct Packed {
    inner: std::sync::Arc<PackedMask>,
    /// Its key in the registry the GPU ops look masks up in (`gpu::mask`).
    id: u64,
}

impl Packed {
    pub(crate) fn new(inner: PackedMask) -> Packed {
        let inner = std::sync::Arc::new(inner);
        let id = gpu::register(&inner);
        Packed { inner, id }
    }
}

impl Drop for Packed {
    fn drop(&mut self) {
        gpu::unregister(self.id);
    }
}

/// The mask tile `(block_m, block_n, warpgroups)` of the attention kernel a call with
/// `head_dim` runs when its caller names no tile (`AttentionKernel::default_geometry`:
/// 192x128 over three warpgroups at head dim 64, 128x128 at 128, 128x80 at 256): what the
/// mask constructors' `head_dim=` packs at.
#[pyfunction]
fn head_dim_tile(head_dim: &Bound<'_, PyAny>) -> PyResult<(u32, u32, u32)> {
    let d = int_arg(head_dim, "head_dim", 1, u32::MAX as u64)? as u32;
    if !matches!(d, 64 | 128 | 256) {
        return Err(PyValueError::new_err(format!(
            "head_dim {d} is not supported (64, 128 or 256)"
        )));
    }
    let g = fragmask_kernels::attention::AttentionKernel::default_geometry(d).mask_geometry();
    Ok((g.block_m(), g.block_n(), g.consumer_warpgroups()))
}

/// Packs a dense `[Sq, Sk]`, `[H, Sq, Sk]` or `[B, H, Sq, Sk]` byte mask (nonzero =
/// keep).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn pack_dense(
    py: Python<'_>,
    mask: RawArray<'_>,
    block_m: &Bound<'_, PyAny>,
    block_n: &Bound<'_, PyAny>,
    warpgroups: &Bound<'_, PyAny>,
    swap_ab: bool,
    encoding: &str,
    threads: &Bound<'_, PyAny>,
) -> PyResult<Packed> {
    let tile = tile_args(block_m, block_n, warpgroups, swap_ab, encoding, threads)?;
    let (data, dims) = host_array::<u8>(py, &mask, "mask")?;
    let dense = DenseMask::new(&data, &dims).map_err(|e| raise("mask", e))?;
    pack_source(py, &dense, tile, "mask")
}

/// Packs fixed-k top-k lists `[.., Sq, k]` (-1 = padding), or CSR lists when
/// `offsets` is given (`csr_shape` = B, H, Sq, each possibly unknown).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn pack_topk(
    py: Python<'_>,
    indices: RawArray<'_>,
    seqlen_k: &Bound<'_, PyAny>,
    offsets: Option<RawArray<'_>>,
    csr_shape: CsrShapeArgs<'_>,
    block_m: &Bound<'_, PyAny>,
    block_n: &Bound<'_, PyAny>,
    warpgroups: &Bound<'_, PyAny>,
    swap_ab: bool,
    encoding: &str,
    threads: &Bound<'_, PyAny>,
) -> PyResult<Packed> {
    let tile = tile_args(block_m, block_n, warpgroups, swap_ab, encoding, threads)?;
    let seqlen_k = seqlen_arg(seqlen_k, "seqlen_k")?;
    let csr_shape = (
        optional_count(csr_shape.0.as_ref(), "batch")?,
        optional_count(csr_shape.1.as_ref(), "heads")?,
        optional_count(csr_shape.2.as_ref(), "seqlen_q")?,
    );
    let (values, index_dims) = host_array::<i64>(py, &indices, "indices")?;
    let topk = match offsets {
        None => TopKMask::from_fixed_k_dims(&index_dims, seqlen_k, &values)
            .map_err(|e| raise("indices", e))?,
        Some(offsets) => {
            let (offsets, offset_dims) = host_array::<i64>(py, &offsets, "offsets")?;
            for (what, dims) in [("indices", &index_dims), ("offsets", &offset_dims)] {
                rank1(dims, what).map_err(|e| raise(what, e))?;
            }
            let rows = offsets
                .len()
                .checked_sub(1)
                .ok_or_else(|| value_error("offsets: CSR offsets are empty".into()))?;
            let shape = csr_shape_of(rows, seqlen_k, csr_shape)?;
            TopKMask::from_csr(shape, &offsets, &values).map_err(|e| raise("indices", e))?
        }
    };
    pack_source(py, &topk, tile, "indices")
}

/// The shape of `rows` CSR rows: B defaults to 1, H to rows / (B·Sq) when Sq is given
/// and else 1, Sq to rows / (B·H) (the rules of `fragmask pack --topk-offsets`).
fn csr_shape_of(
    rows: usize,
    seqlen_k: usize,
    (batch, heads, seqlen_q): (Option<usize>, Option<usize>, Option<usize>),
) -> PyResult<MaskShape> {
    let batch = batch.unwrap_or(1);
    let heads = match (heads, seqlen_q) {
        (Some(h), _) => h,
        (None, Some(q)) => batch
            .checked_mul(q)
            .and_then(|d| rows.checked_div(d))
            .unwrap_or(0),
        (None, None) => 1,
    };
    let seqlen_q = seqlen_q.unwrap_or_else(|| {
        batch
            .checked_mul(heads)
            .and_then(|d| rows.checked_div(d))
            .unwrap_or(0)
    });
    let leading = batch
        .checked_mul(heads)
        .and_then(|n| n.checked_mul(seqlen_q));
    if leading != Some(rows) {
        return Err(value_error(format!(
            "offsets: shape mismatch: the CSR offsets describe {rows} rows, but B x H x Sq = \
             {batch} x {heads} x {seqlen_q} (set batch=, heads=, seqlen_q=)"
        )));
    }
    MaskShape::new(batch, heads, seqlen_q, seqlen_k).map_err(|e| raise("indices", e))
}

fn rank1(dims: &[usize], what: &'static str) -> Result<(), MaskError> {
    if dims.len() != 1 {
        return Err(MaskError::BadRank {
            what,
            rank: dims.len(),
            expected: "1",
        });
    }
    Ok(())
}

/// Packs write-up 002's block lists.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn pack_blocks(
    py: Python<'_>,
    index: RawArray<'_>,
    num: RawArray<'_>,
    sizes: Option<RawArray<'_>>,
    block_size: &Bound<'_, PyAny>,
    seqlen_q: Option<Bound<'_, PyAny>>,
    seqlen_k: Option<Bound<'_, PyAny>>,
    block_m: &Bound<'_, PyAny>,
    block_n: &Bound<'_, PyAny>,
    warpgroups: &Bound<'_, PyAny>,
    swap_ab: bool,
    encoding: &str,
    threads: &Bound<'_, PyAny>,
) -> PyResult<Packed> {
    let tile = tile_args(block_m, block_n, warpgroups, swap_ab, encoding, threads)?;
    let block_size = int_arg(block_size, "block_size", 1, MAX_SEQLEN)? as usize;
    let seqlen_q = match &seqlen_q {
        Some(v) => Some(seqlen_arg(v, "seqlen_q")?),
        None => None,
    };
    let seqlen_k = match &seqlen_k {
        Some(v) => Some(seqlen_arg(v, "seqlen_k")?),
        None => None,
    };
    let (index_values, index_dims) = host_array::<i64>(py, &index, "index")?;
    let (num_values, num_dims) = host_array::<i64>(py, &num, "num")?;
    let size_values = match &sizes {
        Some(s) => {
            let (values, dims) = host_array::<i64>(py, s, "sizes")?;
            rank1(&dims, "variable_block_sizes").map_err(|e| raise("sizes", e))?;
            Some(values)
        }
        None => None,
    };
    let options = BlockSparseOptions {
        block_size,
        seqlen_q,
        seqlen_k,
    };
    let blocks = BlockSparseMask::new(
        &index_dims,
        &index_values,
        &num_dims,
        &num_values,
        size_values.as_deref(),
        options,
    )
    .map_err(|e| raise("blocks", e))?;
    pack_source(py, &blocks, tile, "blocks")
}

/// Document ids `[S]` or `[B, S]` (one list for queries and keys).
fn document_ids(
    ids: &(Vec<i64>, Vec<usize>),
    seqlen_q: usize,
    seqlen_k: usize,
) -> Result<DocumentIds, MaskError> {
    DocumentIds::from_array(
        &ids.1,
        &ids.0,
        [
            ("document ids length (must equal seqlen_q)", seqlen_q),
            ("document ids length (must equal seqlen_k)", seqlen_k),
        ],
    )
}

/// Packs a predicate (the language of `fragmask pack --predicate`). `doc=NAME` atoms
/// resolve through `named` and else to `default`; when `default` is given and the text
/// names no document, the mask is `predicate & same-document(default)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn pack_predicate(
    py: Python<'_>,
    text: &str,
    seqlen_q: &Bound<'_, PyAny>,
    seqlen_k: &Bound<'_, PyAny>,
    named: Vec<(String, RawArray<'_>)>,
    default: Option<RawArray<'_>>,
    block_m: &Bound<'_, PyAny>,
    block_n: &Bound<'_, PyAny>,
    warpgroups: &Bound<'_, PyAny>,
    swap_ab: bool,
    encoding: &str,
    threads: &Bound<'_, PyAny>,
) -> PyResult<Packed> {
    let tile = tile_args(block_m, block_n, warpgroups, swap_ab, encoding, threads)?;
    let seqlen_q = seqlen_arg(seqlen_q, "seqlen_q")?;
    let seqlen_k = seqlen_arg(seqlen_k, "seqlen_k")?;
    let named = named
        .iter()
        .map(|(n, b)| {
            Ok((
                n.clone(),
                host_array::<i64>(py, b, &format!("doc_ids[{n:?}]"))?,
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let default = match &default {
        Some(b) => Some(host_array::<i64>(py, b, "doc_ids")?),
        None => None,
    };
    let mut used_default = false;
    let mut resolve = |name: &str| -> Result<DocumentIds, MaskError> {
        if let Some((_, ids)) = named.iter().find(|(n, _)| n == name) {
            return document_ids(ids, seqlen_q, seqlen_k);
        }
        match &default {
            Some(ids) => {
                used_default = true;
                document_ids(ids, seqlen_q, seqlen_k)
            }
            None => Err(MaskError::Missing {
                what: "document ids (pass doc_ids=)",
                name: name.to_string(),
            }),
        }
    };
    let mut predicate = parse_predicate(text, &mut resolve).map_err(|e| raise("predicate", e))?;
    if let (Some(ids), false) = (&default, used_default) {
        let docs = document_ids(ids, seqlen_q, seqlen_k).map_err(|e| raise("doc_ids", e))?;
        predicate = predicate & Predicate::Document(docs);
    }
    let mask =
        PredicateMask::new(seqlen_q, seqlen_k, predicate).map_err(|e| raise("predicate", e))?;
    pack_source(py, &mask, tile, "predicate")
}

/// Reads and validates a packed-mask file, header first (errors name the file):
/// a FIFO, a device or a huge file whose header does not describe its length is
/// refused before its body is read.
#[pyfunction]
fn load(py: Python<'_>, path: PathBuf) -> PyResult<Packed> {
    let file = py.detach(|| read_packed_file(&path)).map_err(|e| match e {
        // An I/O error names the file already.
        MaskError::Io { .. } => raise("", e),
        e => raise(&path.display().to_string(), e),
    })?;
    Ok(Packed::new(file.mask))
}

/// One of the lists, as (native-endian bytes, dims).
fn list_bytes<'py, T: Copy>(
    py: Python<'py>,
    values: &[T],
    dims: Vec<usize>,
) -> (Bound<'py, PyByteArray>, Vec<usize>) {
    // SAFETY: `values` is a live slice of plain integers (i32 / u32 / u8), whose
    // bytes are all initialized; the byte slice covers exactly its memory.
    let bytes = unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    };
    (PyByteArray::new(py, bytes), dims)
}

#[pymethods]
impl Packed {
    /// (B, H, Sq, Sk); B and H are 1 where the mask broadcasts.
    #[getter]
    fn shape(&self) -> (usize, usize, usize, usize) {
        let s = self.inner.shape();
        (s.batch, s.heads, s.seqlen_q, s.seqlen_k)
    }

    /// (block_m, block_n, warpgroups, swap_ab).
    #[getter]
    fn tile(&self) -> (u32, u32, u32, bool) {
        let a = self.inner.accumulator();
        (a.block_m(), a.block_n(), a.warpgroups(), a.swap_ab())
    }

    /// The encoding's name.
    #[getter]
    fn encoding(&self) -> &'static str {
        self.inner.encoding().name()
    }

    /// Tile counts, ones and bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let b = self.inner.bytes();
        let d = PyDict::new(py);
        d.set_item("tiles", s.tiles)?;
        d.set_item("empty", s.empty)?;
        d.set_item("full", s.full)?;
        d.set_item("partial", s.partial)?;
        d.set_item("ones", s.ones)?;
        d.set_item("elements", s.elements)?;
        d.set_item("density", s.density())?;
        d.set_item("list_bytes", b.lists)?;
        d.set_item("word_bytes", b.words)?;
        d.set_item("dense_bool_bytes", b.dense_bool)?;
        d.set_item("bit_packed_bytes", b.bit_packed)?;
        Ok(d)
    }

    /// A one-warpgroup 64x64 mask: the K/V blocks its forward's shared-K/V query-block
    /// pairs load over the one-block tile's (`choice::SHARED_KV_MAX_LOAD_RATIO`,
    /// docs/architecture.md); None for other tiles. Builds the pairs (up to ~30 ms).
    fn shared_kv_load_ratio(&self) -> PyResult<Option<f64>> {
        fragmask_host::attention::shared_kv::table_of_64_token_mask(&self.inner)
            .map(|t| t.map(|t| t.load_ratio()))
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The file's metadata.
    fn metadata(&self) -> std::collections::HashMap<String, String> {
        self.inner.metadata()
    }

    /// List `part` (0 to 4: counts, indices, full counts, full indices, tile offsets;
    /// `BlockLists::parts`' order) of the forward tile lists, or with `transposed` of
    /// the backward's transposed lists: (bytes, dims), int32 `[B, H, row blocks]`
    /// counts and `[B, H, row blocks, listed blocks]` entries. A mask without
    /// transposed lists raises ValueError naming the commands that add them.
    fn block_list<'py>(
        &self,
        py: Python<'py>,
        transposed: bool,
        part: usize,
    ) -> PyResult<(Bound<'py, PyByteArray>, Vec<usize>)> {
        let lists = if transposed {
            self.inner
                .transposed()
                .map_err(|e| raise("transposed lists", e))?
                .lists()
        } else {
            self.inner.lists()
        };
        let s = self.inner.shape();
        let (row_blocks, listed) = lists.direction().blocks(self.inner.grid());
        let Some(list) = lists.parts().get(part).copied() else {
            return Err(value_error(format!("no tile list {part} (0 to 4)")));
        };
        let dims = match part {
            0 | 2 => vec![s.batch, s.heads, row_blocks],
            _ => vec![s.batch, s.heads, row_blocks, listed],
        };
        Ok(list_bytes(py, list, dims))
    }

    /// A list by name: (bytes, dims); uint32 words and bit positions.
    fn list<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<(Bound<'py, PyByteArray>, Vec<usize>)> {
        let p = &self.inner;
        let g = p.grid();
        Ok(match name {
            "words" => {
                let mut dims = vec![p.partial_tiles()];
                dims.extend_from_slice(p.encoding().word_shape(p.accumulator()).dims());
                list_bytes(py, p.words(), dims)
            }
            "positions" => {
                let dims = vec![g.block_m, g.block_n];
                list_bytes(py, p.layout().positions(), dims)
            }
            _ => return Err(value_error(format!("no list named '{name}'"))),
        })
    }

    /// This mask with the backward pass's transposed lists and words added (format v2,
    /// as `fragmask pack --transposed`): the backward accumulator has the mask's tile,
    /// SwapAB unless `swap_ab` is false, and `warpgroups` (None: the library's default,
    /// `TransposedLists::default_accumulator`).
    #[pyo3(signature = (warpgroups=None, swap_ab=true, threads=None))]
    fn with_transposed(
        &self,
        py: Python<'_>,
        warpgroups: Option<&Bound<'_, PyAny>>,
        swap_ab: bool,
        threads: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Packed> {
        let warpgroups = warpgroups
            .map(|w| int_arg(w, "warpgroups", 1, u32::MAX as u64).map(|n| n as u32))
            .transpose()?;
        let threads = match threads {
            Some(t) => threads_arg(t)?,
            None => 0,
        };
        let acc = *self.inner.accumulator();
        let warpgroups = match warpgroups {
            Some(w) => w,
            None if swap_ab => TransposedLists::default_accumulator(&acc)
                .map(|a| a.warpgroups())
                .unwrap_or(1),
            None => acc.warpgroups(),
        };
        let backward = TiledAccumulator::new(acc.block_m(), acc.block_n(), warpgroups, swap_ab)
            .map_err(|e| raise("with_transposed", MaskError::from(e)))?;
        let mut packed = (*self.inner).clone();
        let options = PackOptions {
            threads,
            ..PackOptions::default()
        };
        py.detach(|| packed.add_transposed(&backward, &options))
            .map_err(|e| raise("with_transposed", e))?;
        Ok(Packed::new(packed))
    }

    /// Whether the transposed lists are present.
    #[getter]
    fn has_transposed(&self) -> bool {
        self.inner.transposed().is_ok()
    }

    /// The transposed words (`q_words`): (bytes, dims), uint32 `[P, words per tile]`.
    /// A mask without them raises ValueError naming the commands that add them.
    fn transposed_words<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyByteArray>, Vec<usize>)> {
        let t = self
            .inner
            .transposed()
            .map_err(|e| raise("transposed lists", e))?;
        let words = t.words();
        let per_tile = t.layout().words_per_tile().max(1);
        Ok(list_bytes(
            py,
            words,
            vec![words.len() / per_tile, per_tile],
        ))
    }

    /// Words per partial tile.
    #[getter]
    fn words_per_tile(&self) -> usize {
        self.inner.layout().words_per_tile()
    }

    /// The mask decoded: B·H·Sq·Sk bytes (0 / 1), row-major.
    fn to_dense<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyByteArray>> {
        let s = self.inner.shape();
        let total = [s.heads, s.seqlen_q, s.seqlen_k]
            .iter()
            .try_fold(s.batch, |n, &d| n.checked_mul(d))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| {
                raise(
                    "to_dense",
                    MaskError::TooLarge {
                        what: "dense mask elements (B*H*Sq*Sk)",
                        value: s.elements(),
                        limit: isize::MAX as u64,
                    },
                )
            })?;
        let mut out: Vec<u8> = Vec::new();
        out.try_reserve_exact(total).map_err(|_| {
            raise(
                "to_dense",
                MaskError::OutOfMemory {
                    what: "the dense mask",
                    bytes: total as u64,
                },
            )
        })?;
        py.detach(|| {
            for b in 0..s.batch {
                for h in 0..s.heads {
                    out.extend(self.inner.decode_plane(b, h).into_iter().map(u8::from));
                }
            }
        });
        Ok(PyByteArray::new(py, &out))
    }

    /// The safetensors bytes of the file `save` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyByteArray>> {
        let bytes = self.inner.to_safetensors().map_err(|e| raise("", e))?;
        Ok(PyByteArray::new(py, &bytes))
    }

    /// Writes the file through the library's atomic writer (a temporary beside it and
    /// a rename; never over a directory, device or FIFO).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.write_safetensors(&path))
            .map_err(|e| raise("", e))
    }

    /// The largest-first dispatch order of this mask's lists, as (bytes of int32, dims), or
    /// None where it is the kernels' own order (docs/architecture.md, "Row order of the
    /// tile lists"; docs/backward.md, "Dispatch order"): `transposed` false, the forward's
    /// row blocks (`fragmask_masks::row_order`; None when every plane runs from its last
    /// row); true, the transposed lists' key tiles (`fragmask_masks::tile_order`; None when
    /// it is the index order, or the mask has no transposed lists). Uploaded beside the
    /// lists, a plan made under CUDA-graph capture runs it without uploading anything.
    fn dispatch_order<'py>(
        &self,
        py: Python<'py>,
        transposed: bool,
    ) -> Option<(Bound<'py, PyByteArray>, Vec<usize>)> {
        let p = &self.inner;
        let (order, len) = if transposed {
            let t = p.transposed().ok()?;
            let order = t.tile_order();
            (!t.is_grid_tile_order(&order)).then_some((order, p.grid().n_blocks))?
        } else {
            let order = p.row_order();
            (!p.is_grid_row_order(&order)).then_some((order, p.grid().m_blocks))?
        };
        let dims = vec![order.len() / len.max(1), len];
        Some(list_bytes(py, &order, dims))
    }

    /// The key the GPU ops find this mask by (an argument of `fragmask::attention`).
    #[getter]
    fn registry_id(&self) -> u64 {
        self.id
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Packed>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }
}

/// Parses safetensors bytes (as `load`, from memory).
#[pyfunction]
fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Packed> {
    py.detach(|| PackedMask::from_safetensors(data))
        .map(Packed::new)
        .map_err(|e| raise("bytes", e))
}

/// An IntTuple as nested tuples of ints (a bare integer as an int).
fn tuple_object(py: Python<'_>, tuple: &IntTuple) -> PyResult<Py<PyAny>> {
    if tuple.is_int() {
        return Ok(tuple
            .leaf(0)
            .unwrap_or(0)
            .into_pyobject(py)?
            .into_any()
            .unbind());
    }
    let modes = (0..tuple.rank())
        .map(|m| {
            let mode = tuple
                .mode(m)
                .map_err(|e| value_error(format!("layout: {e}")))?;
            tuple_object(py, &mode)
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, modes)?.into_any().unbind())
}

/// Evaluates a layout-calculator expression: (text, value, shape, stride, notes), where
/// value is the int of an integer result (shape and stride None) or None.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn layout(
    py: Python<'_>,
    expr: &str,
) -> PyResult<(String, Option<i64>, Py<PyAny>, Py<PyAny>, Vec<String>)> {
    let (value, notes) =
        calc::evaluate_with_notes(expr).map_err(|e| value_error(e.render(expr)))?;
    Ok(match value {
        Value::Int(n) => (value.to_string(), Some(n), py.None(), py.None(), notes),
        Value::Layout(l) => (
            value.to_string(),
            None,
            tuple_object(py, &l.shape())?,
            tuple_object(py, &l.stride())?,
            notes,
        ),
    })
}

/// The extension module.
#[pymodule]
fn _fragmask(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_SEQLEN", MAX_SEQLEN)?;
    m.add("MAX_THREADS", MAX_THREADS)?;
    m.add("FileError", file_error_type(m.py())?)?;
    m.add_class::<Packed>()?;
    m.add_function(wrap_pyfunction!(head_dim_tile, m)?)?;
    m.add_function(wrap_pyfunction!(pack_dense, m)?)?;
    m.add_function(wrap_pyfunction!(pack_topk, m)?)?;
    m.add_function(wrap_pyfunction!(pack_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(pack_predicate, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(layout, m)?)?;
    m.add_class::<gpu::GpuPack>()?;
    m.add_class::<transpose::GpuTranspose>()?;
    m.add_class::<plan::AttentionPlanHandle>()?;
    m.add_class::<plan::DecodePlanHandle>()?;
    m.add_class::<backward::BackwardPlanHandle>()?;
    m.add_function(wrap_pyfunction!(backward::backward_tile_refusal, m)?)?;
    m.add_class::<gpu::LightningPlanHandle>()?;
    m.add_function(wrap_pyfunction!(device_api::claim_device_api, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::warmup, m)?)?;
    m.add_function(wrap_pyfunction!(decode::decode_plan, m)?)?;
    m.add_function(wrap_pyfunction!(decode::decode_mask_prepare, m)?)?;
    m.add_function(wrap_pyfunction!(decode::decode_mask_release, m)?)?;
    Ok(())
}
