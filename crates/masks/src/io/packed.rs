//! The packed-mask safetensors file (format version 2, reads 1; docs/masks.md).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::string::{String, ToString};
use std::vec::Vec;
use std::{format, vec};

use fragmask_gmma_frag::TiledAccumulator;

use super::checksum::{header_sum, tensor_sum, verify_checksums, TensorInfo};
use super::{
    write_atomically, ArrayView, DType, SafetensorsFile, CHECKSUM_PREFIX, HEADER_CHECKSUM,
};
use crate::encoding::EncodedLayout;
use crate::lists::{BlockLists, ListDirection};
use crate::shape::TileGrid;
use crate::transpose::{TransposedLists, TRANSPOSED_ENCODING};
use crate::{DocumentKind, Documents, Encoding, MaskError, MaskShape, PackedMask, MAX_SEQLEN};

/// `format` metadata value.
pub const FORMAT_NAME: &str = "fragmask-masks";
/// `format_version` metadata value written. Version 2 added the optional transposed
/// lists (`transposed` metadata key, `q_*` tensors); version 1 files, which have none,
/// still load. Version 2 files may also hold the optional document boundaries (the
/// `documents` metadata key, `causal` or `full`, and the `doc_starts` tensor, int32
/// `[documents + 1]`): they repeat what the lists hold, so a reader that does not know
/// them reads the same mask without them.
pub const FORMAT_VERSION: u32 = 2;

/// Format versions read.
pub const FORMAT_VERSIONS_READ: [u32; 2] = [1, 2];

/// The documents tensor's name.
const DOC_STARTS: &str = "doc_starts";

/// The transposed tensors, in file order.
const TRANSPOSED_TENSORS: [&str; 6] = [
    "q_num_blocks",
    "q_indices",
    "full_q_num_blocks",
    "full_q_indices",
    "q_tile_offsets",
    "q_words",
];

struct Tensor<'a> {
    dtype: safetensors::Dtype,
    shape: Vec<usize>,
    data: Cow<'a, [u8]>,
}

impl safetensors::View for Tensor<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The 32-bit element types written: i32 and u32.
trait Word32: Copy {
    fn bits(self) -> u32;
}
impl Word32 for i32 {
    fn bits(self) -> u32 {
        self as u32
    }
}
impl Word32 for u32 {
    fn bits(self) -> u32 {
        self
    }
}

/// The little-endian bytes of 32-bit values (borrowed on little-endian hosts).
fn le_bytes<T: Word32>(values: &[T]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        // SAFETY: T is i32 or u32 (4 bytes, no padding, every bit pattern a valid run of
        // u8s); the byte slice covers exactly the values' memory and borrows from them;
        // on a little-endian host the in-memory bytes are the little-endian encoding.
        Cow::Borrowed(unsafe {
            core::slice::from_raw_parts(
                values.as_ptr() as *const u8,
                core::mem::size_of_val(values),
            )
        })
    } else {
        Cow::Owned(
            values
                .iter()
                .flat_map(|&v| v.bits().to_le_bytes())
                .collect(),
        )
    }
}

