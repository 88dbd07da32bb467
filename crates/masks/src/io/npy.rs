//! A small, total `.npy` reader (format versions 1.0–3.0; numpy's
//! `lib/format.py` describes the format) and writer.
//!
//! Own code rather than a crate: it borrows the data (a 16k × 16k bool mask is 256 MiB
//! and is not copied), reads the dtypes masks and attention inputs use, and turns every malformed
//! input into a typed error (fuzzed).

use std::string::String;
use std::vec::Vec;

use super::{ArrayView, DType};
use crate::MaskError;

pub(super) const MAGIC: &[u8] = b"\x93NUMPY";
const WHAT: &str = "npy file";

/// Parses `.npy` bytes into a view of its data.
///
/// ```
/// use fragmask_masks::io::{read_npy, write_npy, DType};
/// let bytes = write_npy(DType::Bool, &[2, 3], &[1, 0, 0, 1, 1, 1]);
/// let view = read_npy(&bytes).unwrap();
/// assert_eq!((view.dtype, view.shape.as_slice()), (DType::Bool, &[2usize, 3][..]));
/// assert_eq!(view.data, &[1, 0, 0, 1, 1, 1]);
/// ```
pub fn read_npy(bytes: &[u8]) -> Result<ArrayView<'_>, MaskError> {
    if bytes.len() < 10 {
        return Err(MaskError::Truncated {
            what: "npy preamble",
            needed: 10,
            available: bytes.len() as u64,
        });
    }
    if !bytes.starts_with(MAGIC) {
        return Err(MaskError::Corrupt {
            what: WHAT,
            detail: "missing the \\x93NUMPY magic",
        });
    }
    let (header_len, header_start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(MaskError::Truncated {
                    what: "npy preamble",
                    needed: 12,
                    available: bytes.len() as u64,
                });
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        _ => {
            return Err(MaskError::Unsupported {
                what: "npy format version",
                detail: "only versions 1.0, 2.0 and 3.0 exist",
            })
        }
    };
    let data_start = header_start + header_len;
    if bytes.len() < data_start {
        return Err(MaskError::Truncated {
            what: "npy header",
            needed: data_start as u64,
            available: bytes.len() as u64,
        });
    }
    let header =
        core::str::from_utf8(&bytes[header_start..data_start]).map_err(|_| MaskError::Corrupt {
            what: "npy header",
            detail: "not UTF-8 text",
        })?;
    let header = parse_header(header)?;
    if header.fortran_order {
        return Err(MaskError::Unsupported {
            what: "npy array order",
            detail:
                "fortran_order arrays are not read; save a C-order array (np.ascontiguousarray)",
        });
    }
    let dtype = header.dtype;
    let needed = header
        .shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| MaskError::Overflow {
            what: "npy array bytes",
            detail: std::format!("shape {:?} of {}-byte elements", header.shape, dtype.size()),
        })?;
    let data = &bytes[data_start..];
    if data.len() < needed {
        return Err(MaskError::Truncated {
            what: "npy data",
            needed: needed as u64,
            available: data.len() as u64,
        });
    }
    if data.len() > needed {
        return Err(MaskError::Corrupt {
            what: "npy data",
            detail: "bytes past the end of the array",
        });
    }
    Ok(ArrayView {
        dtype,
        shape: header.shape,
        data,
    })
}

struct Header {
    dtype: DType,
    fortran_order: bool,
    shape: Vec<usize>,
}

fn corrupt(detail: &'static str) -> MaskError {
    MaskError::Corrupt {
        what: "npy header",
        detail,
    }
}

/// Parses the header, a Python dict literal such as
/// `{'descr': '<i8', 'fortran_order': False, 'shape': (3, 4), }`.
fn parse_header(text: &str) -> Result<Header, MaskError> {
    let mut p = Cursor {
        s: text.as_bytes(),
        i: 0,
    };
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.space();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.space();
        p.expect(b':')?;
        p.space();
        match key.as_str() {
            "descr" => descr = Some(p.string()?),
            "fortran_order" => fortran = Some(p.boolean()?),
            "shape" => shape = Some(p.tuple()?),
            _ => {
                return Err(corrupt(
                    "unknown key (expected descr, fortran_order, shape)",
                ))
            }
        }
        p.space();
        if !p.eat(b',') {
            p.space();
            p.expect(b'}')?;
            break;
        }
    }
    let rest = &text.as_bytes()[p.i..];
    if !rest.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(corrupt("text after the header dict"));
    }
    let descr = descr.ok_or(corrupt("missing 'descr'"))?;
    let dtype = dtype_of_descr(&descr)?;
    Ok(Header {
        dtype,
        fortran_order: fortran.ok_or(corrupt("missing 'fortran_order'"))?,
        shape: shape.ok_or(corrupt("missing 'shape'"))?,
    })
}

