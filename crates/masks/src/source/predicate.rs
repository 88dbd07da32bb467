//! Predicate masks: causal, sliding window, prefix-LM, document ids, and their
//! and / or / not combinations.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;

use super::{IndexValue, MaskSource, Region};
use crate::shape::broadcast_index;
use crate::{bits, DocumentKind, Documents, MaskError, MaskShape};

/// Where the diagonal of a causal or windowed mask sits when `seqlen_q != seqlen_k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Alignment {
    /// Query `q` sits at key `q` (FlexAttention's `q_idx >= kv_idx`).
    TopLeft,
    /// Query `q` sits at key `q + seqlen_k - seqlen_q`: the last query sees the last
    /// key (FlashAttention-3's convention when `seqlen_q != seqlen_k`).
    #[default]
    BottomRight,
}

/// Document (segment) ids: query `q` and key `k` of batch `b` may attend iff
/// `q_ids[b][q] == k_ids[b][k]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentIds {
    batch: usize,
    q_ids: Vec<i64>,
    k_ids: Vec<i64>,
    /// Every batch's ids are non-decreasing on both sides (packed documents), which
    /// makes rows intervals and tiles classifiable without reading.
    sorted: bool,
}

impl DocumentIds {
    /// The same ids for queries and keys (self-attention), one batch.
    pub fn new<I: IndexValue>(ids: &[I]) -> DocumentIds {
        let ids: Vec<i64> = ids.iter().map(|i| i.to_i64()).collect();
        DocumentIds::build(1, ids.clone(), ids)
    }

    /// Per-batch ids: `q_ids` is `[batch, seqlen_q]`, `k_ids` is `[batch, seqlen_k]`
    /// (flattened); the lengths are checked against the mask in [`PredicateMask::new`].
    pub fn with_batch<I: IndexValue, J: IndexValue>(
        batch: usize,
        q_ids: &[I],
        k_ids: &[J],
    ) -> Result<DocumentIds, MaskError> {
        if batch == 0 {
            return Err(MaskError::EmptyDimension {
                what: "document ids batch",
            });
        }
        for (what, len) in [
            ("document q ids", q_ids.len()),
            ("document k ids", k_ids.len()),
        ] {
            if len % batch != 0 {
                return Err(MaskError::ShapeMismatch {
                    what,
                    expected: (len / batch * batch) as u64,
                    found: len as u64,
                });
            }
        }
        Ok(DocumentIds::build(
            batch,
            q_ids.iter().map(|i| i.to_i64()).collect(),
            k_ids.iter().map(|i| i.to_i64()).collect(),
        ))
    }

