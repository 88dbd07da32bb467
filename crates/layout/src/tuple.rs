//! Nested integer tuples (shapes, strides, coordinates) as fixed-capacity `Copy` values.
//!
//! A tuple is stored as its leaves in order plus, for each leaf, how many parentheses
//! open just before it and close just after it. `((4,8),2)` is leaves `[4,8,2]`,
//! opens `[2,0,0]`, closes `[0,1,1]`. A bare integer is one leaf with no parentheses.
//! The empty tuple is not representable; CuTe's results never need it here.

use crate::error::LayoutError;
use crate::{tri, MAX_DEPTH, MAX_LEAVES};

/// A nested tuple of integers, or a single integer, in CuTe's sense.
///
/// Capacity: [`MAX_LEAVES`] leaves, nesting depth [`MAX_DEPTH`]. Constructors return
/// [`LayoutError::Capacity`] beyond that.
///
/// ```
/// use fragmask_layout::IntTuple;
/// let t = IntTuple::parse("((4,8),2)").unwrap();
/// assert_eq!(t.rank(), 2);
/// assert_eq!(t.depth(), 2);
/// assert_eq!(t.product(), Ok(64));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntTuple {
    vals: [i64; MAX_LEAVES],
    open: [u8; MAX_LEAVES],
    close: [u8; MAX_LEAVES],
    len: u8,
}

impl IntTuple {
    /// A single integer.
    pub const fn int(value: i64) -> IntTuple {
        let mut t = IntTuple {
            vals: [0; MAX_LEAVES],
            open: [0; MAX_LEAVES],
            close: [0; MAX_LEAVES],
            len: 1,
        };
        t.vals[0] = value;
        t
    }

    /// A flat tuple `(v0, v1, ...)` of the given values. One value gives `(v0)`.
    pub const fn flat(values: &[i64]) -> Result<IntTuple, LayoutError> {
        if values.is_empty() || values.len() > MAX_LEAVES {
            return Err(LayoutError::Capacity);
        }
        let mut t = IntTuple::int(0);
        let mut i = 0;
        while i < values.len() {
            t.vals[i] = values[i];
            i += 1;
        }
        t.len = values.len() as u8;
        t.open[0] = 1;
        t.close[values.len() - 1] = 1;
        Ok(t)
    }

    /// The tuple whose top-level modes are `modes`, in order.
    ///
    /// ```
    /// use fragmask_layout::IntTuple;
    /// let t = IntTuple::tuple(&[IntTuple::int(2), IntTuple::parse("(3,4)").unwrap()]).unwrap();
    /// assert_eq!(t, IntTuple::parse("(2,(3,4))").unwrap());
    /// ```
    pub const fn tuple(modes: &[IntTuple]) -> Result<IntTuple, LayoutError> {
        if modes.is_empty() {
            return Err(LayoutError::Capacity);
        }
        let mut t = IntTuple::int(0);
        let mut n = 0usize;
        let mut m = 0;
        while m < modes.len() {
            let mode = &modes[m];
            let mut i = 0;
            while i < mode.len as usize {
                if n >= MAX_LEAVES {
                    return Err(LayoutError::Capacity);
                }
                t.vals[n] = mode.vals[i];
                t.open[n] = mode.open[i];
                t.close[n] = mode.close[i];
                n += 1;
                i += 1;
            }
            m += 1;
        }
        t.len = n as u8;
        t.open[0] += 1;
        t.close[n - 1] += 1;
        if t.depth() > MAX_DEPTH {
            return Err(LayoutError::Capacity);
        }
        Ok(t)
    }

    /// Number of leaves.
    pub const fn leaf_count(&self) -> usize {
        self.len as usize
    }

    /// Leaf `i` in left-to-right order, or `None` past the end.
    pub const fn leaf(&self, i: usize) -> Option<i64> {
        if i < self.len as usize {
            Some(self.vals[i])
        } else {
            None
        }
    }

    /// Whether this is a bare integer rather than a tuple.
    pub const fn is_int(&self) -> bool {
        self.len == 1 && self.open[0] == 0
    }

    /// Number of top-level modes; 1 for a bare integer.
    pub const fn rank(&self) -> usize {
        if self.is_int() {
            return 1;
        }
        let mut rank = 0;
        let mut depth = 0u32;
        let mut i = 0;
        while i < self.len as usize {
            if depth <= 1 {
                rank += 1;
            }
            depth += self.open[i] as u32;
            depth -= self.close[i] as u32;
            i += 1;
        }
        rank
    }

    /// Maximum nesting depth: 0 for an integer, 1 for a flat tuple.
    pub const fn depth(&self) -> usize {
        let mut max = 0;
        let mut depth = 0usize;
        let mut i = 0;
        while i < self.len as usize {
            depth += self.open[i] as usize;
            if depth > max {
                max = depth;
            }
            depth -= self.close[i] as usize;
            i += 1;
        }
        max
    }