/// The safetensors prefix of `tensors` (stored in this order): the header length
/// (u64, little-endian), then the JSON header padded with spaces to a multiple of 8
/// bytes, as the format specifies (safetensors README, "Format").
fn safetensors_header(
    tensors: &[(&str, Tensor<'_>)],
    metadata: &HashMap<String, String>,
) -> Result<Vec<u8>, MaskError> {
    let mut keys: Vec<&String> = metadata.keys().collect();
    keys.sort();
    let meta: Vec<String> = keys
        .iter()
        .map(|k| format!("{}:{}", json_string(k), json_string(&metadata[*k])))
        .collect();
    let mut header = format!("{{\"__metadata__\":{{{}}}", meta.join(","));
    let mut offset = 0usize;
    for (name, t) in tensors {
        let dtype = match t.dtype {
            safetensors::Dtype::I32 => "I32",
            safetensors::Dtype::U32 => "U32",
            _ => {
                return Err(MaskError::Unsupported {
                    what: "packed tensor dtype",
                    detail: "only I32 and U32 are written",
                })
            }
        };
        let end = offset
            .checked_add(t.data.len())
            .ok_or(MaskError::TooLarge {
                what: "packed file bytes",
                value: u64::MAX,
                limit: usize::MAX as u64,
            })?;
        let shape: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
        header.push_str(&format!(
            ",{}:{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            json_string(name),
            shape.join(",")
        ));
        offset = end;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    Ok(bytes)
}

/// `s` as a JSON string literal (RFC 8259, section 7).
fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl PackedMask {
    fn tensors<'a>(&'a self) -> Vec<(&'static str, Tensor<'a>)> {
        let s = self.grid.shape;
        let (b, h, m, n) = (s.batch, s.heads, self.grid.m_blocks, self.grid.n_blocks);
        fn i32s(values: &[i32], shape: Vec<usize>) -> Tensor<'_> {
            Tensor {
                dtype: safetensors::Dtype::I32,
                shape,
                data: le_bytes(values),
            }
        }
        let mut word_shape = vec![self.partial_tiles()];
        word_shape.extend_from_slice(self.encoding().word_shape(self.accumulator()).dims());
        let lists = |lists: &'a BlockLists, rows: usize, row_len: usize| {
            let names = lists.direction().names();
            let counts = vec![b, h, rows];
            let entries = vec![b, h, rows, row_len];
            let dims = [&counts, &entries, &counts, &entries, &entries];
            names
                .into_iter()
                .zip(lists.parts())
                .zip(dims)
                .map(|((name, list), dims)| (name, i32s(list, dims.clone())))
                .collect::<Vec<_>>()
        };
        let mut tensors = lists(&self.lists, m, n);
        tensors.push((
            "words",
            Tensor {
                dtype: safetensors::Dtype::U32,
                shape: word_shape,
                data: le_bytes(&self.words),
            },
        ));
        if let Some(t) = &self.transposed {
            let mut q_word_shape = vec![t.partial_tiles()];
            q_word_shape.extend_from_slice(TRANSPOSED_ENCODING.word_shape(t.accumulator()).dims());
            tensors.extend(lists(&t.lists, n, m));
            tensors.push((
                "q_words",
                Tensor {
                    dtype: safetensors::Dtype::U32,
                    shape: q_word_shape,
                    data: le_bytes(&t.words),
                },
            ));
        }
        if let Some(d) = &self.documents {
            tensors.push((
                DOC_STARTS,
                Tensor {
                    dtype: safetensors::Dtype::I32,
                    shape: vec![d.starts().len()],
                    data: le_bytes(d.starts()),
                },
            ));
        }
        tensors
    }

    /// The file's `__metadata__`: the description of the mask and the SHA-256 of every
    /// tensor and of the header (`sha256.*` keys; module `checksum`).
    pub fn metadata(&self) -> HashMap<String, String> {
        let mut metadata = self.description();
        let tensors = self.tensors();
        let mut infos: Vec<TensorInfo<'_>> = tensors
            .iter()
            .map(|(name, t)| TensorInfo {
                name,
                dtype: t.dtype,
                shape: &t.shape,
            })
            .collect();
        let header = header_sum(&metadata, &mut infos);
        for (name, t) in &tensors {
            metadata.insert(format!("{CHECKSUM_PREFIX}{name}"), tensor_sum(&t.data));
        }
        metadata.insert(format!("{CHECKSUM_PREFIX}{HEADER_CHECKSUM}"), header);
        metadata
    }

    /// The metadata that describes the mask (without checksums).
    fn description(&self) -> HashMap<String, String> {
        let acc = self.accumulator();
        let s = self.grid.shape;
        [
            ("format", FORMAT_NAME.to_string()),
            ("format_version", FORMAT_VERSION.to_string()),
            ("block_m", acc.block_m().to_string()),
            ("block_n", acc.block_n().to_string()),
            ("warpgroups", acc.warpgroups().to_string()),
            ("swap_ab", acc.swap_ab().to_string()),
            ("encoding", self.encoding().name().to_string()),
            ("seqlen_q", s.seqlen_q.to_string()),
            ("seqlen_k", s.seqlen_k.to_string()),
            ("batch", s.batch.to_string()),
            ("heads", s.heads.to_string()),
            ("transposed", self.transposed.is_some().to_string()),
        ]
        .into_iter()
        .chain(self.transposed.iter().flat_map(|t| {
            let bwd = t.accumulator();
            [
                ("transposed_warpgroups", bwd.warpgroups().to_string()),
                ("transposed_swap_ab", bwd.swap_ab().to_string()),
                (
                    "transposed_encoding",
                    TRANSPOSED_ENCODING.name().to_string(),
                ),
            ]
        }))
        .chain(
            self.documents
                .iter()
                .map(|d| ("documents", d.kind().name().to_string())),
        )
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The packed mask as safetensors bytes.
    pub fn to_safetensors(&self) -> Result<Vec<u8>, MaskError> {
        safetensors::serialize(self.tensors(), Some(self.metadata()))
            .map_err(|e| MaskError::Safetensors(e.to_string()))
    }

    /// Writes the packed mask to `path` as safetensors, through
    /// [`write_atomically`](super::write_atomically) (no partial file on failure, no
    /// temporary left on SIGINT / SIGTERM). Streams the tensors: no copy of the words.
    pub fn write_safetensors(&self, path: &Path) -> Result<(), MaskError> {
        let io = |e: std::io::Error| MaskError::Io {
            action: "writing",
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let tensors = self.tensors();
        let header = safetensors_header(&tensors, &self.metadata())?;
        write_atomically(path, |tmp| {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(tmp)
                .map_err(io)?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
            w.write_all(&header).map_err(io)?;
            for (_, t) in &tensors {
                w.write_all(&t.data).map_err(io)?;
            }
            w.flush().map_err(io)
        })
    }

    /// Reads and fully validates a packed-mask file: its checksums where it has them
    /// ([`verify_checksums`](super::verify_checksums)), metadata, tensor dtypes and shapes,
    /// and the lists (counts in range, indices ascending and in range, partial and full
    /// disjoint, every partial tile referenced exactly once).
    pub fn from_safetensors(bytes: &[u8]) -> Result<PackedMask, MaskError> {
        Self::from_safetensors_checked(bytes).map(|(mask, _)| mask)
    }

    /// [`Self::from_safetensors`], also saying whether the file had checksums.
    pub(crate) fn from_safetensors_checked(
        bytes: &[u8],
    ) -> Result<(PackedMask, super::Checksums), MaskError> {
        let file = SafetensorsFile::parse(bytes)?;
        // Before anything is read from the tensors: a mismatch names the tensor.
        let checksums = verify_checksums(&file)?;
        let meta = file.metadata();
        let get = |key: &'static str| -> Result<&str, MaskError> {
            meta.get(key)
                .map(String::as_str)
                .ok_or_else(|| MaskError::Missing {
                    what: "metadata key",
                    name: key.to_string(),
                })
        };
        let number = |key: &'static str| -> Result<usize, MaskError> {
            let text = get(key)?;
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(MaskError::Corrupt {
                    what: "packed mask metadata",
                    detail: "a numeric key (block_m, block_n, warpgroups, seqlen_q, seqlen_k, \
                             batch, heads, format_version, transposed_warpgroups) is not a \
                             non-negative integer",
                });
            }
            text.parse::<usize>().map_err(|_| MaskError::Overflow {
                what: key,
                detail: text.chars().take(40).collect(),
            })
        };
        if get("format")? != FORMAT_NAME {
            return Err(MaskError::Corrupt {
                what: "packed mask metadata",
                detail: "format is not fragmask-masks",
            });
        }
        let version = number("format_version")?;
        if !FORMAT_VERSIONS_READ.iter().any(|&v| v as usize == version) {
            return Err(MaskError::Unsupported {
                what: "packed mask format_version",
                detail: "this reader reads versions 1 and 2",
            });
        }
        let small = |key: &'static str| -> Result<u32, MaskError> {
            let value = number(key)?;
            u32::try_from(value).map_err(|_| MaskError::TooLarge {
                what: key,
                value: value as u64,
                limit: u32::MAX as u64,
            })
        };
        let flag = |key: &'static str, detail: &'static str| -> Result<bool, MaskError> {
            match get(key)? {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(MaskError::Corrupt {
                    what: "packed mask metadata",
                    detail,
                }),
            }
        };
        let swap_ab = flag("swap_ab", "swap_ab must be true or false")?;
        // Version 1 has no transposed lists; version 2 says whether it has them.
        let transposed = version >= 2 && flag("transposed", "transposed must be true or false")?;
        let names = file.names();
        if !transposed
            && names
                .iter()
                .any(|n| TRANSPOSED_TENSORS.contains(&n.as_str()))
        {
            return Err(MaskError::Corrupt {
                what: "packed mask metadata",
                detail: "the file holds transposed tensors (q_*) but its metadata does not \
                         say transposed = true (format version 2)",
            });
        }
        let acc = TiledAccumulator::new(
            small("block_m")?,
            small("block_n")?,
            small("warpgroups")?,
            swap_ab,
        )?;
        let encoding = Encoding::from_name(get("encoding")?).ok_or(MaskError::Corrupt {
            what: "packed mask metadata",
            detail: "encoding must be fragment-native, quad-lane or row-major",
        })?;
        let (seqlen_q, seqlen_k) = (number("seqlen_q")?, number("seqlen_k")?);

        let lists = |name: &'static str, rank: usize| -> Result<ArrayView<'_>, MaskError> {
            let view = file.tensor(name)?;
            if view.dtype != DType::I32 {
                return Err(MaskError::WrongDtype {
                    what: name,
                    found: view.dtype.name(),
                    expected: "int32",
                });
            }
            if view.shape.len() != rank {
                return Err(MaskError::BadRank {
                    what: name,
                    rank: view.shape.len(),
                    expected: if rank == 3 {
                        "3 ([B, H, m_blocks])"
                    } else {
                        "4 ([B, H, m_blocks, n_blocks])"
                    },
                });
            }
            Ok(view)
        };
        for (what, value) in [("seqlen_q", seqlen_q), ("seqlen_k", seqlen_k)] {
            if value as u64 > MAX_SEQLEN {
                return Err(MaskError::TooLarge {
                    what,
                    value: value as u64,
                    limit: MAX_SEQLEN,
                });
            }
        }
        let num = lists("kv_num_blocks", 3)?;
        let (batch, heads) = (num.shape[0], num.shape[1]);
        // The metadata repeats B and H; both must agree with the tensors.
        for (key, what, found) in [
            (
                "batch",
                "packed mask metadata batch (kv_num_blocks dimension 0)",
                batch,
            ),
            (
                "heads",
                "packed mask metadata heads (kv_num_blocks dimension 1)",
                heads,
            ),
        ] {
            let stated = number(key)?;
            if stated != found {
                return Err(MaskError::ShapeMismatch {
                    what,
                    expected: found as u64,
                    found: stated as u64,
                });
            }
        }
        let shape = MaskShape::new(batch, heads, seqlen_q, seqlen_k)?;
        let grid = TileGrid::new(shape, &acc);
        // One direction's five lists, `[B, H, row blocks]` counts and `[B, H, row
        // blocks, listed blocks]` entries.
        let read = |direction: ListDirection| -> Result<BlockLists, MaskError> {
            let (row_blocks, listed) = direction.blocks(&grid);
            let counts = [batch, heads, row_blocks];
            let entries = [batch, heads, row_blocks, listed];
            let dims: [&[usize]; 5] = [&counts, &entries, &counts, &entries, &entries];
            let mut out: [Vec<i32>; 5] = Default::default();
            for ((slot, name), dims) in out.iter_mut().zip(direction.names()).zip(dims) {
                let view = lists(name, dims.len())?;
                for (i, (&found, &expected)) in view.shape.iter().zip(dims).enumerate() {
                    if found != expected {
                        return Err(MaskError::ShapeMismatch {
                            what: match (direction, i) {
                                (_, 0) => "tile list batch dimension",
                                (_, 1) => "tile list heads dimension",
                                (ListDirection::Forward, 2) => {
                                    "tile list m_blocks dimension (ceil(seqlen_q / block_m))"
                                }
                                (ListDirection::Forward, _) => {
                                    "tile list n_blocks dimension (ceil(seqlen_k / block_n))"
                                }
                                (ListDirection::Transposed, 2) => {
                                    "transposed tile list n_blocks dimension (ceil(seqlen_k / \
                                     block_n))"
                                }
                                (ListDirection::Transposed, _) => {
                                    "transposed tile list m_blocks dimension (ceil(seqlen_q / \
                                     block_m))"
                                }
                            },
                            expected: expected as u64,
                            found: found as u64,
                        });
                    }
                }
                *slot = view
                    .data
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
            }
            // The views' shapes were checked: their element counts fit in memory.
            let rows = batch.saturating_mul(heads).saturating_mul(row_blocks);
            BlockLists::new(direction, rows, listed, out)
        };
        let forward = read(ListDirection::Forward)?;

        let words_view = file.tensor("words")?;
        if words_view.dtype != DType::U32 {
            return Err(MaskError::WrongDtype {
                what: "words",
                found: words_view.dtype.name(),
                expected: "uint32",
            });
        }
        let word_shape = encoding.word_shape(&acc);
        if words_view.shape.len() != 1 + word_shape.dims().len() {
            return Err(MaskError::BadRank {
                what: "words",
                rank: words_view.shape.len(),
                expected: match word_shape.dims().len() {
                    2 => "3 ([P, threads, words_per_thread] or [P, block_m, words_per_row])",
                    _ => "4 ([P, mma_rows, 4, words_per_quad])",
                },
            });
        }
        for (i, (&found, &expected)) in words_view.shape[1..]
            .iter()
            .zip(word_shape.dims())
            .enumerate()
        {
            if found != expected {
                return Err(MaskError::ShapeMismatch {
                    what: match i {
                        0 => "words dimension 1 (the encoding's word shape, outermost)",
                        1 => "words dimension 2 (the encoding's word shape)",
                        _ => "words dimension 3 (the encoding's word shape)",
                    },
                    expected: expected as u64,
                    found: found as u64,
                });
            }
        }
        let words: Vec<u32> = words_view
            .data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let mut packed = PackedMask::from_parts(&acc, encoding, shape, forward, words)?;
        if transposed {
            let backward = TiledAccumulator::new(
                acc.block_m(),
                acc.block_n(),
                small("transposed_warpgroups")?,
                flag(
                    "transposed_swap_ab",
                    "transposed_swap_ab must be true or false",
                )?,
            )?;
            if Encoding::from_name(get("transposed_encoding")?) != Some(TRANSPOSED_ENCODING) {
                return Err(MaskError::Unsupported {
                    what: "packed mask transposed_encoding",
                    detail: "transposed words are fragment-native",
                });
            }
            let q_layout = EncodedLayout::derive(&backward, TRANSPOSED_ENCODING)?;
            let words = read_words(
                &file,
                "q_words",
                TRANSPOSED_ENCODING.word_shape(&backward).dims(),
                packed.partial_tiles(),
            )?;
            let lists = TransposedLists {
                layout: q_layout,
                grid,
                lists: read(ListDirection::Transposed)?,
                words,
            };
            lists.validate(&packed)?;
            packed.transposed = Some(lists);
        }
        // The optional document boundaries (version 2), checked against the mask.
        let kind = match meta.get("documents") {
            Some(name) if version >= 2 => {
                Some(DocumentKind::from_name(name).ok_or(MaskError::Corrupt {
                    what: "packed mask metadata",
                    detail: "documents must be causal or full",
                })?)
            }
            Some(_) => {
                return Err(MaskError::Corrupt {
                    what: "packed mask metadata",
                    detail: "the documents key needs format version 2",
                })
            }
            None => None,
        };
        match kind {
            Some(kind) => packed.attach_documents(read_doc_starts(&file, kind)?)?,
            None if names.iter().any(|n| n == DOC_STARTS) => {
                return Err(MaskError::Corrupt {
                    what: "packed mask metadata",
                    detail: "the file holds doc_starts but its metadata names no documents \
                             kind (causal or full)",
                })
            }
            None => {}
        }
        Ok((packed, checksums))
    }

    /// A packed mask from lists and words another packer produced (the GPU packer,
    /// say), validated as a file's are ([`Self::from_safetensors`]): `lists` forward
    /// ([`ListDirection::Forward`], `[B, H, m_blocks]` and `[B, H, m_blocks,
    /// n_blocks]` row-major, [`BlockLists::validate`]); `words` the partial tiles'
    /// words in tile order, a whole number of tiles.
    pub fn from_parts(
        acc: &TiledAccumulator,
        encoding: Encoding,
        shape: MaskShape,
        lists: BlockLists,
        words: Vec<u32>,
    ) -> Result<PackedMask, MaskError> {
        let grid = TileGrid::new(shape, acc);
        let layout = EncodedLayout::derive(acc, encoding)?;
        let overflow = |what: &'static str| MaskError::Overflow {
            what,
            detail: format!("{shape:?}"),
        };
        let rows = shape
            .batch
            .checked_mul(shape.heads)
            .and_then(|n| n.checked_mul(grid.m_blocks))
            .ok_or_else(|| overflow("tile list rows (B * H * m_blocks)"))?;
        rows.checked_mul(grid.n_blocks)
            .ok_or_else(|| overflow("tiles (B * H * m_blocks * n_blocks)"))?;
        if lists.direction() != ListDirection::Forward {
            return Err(MaskError::Unsupported {
                what: "packed mask lists",
                detail: "a packed mask's own lists are the forward lists (kv_*)",
            });
        }
        // Rechecks the lengths against this shape.
        let lists = BlockLists::new(
            ListDirection::Forward,
            rows,
            grid.n_blocks,
            lists.into_parts(),
        )?;
        let per_tile = layout.words_per_tile();
        if per_tile == 0 || !words.len().is_multiple_of(per_tile) {
            return Err(MaskError::Corrupt {
                what: "packed mask words",
                detail: "not a whole number of tiles",
            });
        }
        lists.validate(&grid, words.len() / per_tile)?;
        validate_words(&grid, &layout, &lists, &words)?;
        Ok(PackedMask {
            layout,
            grid,
            lists,
            words,
            transposed: None,
            documents: None,
        })
    }

    /// The mask of `shape` for `acc` and `encoding` with no partial and no full tile: the
    /// geometry alone, which is what a host holds of a mask packed on a GPU and left there
    /// (docs/masks.md, "Dense lists checked at run time").
    pub fn geometry_only(
        acc: &TiledAccumulator,
        encoding: Encoding,
        shape: MaskShape,
    ) -> Result<PackedMask, MaskError> {
        let grid = TileGrid::new(shape, acc);
        let rows = shape
            .batch
            .checked_mul(shape.heads)
            .and_then(|n| n.checked_mul(grid.m_blocks))
            .ok_or_else(|| MaskError::Overflow {
                what: "tile list rows (B * H * m_blocks)",
                detail: format!("{shape:?}"),
            })?;
        let lists = BlockLists::empty(ListDirection::Forward, rows, grid.n_blocks)?;
        Self::from_parts(acc, encoding, shape, lists, Vec::new())
    }
}