    /// One id list of shape `[S]` or `[B, S]` serving queries and keys (self-attention
    /// over packed documents), so `S` must equal both sequence lengths: `lengths` holds
    /// `(what, seqlen)` for queries and keys, `what` naming the length as the caller's
    /// user knows it (a flag or an argument). The shared reader of `fragmask pack
    /// --predicate doc=FILE` and the Python package.
    pub fn from_array<I: IndexValue>(
        shape: &[usize],
        ids: &[I],
        lengths: [(&'static str, usize); 2],
    ) -> Result<DocumentIds, MaskError> {
        let (batch, len) = match shape {
            [len] => (None, *len),
            [batch, len] => (Some(*batch), *len),
            _ => {
                return Err(MaskError::BadRank {
                    what: "document ids",
                    rank: shape.len(),
                    expected: "1 ([S]) or 2 ([B, S])",
                })
            }
        };
        for (what, seqlen) in lengths {
            if len != seqlen {
                return Err(MaskError::ShapeMismatch {
                    what,
                    expected: seqlen as u64,
                    found: len as u64,
                });
            }
        }
        match batch {
            None => Ok(DocumentIds::new(ids)),
            Some(batch) => DocumentIds::with_batch(batch, ids, ids),
        }
    }

    fn build(batch: usize, q_ids: Vec<i64>, k_ids: Vec<i64>) -> DocumentIds {
        let sorted_per_batch = |ids: &[i64]| {
            let len = ids.len() / batch;
            len == 0 || ids.chunks(len).all(|c| c.windows(2).all(|w| w[0] <= w[1]))
        };
        let sorted = sorted_per_batch(&q_ids) && sorted_per_batch(&k_ids);
        DocumentIds {
            batch,
            q_ids,
            k_ids,
            sorted,
        }
    }

    fn q_row(&self, batch: usize, seqlen_q: usize) -> &[i64] {
        let b = broadcast_index(batch, self.batch);
        &self.q_ids[b * seqlen_q..(b + 1) * seqlen_q]
    }

    fn k_row(&self, batch: usize, seqlen_k: usize) -> &[i64] {
        let b = broadcast_index(batch, self.batch);
        &self.k_ids[b * seqlen_k..(b + 1) * seqlen_k]
    }
}

/// A mask predicate on `(q, k)` (and the batch, through document ids).
///
/// Build with the constructors and combine with `&`, `|` and `!`:
///
/// ```
/// use fragmask_masks::{Predicate, PredicateMask, MaskSource};
/// let p = Predicate::causal() & !Predicate::window(Some(2), Some(0));
/// let m = PredicateMask::new(8, 8, p).unwrap();
/// assert!(m.get(0, 0, 7, 4) && !m.get(0, 0, 7, 5) && !m.get(0, 0, 3, 4));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Predicate {
    /// Every element.
    All,
    /// No element.
    Nothing,
    /// `k <= q + offset` (offset 0 top-left, `Sk - Sq` bottom-right).
    Causal(Alignment),
    /// `q + offset - left <= k <= q + offset + right`; `None` = unbounded side
    /// (FlashAttention's `window_size = (left, right)` with -1 for unbounded).
    Window {
        /// Keys before the diagonal.
        left: Option<usize>,
        /// Keys after the diagonal.
        right: Option<usize>,
        /// Diagonal alignment.
        align: Alignment,
    },
    /// Prefix-LM: `k < prefix || k <= q + offset`.
    PrefixLm {
        /// Keys every query sees.
        prefix: usize,
        /// Diagonal alignment of the causal part.
        align: Alignment,
    },
    /// Same document.
    Document(DocumentIds),
    /// Every one of them (n-ary and flat: `a & b & c` is one node, so a long chain
    /// does not nest).
    And(Vec<Predicate>),
    /// Any of them (n-ary and flat, as [`Predicate::And`]).
    Or(Vec<Predicate>),
    /// Not (`!!p` is `p`: negations never nest directly).
    Not(Box<Predicate>),
}

impl Predicate {
    /// Bottom-right causal (FlashAttention-3's convention).
    pub fn causal() -> Predicate {
        Predicate::Causal(Alignment::BottomRight)
    }

    /// Bottom-right sliding window `(left, right)`.
    pub fn window(left: Option<usize>, right: Option<usize>) -> Predicate {
        Predicate::Window {
            left,
            right,
            align: Alignment::BottomRight,
        }
    }

    /// Prefix-LM with a bottom-right causal part.
    pub fn prefix_lm(prefix: usize) -> Predicate {
        Predicate::PrefixLm {
            prefix,
            align: Alignment::BottomRight,
        }
    }

