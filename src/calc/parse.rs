//! Parser of calculator expressions.
//!
//! Grammar (whitespace allowed between tokens):
//!
//! ```text
//! expr    := call | tiler | literal
//! call    := name '(' expr (',' expr)* ')'
//! tiler   := '<' expr (',' expr)* '>'
//! literal := tuple [':' tuple]          (CuTe notation)
//! tuple   := int | '(' tuple (',' tuple)* ')'
//! ```
//!
//! A literal without a stride is an integer (`8`) or a bare shape (`(4,8)`); the
//! evaluator decides what those mean where they are used.

use fragmask_layout::{IntTuple, Layout, LayoutError, MAX_DEPTH, MAX_LEAVES};

use super::CalcError;

/// A parsed expression; every node remembers the byte offset where it starts.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// An integer literal such as `8`.
    Int { value: i64, pos: usize },
    /// A shape literal without a stride, such as `(4,8)`.
    Shape { shape: IntTuple, pos: usize },
    /// A layout literal `shape:stride`.
    Layout { layout: Layout, pos: usize },
    /// A by-mode tiler `<T0, T1, ...>`.
    Tiler { items: Vec<Node>, pos: usize },
    /// A function call `name(args...)`.
    Call {
        name: String,
        args: Vec<Node>,
        pos: usize,
    },
}

impl Node {
    /// Byte offset where this node starts in the expression.
    pub(crate) fn pos(&self) -> usize {
        match self {
            Node::Int { pos, .. }
            | Node::Shape { pos, .. }
            | Node::Layout { pos, .. }
            | Node::Tiler { pos, .. }
            | Node::Call { pos, .. } => *pos,
        }
    }
}

/// Parses a whole expression.
pub(crate) fn parse(text: &str) -> Result<Node, CalcError> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        pos: 0,
    };
    parser.skip_ws();
    if parser.pos == parser.bytes.len() {
        return Err(CalcError::at(0, "expected an expression, found nothing"));
    }
    let node = parser.expr(0)?;
    parser.skip_ws();
    if parser.pos != parser.bytes.len() {
        return Err(CalcError::expected(parser.pos, "end of input"));
    }
    Ok(node)
}

/// Nesting deeper than this is refused (the stack stays small).
const MAX_NESTING: usize = 64;

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn expr(&mut self, nesting: usize) -> Result<Node, CalcError> {
        if nesting > MAX_NESTING {
            return Err(CalcError::at(self.pos, "expression nested too deeply"));
        }
        self.skip_ws();
        match self.peek() {
            Some(b'<') => self.tiler(nesting),
            Some(c) if c == b'(' || c == b'-' || c.is_ascii_digit() => self.literal(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => self.call(nesting),
            _ => Err(CalcError::expected(
                self.pos,
                "a layout such as (4,8):(1,4), an integer, a tiler <...> or a function name",
            )),
        }
    }

    /// `tuple [':' tuple]`: an integer, a bare shape or a layout.
    fn literal(&mut self) -> Result<Node, CalcError> {
        let start = self.pos;
        let shape = self.tuple(0)?;
        let after_shape = self.pos;
        self.skip_ws();
        if self.peek() != Some(b':') {
            self.pos = after_shape;
            return Ok(match shape.is_int() {
                true => Node::Int {
                    value: shape.leaf(0).unwrap_or(0),
                    pos: start,
                },
                false => Node::Shape { shape, pos: start },
            });
        }
        self.pos += 1;
        self.skip_ws();
        let stride_pos = self.pos;
        let stride = self.tuple(0)?;
        if !shape.congruent(&stride) {
            return Err(CalcError::expected(
                stride_pos,
                &format!("a stride congruent with the shape {shape}"),
            ));
        }
        let layout = Layout::new(shape, stride)
            .map_err(|error| CalcError::at(start, &format!("bad layout: {error}")))?;
        Ok(Node::Layout { layout, pos: start })
    }

    /// `int | '(' tuple (',' tuple)* ')'`, CuTe's nested integer tuple.
    fn tuple(&mut self, depth: usize) -> Result<IntTuple, CalcError> {
        let start = self.pos;
        if self.peek() != Some(b'(') {
            return self.integer().map(IntTuple::int);
        }
        if depth >= MAX_DEPTH {
            return Err(CalcError::at(
                start,
                &format!("tuples nest at most {MAX_DEPTH} deep"),
            ));
        }
        self.pos += 1;
        let mut modes = Vec::new();
        loop {
            self.skip_ws();
            modes.push(self.tuple(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b')') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(CalcError::expected(self.pos, "',' or ')'")),
            }
        }
        IntTuple::tuple(&modes).map_err(|error| match error {
            LayoutError::Capacity => CalcError::at(
                start,
                &format!("too large: a tuple holds at most {MAX_LEAVES} integers, nested at most {MAX_DEPTH} deep"),
            ),
            other => CalcError::at(start, &other.to_string()),
        })
    }

    fn integer(&mut self) -> Result<i64, CalcError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if self.pos == digits {
            return Err(CalcError::expected(self.pos, "an integer or '('"));
        }
        let text = std::str::from_utf8(&self.bytes[start..self.pos]).unwrap_or_default();
        text.parse()
            .map_err(|_| CalcError::at(start, "integer out of range (64-bit)"))
    }

    fn tiler(&mut self, nesting: usize) -> Result<Node, CalcError> {
        let start = self.pos;
        self.pos += 1; // '<'
        let items = self.list(nesting, b'>', "',' or '>'")?;
        Ok(Node::Tiler { items, pos: start })
    }

    fn call(&mut self, nesting: usize) -> Result<Node, CalcError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.pos += 1;
        }
        let name = String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned();
        self.skip_ws();
        if self.peek() != Some(b'(') {
            return Err(CalcError::expected(
                self.pos,
                &format!("'(' after the function name {name}"),
            ));
        }
        self.pos += 1;
        let args = self.list(nesting, b')', "',' or ')'")?;
        Ok(Node::Call {
            name,
            args,
            pos: start,
        })
    }

    /// Comma-separated expressions up to `close` (the opening token already consumed).
    fn list(&mut self, nesting: usize, close: u8, expected: &str) -> Result<Vec<Node>, CalcError> {
        let mut items = Vec::new();
        loop {
            items.push(self.expr(nesting + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(items);
                }
                _ => return Err(CalcError::expected(self.pos, expected)),
            }
        }
    }
}