    /// The leaf range `[start, end)` of top-level mode `mode`.
    pub const fn mode_range(&self, mode: usize) -> Result<(usize, usize), LayoutError> {
        if self.is_int() {
            return if mode == 0 {
                Ok((0, 1))
            } else {
                Err(LayoutError::Incongruent)
            };
        }
        let mut current = 0;
        let mut depth = 0u32;
        let mut start = usize::MAX;
        let mut i = 0;
        while i < self.len as usize {
            if depth <= 1 {
                if current == mode + 1 {
                    return Ok((start, i));
                }
                if current == mode {
                    start = i;
                }
                current += 1;
            }
            depth += self.open[i] as u32;
            depth -= self.close[i] as u32;
            i += 1;
        }
        if current == mode + 1 {
            Ok((start, self.len as usize))
        } else {
            Err(LayoutError::Incongruent)
        }
    }

    /// Top-level mode `mode` as a tuple of its own (`get<mode>` in CuTe).
    pub const fn mode(&self, mode: usize) -> Result<IntTuple, LayoutError> {
        let (start, end) = tri!(self.mode_range(mode));
        let mut t = self.sub(start, end);
        if !self.is_int() {
            // Drop the top-level parenthesis where this mode carries it.
            if mode == 0 {
                t.open[0] -= 1;
            }
            if end == self.len as usize {
                t.close[end - start - 1] -= 1;
            }
        }
        Ok(t)
    }

    /// Leaves `[start, end)` with their parentheses as stored.
    const fn sub(&self, start: usize, end: usize) -> IntTuple {
        let mut t = IntTuple::int(0);
        let mut i = start;
        while i < end {
            t.vals[i - start] = self.vals[i];
            t.open[i - start] = self.open[i];
            t.close[i - start] = self.close[i];
            i += 1;
        }
        t.len = (end - start) as u8;
        t
    }

    /// All leaves as a flat tuple; an integer stays an integer.
    pub const fn flatten(&self) -> IntTuple {
        if self.is_int() {
            return *self;
        }
        let mut t = *self;
        let mut i = 0;
        while i < self.len as usize {
            t.open[i] = 0;
            t.close[i] = 0;
            i += 1;
        }
        t.open[0] = 1;
        t.close[self.len as usize - 1] = 1;
        t
    }

    /// Product of all leaves.
    pub const fn product(&self) -> Result<i64, LayoutError> {
        let mut p: i64 = 1;
        let mut i = 0;
        while i < self.len as usize {
            p = match p.checked_mul(self.vals[i]) {
                Some(v) => v,
                None => return Err(LayoutError::Overflow),
            };
            i += 1;
        }
        Ok(p)
    }

    /// Whether `other` has exactly the same tree structure (CuTe's `congruent`).
    pub const fn congruent(&self, other: &IntTuple) -> bool {
        if self.len != other.len {
            return false;
        }
        let mut i = 0;
        while i < self.len as usize {
            if self.open[i] != other.open[i] || self.close[i] != other.close[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Whether the two tuples are equal (usable in `const` contexts).
    pub const fn const_eq(&self, other: &IntTuple) -> bool {
        if !self.congruent(other) {
            return false;
        }
        let mut i = 0;
        while i < self.len as usize {
            if self.vals[i] != other.vals[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    /// The same structure with the leaves replaced by `values[0..leaf_count]`.
    pub(crate) const fn with_leaves(&self, values: &[i64; MAX_LEAVES]) -> IntTuple {
        let mut t = *self;
        let mut i = 0;
        while i < self.len as usize {
            t.vals[i] = values[i];
            i += 1;
        }
        t
    }

    /// The leaves as a fixed array (entries past `leaf_count` are 0).
    pub const fn leaves(&self) -> [i64; MAX_LEAVES] {
        self.vals
    }

    /// Parses CuTe notation such as `((4,8),2)` or `16`.
    pub const fn parse(text: &str) -> Result<IntTuple, LayoutError> {
        let bytes = text.as_bytes();
        let (t, pos) = tri!(crate::notation::parse_tuple(
            bytes,
            crate::notation::skip_ws(bytes, 0)
        ));
        let pos = crate::notation::skip_ws(bytes, pos);
        if pos != bytes.len() {
            return Err(LayoutError::Parse {
                position: pos,
                expected: "end of input",
            });
        }
        Ok(t)
    }
}

impl core::fmt::Display for IntTuple {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for i in 0..self.len as usize {
            if i > 0 {
                f.write_str(",")?;
            }
            for _ in 0..self.open[i] {
                f.write_str("(")?;
            }
            write!(f, "{}", self.vals[i])?;
            for _ in 0..self.close[i] {
                f.write_str(")")?;
            }
        }
        Ok(())
    }
}