    /// The half-open key interval `[lo, hi)` row `q` keeps, for the interval leaves.
    /// Both ends are non-decreasing in `q`, which makes tile classification exact.
    fn interval(&self, q: usize, shape: &MaskShape) -> Option<(i64, i64)> {
        const NEG: i64 = i64::MIN / 4;
        const POS: i64 = i64::MAX / 4;
        let offset = |align: &Alignment| match align {
            Alignment::TopLeft => 0,
            Alignment::BottomRight => shape.seqlen_k as i64 - shape.seqlen_q as i64,
        };
        let q = q as i64;
        Some(match self {
            Predicate::All => (NEG, POS),
            Predicate::Nothing => (0, 0),
            Predicate::Causal(align) => (NEG, q + offset(align) + 1),
            Predicate::Window { left, right, align } => {
                let d = q + offset(align);
                (
                    left.map_or(NEG, |l| d - l.min(POS as usize) as i64),
                    right.map_or(POS, |r| d + r.min(POS as usize) as i64 + 1),
                )
            }
            Predicate::PrefixLm { prefix, align } => (
                NEG,
                (q + offset(align) + 1).max((*prefix).min(POS as usize) as i64),
            ),
            _ => return None,
        })
    }

    /// Overwrites `out[..ceil(cols/64)]` with row `q`'s bits of keys `k0..k0+cols`.
    fn write_row(
        &self,
        batch: usize,
        q: usize,
        k0: usize,
        cols: usize,
        shape: &MaskShape,
        out: &mut [u64],
    ) {
        let words = cols.div_ceil(64);
        if let Some((lo, hi)) = self.interval(q, shape) {
            out[..words].fill(0);
            let lo = lo.clamp(k0 as i64, (k0 + cols) as i64) as usize;
            let hi = hi.clamp(k0 as i64, (k0 + cols) as i64) as usize;
            bits::set_range(out, lo - k0, hi.max(lo) - k0);
            return;
        }
        match self {
            Predicate::Document(docs) => {
                out[..words].fill(0);
                let doc = docs.q_row(batch, shape.seqlen_q)[q];
                let keys = docs.k_row(batch, shape.seqlen_k);
                if docs.sorted {
                    let lo = keys.partition_point(|&d| d < doc).max(k0);
                    let hi = keys.partition_point(|&d| d <= doc).min(k0 + cols);
                    if lo < hi {
                        bits::set_range(out, lo - k0, hi - k0);
                    }
                } else {
                    for (i, &d) in keys[k0..k0 + cols].iter().enumerate() {
                        out[i / 64] |= ((d == doc) as u64) << (i % 64);
                    }
                }
            }
            Predicate::And(parts) | Predicate::Or(parts) => {
                let and = matches!(self, Predicate::And(..));
                let Some((first, rest)) = parts.split_first() else {
                    // An empty and is every element, an empty or none.
                    out[..words].fill(0);
                    if and {
                        bits::set_range(out, 0, cols);
                    }
                    return;
                };
                first.write_row(batch, q, k0, cols, shape, out);
                for b in rest {
                    let mut start = 0;
                    while start < cols {
                        let len = (cols - start).min(CHUNK_COLS);
                        let mut tmp = [0u64; CHUNK_COLS / 64];
                        b.write_row(batch, q, k0 + start, len, shape, &mut tmp);
                        let dst = &mut out[start / 64..start / 64 + len.div_ceil(64)];
                        for (d, t) in dst.iter_mut().zip(&tmp) {
                            if and {
                                *d &= t;
                            } else {
                                *d |= t;
                            }
                        }
                        start += len;
                    }
                }
            }
            Predicate::Not(a) => {
                a.write_row(batch, q, k0, cols, shape, out);
                for w in &mut out[..words] {
                    *w = !*w;
                }
                if !cols.is_multiple_of(64) {
                    out[words - 1] &= (1u64 << (cols % 64)) - 1;
                }
            }
            _ => unreachable!("interval leaves return above"),
        }
    }

