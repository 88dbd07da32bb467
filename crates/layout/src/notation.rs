//! CuTe notation: `((4,8,4),(2,2,16)):((128,1,16),(64,8,512))`.
//!
//! Grammar: `tuple := int | '(' tuple (',' tuple)* ')'`, `layout := tuple [':' tuple]`.
//! Whitespace is allowed between tokens. A layout without a stride gets CuTe's
//! compact column-major stride (`make_layout(shape)`).

use crate::error::LayoutError;
use crate::tuple::IntTuple;
use crate::{tri, MAX_DEPTH, MAX_LEAVES};

pub(crate) const fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while pos < bytes.len() && (bytes[pos] == b' ' || bytes[pos] == b'\t' || bytes[pos] == b'\n') {
        pos += 1;
    }
    pos
}

const fn parse_int(bytes: &[u8], mut pos: usize) -> Result<(i64, usize), LayoutError> {
    let negative = pos < bytes.len() && bytes[pos] == b'-';
    if negative {
        pos += 1;
    }
    let start = pos;
    // Accumulate towards the sign so that i64::MIN parses (its magnitude is no i64).
    let sign: i64 = if negative { -1 } else { 1 };
    let mut value: i64 = 0;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        let digit = (bytes[pos] - b'0') as i64;
        value = match value.checked_mul(10) {
            Some(v) => match v.checked_add(sign * digit) {
                Some(v) => v,
                None => return Err(LayoutError::Overflow),
            },
            None => return Err(LayoutError::Overflow),
        };
        pos += 1;
    }
    if pos == start {
        return Err(LayoutError::Parse {
            position: start,
            expected: "an integer or '('",
        });
    }
    Ok((value, pos))
}

/// Parses one tuple starting at `pos` (whitespace already skipped); returns it and the
/// position after it.
pub(crate) const fn parse_tuple(
    bytes: &[u8],
    pos: usize,
) -> Result<(IntTuple, usize), LayoutError> {
    parse_level(bytes, pos, 0)
}

const fn parse_level(
    bytes: &[u8],
    pos: usize,
    level: usize,
) -> Result<(IntTuple, usize), LayoutError> {
    if pos < bytes.len() && bytes[pos] == b'(' {
        if level >= MAX_DEPTH {
            return Err(LayoutError::Capacity);
        }
        let mut modes = [IntTuple::int(0); MAX_LEAVES];
        let mut count = 0;
        let mut pos = skip_ws(bytes, pos + 1);
        loop {
            if count >= MAX_LEAVES {
                return Err(LayoutError::Capacity);
            }
            let (mode, next) = tri!(parse_level(bytes, pos, level + 1));
            modes[count] = mode;
            count += 1;
            pos = skip_ws(bytes, next);
            if pos < bytes.len() && bytes[pos] == b',' {
                pos = skip_ws(bytes, pos + 1);
            } else if pos < bytes.len() && bytes[pos] == b')' {
                pos += 1;
                break;
            } else {
                return Err(LayoutError::Parse {
                    position: pos,
                    expected: "',' or ')'",
                });
            }
        }
        let (used, _) = modes.split_at(count);
        let t = tri!(IntTuple::tuple(used));
        Ok((t, pos))
    } else {
        let (value, next) = tri!(parse_int(bytes, pos));
        Ok((IntTuple::int(value), next))
    }
}

/// Parses `shape[:stride]` starting at `pos`; returns shape, optional stride, and the
/// position after them.
pub(crate) const fn parse_layout_parts(
    bytes: &[u8],
    pos: usize,
) -> Result<(IntTuple, Option<IntTuple>, usize, usize), LayoutError> {
    let (shape, after_shape) = tri!(parse_tuple(bytes, skip_ws(bytes, pos)));
    let colon = skip_ws(bytes, after_shape);
    if colon < bytes.len() && bytes[colon] == b':' {
        let stride_pos = skip_ws(bytes, colon + 1);
        let (stride, end) = tri!(parse_tuple(bytes, stride_pos));
        Ok((shape, Some(stride), end, stride_pos))
    } else {
        Ok((shape, None, after_shape, after_shape))
    }
}