/// The `doc_starts` tensor: int32 `[documents + 1]`, checked by [`Documents::new`].
fn read_doc_starts(file: &SafetensorsFile<'_>, kind: DocumentKind) -> Result<Documents, MaskError> {
    let view = file.tensor(DOC_STARTS)?;
    if view.dtype != DType::I32 {
        return Err(MaskError::WrongDtype {
            what: DOC_STARTS,
            found: view.dtype.name(),
            expected: "int32",
        });
    }
    if view.shape.len() != 1 {
        return Err(MaskError::BadRank {
            what: DOC_STARTS,
            rank: view.shape.len(),
            expected: "1 ([documents + 1])",
        });
    }
    let starts = view
        .data
        .chunks_exact(4)
        .map(|c| {
            u32::try_from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])).map_err(|_| {
                MaskError::Corrupt {
                    what: "document starts",
                    detail: "a start is negative",
                }
            })
        })
        .collect::<Result<Vec<u32>, MaskError>>()?;
    Documents::new(kind, starts)
}

/// The transposed words tensor `name`: uint32 `[tiles, ...word_dims]`, with `tiles`
/// the forward's partial tiles.
fn read_words(
    file: &SafetensorsFile<'_>,
    name: &'static str,
    word_dims: &[usize],
    tiles: usize,
) -> Result<Vec<u32>, MaskError> {
    let view = file.tensor(name)?;
    if view.dtype != DType::U32 {
        return Err(MaskError::WrongDtype {
            what: name,
            found: view.dtype.name(),
            expected: "uint32",
        });
    }
    if view.shape.len() != 1 + word_dims.len() {
        return Err(MaskError::BadRank {
            what: name,
            rank: view.shape.len(),
            expected: "3 ([P, threads, words_per_thread] of the backward accumulator)",
        });
    }
    let expected = core::iter::once(tiles).chain(word_dims.iter().copied());
    for (i, (found, expected)) in view.shape.iter().copied().zip(expected).enumerate() {
        if found != expected {
            return Err(MaskError::ShapeMismatch {
                what: match i {
                    0 => "q_words dimension 0 (the partial tiles, as in words)",
                    1 => "q_words dimension 1 (threads of the backward accumulator)",
                    _ => "q_words dimension 2 (words per thread of the backward accumulator)",
                },
                expected: expected as u64,
                found: found as u64,
            });
        }
    }
    Ok(view
        .data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Every partial tile's words: no bit set outside the tile's elements inside the mask
/// (an edge tile's outside elements are 0, and so are bits no element maps to), and at
/// least one bit set (an all-zero tile is empty, not partial).
fn validate_words(
    grid: &TileGrid,
    layout: &EncodedLayout,
    lists: &BlockLists,
    words: &[u32],
) -> Result<(), MaskError> {
    let [num, indices, _, _, offsets] = lists.parts();
    let per_tile = layout.words_per_tile();
    // The words of the elements inside a tile of `rows x cols`: at most 4 shapes.
    let mut valid: Vec<((usize, usize), Vec<u32>)> = Vec::new();
    for (row, &count) in num.iter().enumerate() {
        let m_block = row % grid.m_blocks;
        let base = row * grid.n_blocks;
        for j in 0..count as usize {
            let n_block = indices[base + j] as usize;
            let tile = offsets[base + j] as usize;
            let dims = (grid.rows_in(m_block), grid.cols_in(n_block));
            let mask = match valid.iter().position(|(d, _)| *d == dims) {
                Some(i) => &valid[i].1,
                None => {
                    let mut mask = vec![0u32; per_tile];
                    for r in 0..dims.0 {
                        for c in 0..dims.1 {
                            let p = layout.position(r, c);
                            mask[p / 32] |= 1 << (p % 32);
                        }
                    }
                    valid.push((dims, mask));
                    &valid[valid.len() - 1].1
                }
            };
            let tile_words = &words[tile * per_tile..(tile + 1) * per_tile];
            if tile_words.iter().zip(mask).any(|(w, m)| w & !m != 0) {
                return Err(MaskError::Corrupt {
                    what: "packed mask words",
                    detail: "a partial tile has bits set outside the mask (seqlen_q / \
                             seqlen_k in the metadata disagree with the words)",
                });
            }
            if tile_words.iter().all(|&w| w == 0) {
                return Err(MaskError::Corrupt {
                    what: "packed mask words",
                    detail: "a partial tile has no bit set (it would be an empty tile)",
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{pack, DenseMask, PackOptions};

    #[test]
    fn streamed_file_reads_back_as_the_same_mask_for_every_encoding() {
        let acc = TiledAccumulator::new(64, 32, 1, false).unwrap();
        // 2 heads, 100 x 70: edge tiles, and every class of tile.
        let data: Vec<u8> = (0..2 * 100 * 70)
            .map(|i: usize| u8::from(i % 7 < 3 || (i / 70) % 100 < 20))
            .collect();
        let dense = DenseMask::new(&data, &[2, 100, 70]).unwrap();
        let dir = std::env::temp_dir().join(format!("fragmask-packed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for encoding in Encoding::ALL {
            let packed = pack(&dense, &acc, encoding, &PackOptions::default()).unwrap();
            let path = dir.join("m.safetensors");
            packed.write_safetensors(&path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(PackedMask::from_safetensors(&bytes).unwrap(), packed);
            let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap());
            assert_eq!(header_len % 8, 0, "data starts 8-byte aligned");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(json_string("a\"b\\c\n\u{1}é"), r#""a\"b\\c\u000a\u0001é""#);
    }
}