/// The element type of a numpy `descr`. One-byte types carry no byte order, so numpy
/// may spell them with any of `|`, `<`, `>`, `=` (numpy itself writes `|`); wider
/// types must be little-endian, `<` (numpy writes `<` or `>` for them).
fn dtype_of_descr(descr: &str) -> Result<DType, MaskError> {
    let (order, code) = match descr.as_bytes().first() {
        Some(b'|' | b'<' | b'>' | b'=') => descr.split_at(1),
        _ => ("", descr),
    };
    let one_byte = match code {
        "b1" | "?" => Some(DType::Bool),
        "u1" | "B" => Some(DType::U8),
        "i1" | "b" => Some(DType::I8),
        _ => None,
    };
    if let Some(dtype) = one_byte {
        return Ok(dtype);
    }
    let wide = match code {
        "u2" => Some(DType::U16),
        "i2" => Some(DType::I16),
        "u4" => Some(DType::U32),
        "i4" => Some(DType::I32),
        "u8" => Some(DType::U64),
        "i8" => Some(DType::I64),
        "f2" => Some(DType::F16),
        "f4" => Some(DType::F32),
        "f8" => Some(DType::F64),
        _ => None,
    };
    match (wide, order) {
        (Some(dtype), "<") => Ok(dtype),
        (Some(_), _) => Err(MaskError::WrongDtype {
            what: "npy array",
            found: "a big-endian or unspecified-order integer or float type",
            expected: "bool, uint8, int8 or a little-endian ('<') integer or float type",
        }),
        (None, _) => Err(MaskError::WrongDtype {
            what: "npy array",
            found: "a complex, string or structured type",
            expected: "bool, uint8, int8 or a little-endian ('<') integer or float type",
        }),
    }
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn space(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), MaskError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(corrupt("malformed dict literal"))
        }
    }

    fn string(&mut self) -> Result<String, MaskError> {
        let quote = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(corrupt("expected a quoted string")),
        };
        let start = self.i + 1;
        let len = self.s[start..]
            .iter()
            .position(|&b| b == quote)
            .ok_or(corrupt("unterminated string"))?;
        self.i = start + len + 1;
        core::str::from_utf8(&self.s[start..start + len])
            .map(String::from)
            .map_err(|_| corrupt("not UTF-8 text"))
    }

    fn boolean(&mut self) -> Result<bool, MaskError> {
        for (word, value) in [(&b"True"[..], true), (&b"False"[..], false)] {
            if self.s[self.i..].starts_with(word) {
                self.i += word.len();
                return Ok(value);
            }
        }
        Err(corrupt("fortran_order must be True or False"))
    }

    fn tuple(&mut self) -> Result<Vec<usize>, MaskError> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            self.space();
            if self.eat(b')') {
                return Ok(dims);
            }
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                self.i += 1;
            }
            let digits =
                core::str::from_utf8(&self.s[start..self.i]).map_err(|_| corrupt("bad shape"))?;
            if digits.is_empty() {
                return Err(corrupt("shape entries must be non-negative integers"));
            }
            // A trailing 'L' (Python 2 longs) is accepted, as numpy does.
            self.eat(b'L');
            dims.push(digits.parse::<usize>().map_err(|_| MaskError::Overflow {
                what: "npy shape entry",
                detail: String::from(digits),
            })?);
            self.space();
            if !self.eat(b',') {
                self.space();
                self.expect(b')')?;
                return Ok(dims);
            }
        }
    }
}

/// Encodes an array as `.npy` version 1.0 bytes (C order, header padded to 64 bytes).
/// `data` must hold `shape.product() × dtype.size()` little-endian bytes (not checked:
/// a mismatch makes a file `read_npy` rejects).
pub fn write_npy(dtype: DType, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let descr = match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::U32 => "<u4",
        DType::I32 => "<i4",
        DType::U64 => "<u8",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        // numpy has no bfloat16: raw 2-byte records, as numpy writes ml_dtypes.bfloat16
        // (read_npy does not read them back; use safetensors for bf16).
        DType::BF16 => "<V2",
    };
    let dims: Vec<String> = shape.iter().map(|d| std::format!("{d}")).collect();
    let shape_text = match dims.len() {
        1 => std::format!("({},)", dims[0]),
        _ => std::format!("({})", dims.join(", ")),
    };
    let mut header =
        std::format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}