    fn region(
        &self,
        batch: usize,
        rows: &Range<usize>,
        cols: &Range<usize>,
        shape: &MaskShape,
    ) -> Region {
        if let (Some((lo_first, hi_first)), Some((lo_last, hi_last))) = (
            self.interval(rows.start, shape),
            self.interval(rows.end - 1, shape),
        ) {
            let (k0, k1) = (cols.start as i64, cols.end as i64);
            return if hi_last <= k0 || lo_first >= k1 || hi_first <= lo_first && hi_last <= lo_last
            {
                Region::Empty
            } else if lo_last <= k0 && hi_first >= k1 {
                Region::Full
            } else {
                Region::Unknown
            };
        }
        match self {
            Predicate::Document(docs) if docs.sorted => {
                let qd = docs.q_row(batch, shape.seqlen_q);
                let kd = docs.k_row(batch, shape.seqlen_k);
                let (qa, qb) = (qd[rows.start], qd[rows.end - 1]);
                let (ka, kb) = (kd[cols.start], kd[cols.end - 1]);
                if qa == qb && ka == kb && qa == ka {
                    Region::Full
                } else if qb < ka || kb < qa {
                    Region::Empty
                } else {
                    Region::Unknown
                }
            }
            Predicate::And(parts) => {
                let mut all_full = true;
                for part in parts {
                    match part.region(batch, rows, cols, shape) {
                        Region::Empty => return Region::Empty,
                        Region::Full => {}
                        Region::Unknown => all_full = false,
                    }
                }
                if all_full {
                    Region::Full
                } else {
                    Region::Unknown
                }
            }
            Predicate::Or(parts) => {
                let mut all_empty = true;
                for part in parts {
                    match part.region(batch, rows, cols, shape) {
                        Region::Full => return Region::Full,
                        Region::Empty => {}
                        Region::Unknown => all_empty = false,
                    }
                }
                if all_empty {
                    Region::Empty
                } else {
                    Region::Unknown
                }
            }
            Predicate::Not(a) => match a.region(batch, rows, cols, shape) {
                Region::Empty => Region::Full,
                Region::Full => Region::Empty,
                Region::Unknown => Region::Unknown,
            },
            _ => Region::Unknown,
        }
    }

    /// Batch extent the predicate needs (1 unless per-batch document ids), checking
    /// document id lengths against the sequence lengths.
    fn batch(&self, seqlen_q: usize, seqlen_k: usize) -> Result<usize, MaskError> {
        match self {
            Predicate::Document(d) => {
                for (what, len, seqlen) in [
                    ("document q ids (batch*seqlen_q)", d.q_ids.len(), seqlen_q),
                    ("document k ids (batch*seqlen_k)", d.k_ids.len(), seqlen_k),
                ] {
                    if len != d.batch * seqlen {
                        return Err(MaskError::ShapeMismatch {
                            what,
                            expected: (d.batch * seqlen) as u64,
                            found: len as u64,
                        });
                    }
                }
                Ok(d.batch)
            }
            Predicate::And(parts) | Predicate::Or(parts) => {
                let mut x = 1;
                for part in parts {
                    let y = part.batch(seqlen_q, seqlen_k)?;
                    if x == 1 {
                        x = y;
                    } else if y != 1 && y != x {
                        return Err(MaskError::ShapeMismatch {
                            what: "document ids batch (broadcast)",
                            expected: x as u64,
                            found: y as u64,
                        });
                    }
                }
                Ok(x)
            }
            Predicate::Not(a) => a.batch(seqlen_q, seqlen_k),
            _ => Ok(1),
        }
    }
}

const CHUNK_COLS: usize = 1024;

impl core::ops::BitAnd for Predicate {
    type Output = Predicate;
    /// Flat: an and of ands is one and.
    fn bitand(self, rhs: Predicate) -> Predicate {
        let mut parts = match self {
            Predicate::And(parts) => parts,
            other => alloc::vec![other],
        };
        match rhs {
            Predicate::And(more) => parts.extend(more),
            other => parts.push(other),
        }
        Predicate::And(parts)
    }
}

impl core::ops::BitOr for Predicate {
    type Output = Predicate;
    /// Flat: an or of ors is one or.
    fn bitor(self, rhs: Predicate) -> Predicate {
        let mut parts = match self {
            Predicate::Or(parts) => parts,
            other => alloc::vec![other],
        };
        match rhs {
            Predicate::Or(more) => parts.extend(more),
            other => parts.push(other),
        }
        Predicate::Or(parts)
    }
}

impl core::ops::Not for Predicate {
    type Output = Predicate;
    /// `!!p` is `p`.
    fn not(self) -> Predicate {
        match self {
            Predicate::Not(inner) => *inner,
            other => Predicate::Not(Box::new(other)),
        }
    }
}

/// Deepest predicate tree [`PredicateMask::new`] accepts (and / or / not nodes on
/// the way from the root to a leaf, the root counting 1): the evaluator recurses once
/// per level, so this bounds its stack. The parser's limit on parentheses
/// ([`MAX_PREDICATE_NESTING`]) keeps every parsed predicate within it.
pub const MAX_PREDICATE_DEPTH: usize = 256;

/// Deepest nesting of parentheses [`parse_predicate`] accepts.
pub const MAX_PREDICATE_NESTING: usize = 64;

impl Predicate {
    /// Levels of the tree (a leaf is 1), computed without recursion.
    pub fn depth(&self) -> usize {
        let mut deepest = 0;
        let mut stack: Vec<(&Predicate, usize)> = alloc::vec![(self, 1)];
        while let Some((node, level)) = stack.pop() {
            deepest = deepest.max(level);
            match node {
                Predicate::And(parts) | Predicate::Or(parts) => {
                    stack.extend(parts.iter().map(|p| (p, level + 1)));
                }
                Predicate::Not(inner) => stack.push((inner, level + 1)),
                _ => {}
            }
        }
        deepest
    }
}

/// A [`Predicate`] over a `seqlen_q × seqlen_k` mask (batch from document ids,
/// heads 1). Classifies interval predicates (causal, window, prefix-LM, sorted
/// documents) without reading bits, so packing costs O(tiles + partial tiles × tile).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PredicateMask {
    shape: MaskShape,
    predicate: Predicate,
}

impl PredicateMask {
    /// Checks the predicate against the lengths.
    pub fn new(
        seqlen_q: usize,
        seqlen_k: usize,
        predicate: Predicate,
    ) -> Result<PredicateMask, MaskError> {
        let depth = predicate.depth();
        if depth > MAX_PREDICATE_DEPTH {
            return Err(MaskError::TooLarge {
                what: "predicate depth (nested and / or / not)",
                value: depth as u64,
                limit: MAX_PREDICATE_DEPTH as u64,
            });
        }
        let batch = predicate.batch(seqlen_q, seqlen_k)?;
        Ok(PredicateMask {
            shape: MaskShape::new(batch, 1, seqlen_q, seqlen_k)?,
            predicate,
        })
    }

    /// The predicate.
    pub fn predicate(&self) -> &Predicate {
        &self.predicate
    }
}

impl MaskSource for PredicateMask {
    fn shape(&self) -> MaskShape {
        self.shape
    }

    fn row_bits(
        &self,
        batch: usize,
        _head: usize,
        q: usize,
        k0: usize,
        cols: usize,
        out: &mut [u64],
    ) {
        let mut start = 0;
        while start < cols {
            let len = (cols - start).min(CHUNK_COLS);
            let mut tmp = [0u64; CHUNK_COLS / 64];
            self.predicate
                .write_row(batch, q, k0 + start, len, &self.shape, &mut tmp);
            for (d, t) in out[start / 64..].iter_mut().zip(&tmp[..len.div_ceil(64)]) {
                *d |= t;
            }
            start += len;
        }
    }

    fn region(&self, batch: usize, _head: usize, rows: Range<usize>, cols: Range<usize>) -> Region {
        self.predicate.region(batch, &rows, &cols, &self.shape)
    }

    /// `doc` alone (full within documents) or `causal & doc` (in either order; `all`
    /// terms of the and are ignored), with
    /// `seqlen_q == seqlen_k`, the same non-decreasing ids for queries and keys, and
    /// the same ids in every batch.
    fn documents(&self) -> Option<Documents> {
        if self.shape.seqlen_q != self.shape.seqlen_k {
            return None;
        }
        let parts: Vec<&Predicate> = match &self.predicate {
            Predicate::And(parts) => parts.iter().filter(|p| **p != Predicate::All).collect(),
            other => alloc::vec![other],
        };
        let (kind, docs) = match parts.as_slice() {
            [Predicate::Document(d)] => (DocumentKind::Full, d),
            [Predicate::Causal(_), Predicate::Document(d)]
            | [Predicate::Document(d), Predicate::Causal(_)] => (DocumentKind::Causal, d),
            _ => return None,
        };
        let s = self.shape.seqlen_q;
        if !docs.sorted || docs.q_ids != docs.k_ids || s == 0 {
            return None;
        }
        let first = &docs.q_ids[..s];
        if docs.q_ids.chunks(s).any(|batch| batch != first) {
            return None;
        }
        Documents::from_sorted_ids(kind, first)
    }
}

/// Parses a predicate expression.
///
/// Grammar: `expr := and ('|' and)*`, `and := unary (('&' | ',') unary)*`,
/// `unary := '!' unary | '(' expr ')' | atom`; parentheses nest at most
/// [`MAX_PREDICATE_NESTING`] deep (a typed error beyond). Atoms (each may end in `@top-left` /
/// `@tl` or `@bottom-right` / `@br`, default bottom-right):
///
/// - `all`, `none`
/// - `causal`
/// - `window=LEFT:RIGHT` (each a count or `inf`)
/// - `prefix=N` (prefix-LM)
/// - `doc=NAME`: document ids, resolved by `docs(NAME)` (the CLI loads a file).
///
/// ```
/// use fragmask_masks::{parse_predicate, Predicate, MaskError};
/// let mut no_docs = |_: &str| -> Result<fragmask_masks::DocumentIds, MaskError> { unreachable!() };
/// let p = parse_predicate("causal,!window=4:0", &mut no_docs).unwrap();
/// assert_eq!(p, Predicate::causal() & !Predicate::window(Some(4), Some(0)));
/// ```
pub fn parse_predicate(
    text: &str,
    docs: &mut dyn FnMut(&str) -> Result<DocumentIds, MaskError>,
) -> Result<Predicate, MaskError> {
    let mut parser = Parser { text, pos: 0, docs };
    let p = parser.expr(0)?;
    parser.skip_space();
    if parser.pos != text.len() {
        return Err(parser.error("unexpected text"));
    }
    Ok(p)
}

struct Parser<'t, 'd> {
    text: &'t str,
    pos: usize,
    docs: &'d mut dyn FnMut(&str) -> Result<DocumentIds, MaskError>,
}

impl Parser<'_, '_> {
    /// A syntax error at the current column, quoting the text (around the column when
    /// the text is long).
    fn error(&self, what: &str) -> MaskError {
        const QUOTE: usize = 60;
        let quoted = if self.text.len() <= QUOTE {
            format!("'{}'", self.text)
        } else {
            let mut start = self.pos.saturating_sub(QUOTE / 2);
            while !self.text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + QUOTE).min(self.text.len());
            while !self.text.is_char_boundary(end) {
                end -= 1;
            }
            format!(
                "'...{}...' ({} characters)",
                &self.text[start..end],
                self.text.len()
            )
        };
        MaskError::Syntax {
            message: format!("{what} at column {} of {quoted}", self.pos + 1),
        }
    }

    fn skip_space(&mut self) {
        while self.text[self.pos..].starts_with(' ') {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        if self.text[self.pos..].starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// `nesting` = parentheses open around this expression. Chains of `|` and `&` are
    /// loops building one flat node, and `!` runs are counted, so recursion happens
    /// only at `(`, at most [`MAX_PREDICATE_NESTING`] deep.
    fn expr(&mut self, nesting: usize) -> Result<Predicate, MaskError> {
        let mut p = self.and(nesting)?;
        while self.eat('|') {
            p = p | self.and(nesting)?;
        }
        Ok(p)
    }

    fn and(&mut self, nesting: usize) -> Result<Predicate, MaskError> {
        let mut p = self.unary(nesting)?;
        while self.eat('&') || self.eat(',') {
            p = p & self.unary(nesting)?;
        }
        Ok(p)
    }

    fn unary(&mut self, nesting: usize) -> Result<Predicate, MaskError> {
        let mut negate = false;
        while self.eat('!') {
            negate = !negate;
        }
        let p = if self.eat('(') {
            if nesting >= MAX_PREDICATE_NESTING {
                return Err(self.error(&format!(
                    "parentheses nest deeper than the limit of {MAX_PREDICATE_NESTING}"
                )));
            }
            let p = self.expr(nesting + 1)?;
            if !self.eat(')') {
                return Err(self.error("expected ')'"));
            }
            p
        } else {
            self.atom()?
        };
        Ok(if negate { !p } else { p })
    }

    fn word(&mut self) -> &str {
        self.skip_space();
        let rest = &self.text[self.pos..];
        let end = rest
            .find([',', '&', '|', '(', ')', '!', ' ', '=', '@'])
            .unwrap_or(rest.len());
        self.pos += end;
        &rest[..end]
    }

    fn atom(&mut self) -> Result<Predicate, MaskError> {
        let start = self.pos;
        let name = String::from(self.word());
        let arg = if self.text[self.pos..].starts_with('=') {
            self.pos += 1;
            Some(String::from(self.word()))
        } else {
            None
        };
        let align = if self.text[self.pos..].starts_with('@') {
            self.pos += 1;
            match self.word() {
                "top-left" | "tl" => Alignment::TopLeft,
                "bottom-right" | "br" => Alignment::BottomRight,
                _ => return Err(self.error("alignment must be top-left or bottom-right")),
            }
        } else {
            Alignment::BottomRight
        };
        let count = |s: &str, me: &Self| -> Result<Option<usize>, MaskError> {
            if s == "inf" || s == "-1" {
                Ok(None)
            } else {
                s.parse::<usize>()
                    .map(Some)
                    .map_err(|_| me.error("expected a count or 'inf'"))
            }
        };
        let need_arg = |me: &Self| me.error("this predicate needs '=' and an argument");
        let p = match (name.as_str(), arg.as_deref().filter(|a| !a.is_empty())) {
            ("all", None) => Predicate::All,
            ("none", None) => Predicate::Nothing,
            ("causal", None) => Predicate::Causal(align),
            ("window", Some(a)) => {
                let (l, r) = a
                    .split_once(':')
                    .ok_or_else(|| self.error("window needs LEFT:RIGHT"))?;
                Predicate::Window {
                    left: count(l, self)?,
                    right: count(r, self)?,
                    align,
                }
            }
            ("prefix", Some(a)) => Predicate::PrefixLm {
                prefix: count(a, self)?.ok_or_else(|| self.error("prefix needs a count"))?,
                align,
            },
            ("doc", Some(a)) => {
                Predicate::Document((self.docs)(a).map_err(|error| MaskError::Document {
                    name: String::from(a),
                    error: Box::new(error),
                })?)
            }
            ("window" | "prefix" | "doc", None) => return Err(need_arg(self)),
            ("all" | "none" | "causal", Some(_)) => {
                return Err(self.error("this predicate takes no argument"))
            }
            _ => {
                self.pos = start;
                return Err(self.error(
                    "expected all, none, causal, window=L:R, prefix=N, doc=FILE, '!' or '('",
                ));
            }
        };
        Ok(p)
    }
}
