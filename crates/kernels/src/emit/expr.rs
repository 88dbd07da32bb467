//! Index expression trees: emitted as CUDA C++ and evaluated in Rust from the same tree.
//!
//! Every index a generated kernel computes at run time is an [`Expr`] built by the
//! generators from a layout (never typed as text). [`Expr::cuda`] prints it;
//! [`Expr::eval`] evaluates it for one thread, which is what the host's CPU emulator
//! runs. The smart constructors simplify (`x * 1`, `x + 0`, `x / 1`, literal folding),
//! so the printed and the evaluated tree are the same tree.

use std::fmt::Write as _;

/// A binary operator on `unsigned` (32-bit) values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `a + b`.
    Add,
    /// `a * b`.
    Mul,
    /// `a / b` (unsigned division).
    Div,
    /// `a % b`.
    Rem,
    /// `a >> b`.
    Shr,
    /// `a & b`.
    And,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Mul => "*",
            Op::Div => "/",
            Op::Rem => "%",
            Op::Shr => ">>",
            Op::And => "&",
        }
    }

    /// Applies the operator; `None` on overflow, division by zero or a shift of 32+.
    pub fn apply(self, a: u32, b: u32) -> Option<u32> {
        match self {
            Op::Add => a.checked_add(b),
            Op::Mul => a.checked_mul(b),
            Op::Div => a.checked_div(b),
            Op::Rem => a.checked_rem(b),
            Op::Shr => a.checked_shr(b),
            Op::And => Some(a & b),
        }
    }
}

/// An unsigned 32-bit index expression over the thread index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// The thread's index among the MMA threads, `0..threads` (printed `thread`).
    Thread,
    /// The value of an earlier [`Let`] of the same program, by position.
    Let(usize),
    /// A constant.
    Lit(u32),
    /// A binary operation.
    Bin(Op, Box<Expr>, Box<Expr>),
}

/// A named per-thread value, computed once before it is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Let {
    /// The C++ name (a local `const unsigned`).
    pub name: String,
    /// Its value.
    pub expr: Expr,
    /// Where it came from (the layout and leaf), printed as a comment.
    pub comment: String,
}

impl Expr {
    /// A literal.
    pub fn lit(value: u32) -> Expr {
        Expr::Lit(value)
    }

    /// The literal value, if this is one.
    pub fn as_lit(&self) -> Option<u32> {
        match self {
            Expr::Lit(v) => Some(*v),
            _ => None,
        }
    }

    fn bin(op: Op, a: Expr, b: Expr) -> Expr {
        if let (Some(x), Some(y)) = (a.as_lit(), b.as_lit()) {
            if let Some(v) = op.apply(x, y) {
                return Expr::Lit(v);
            }
        }
        Expr::Bin(op, Box::new(a), Box::new(b))
    }

    /// `self + other`, dropping a literal 0.
    pub fn plus(self, other: Expr) -> Expr {
        match (self.as_lit(), other.as_lit()) {
            (Some(0), _) => other,
            (_, Some(0)) => self,
            _ => Expr::bin(Op::Add, self, other),
        }
    }

    /// `self * other`, dropping a literal 1 and folding a literal 0.
    pub fn times(self, other: Expr) -> Expr {
        match (self.as_lit(), other.as_lit()) {
            (Some(0), _) | (_, Some(0)) => Expr::Lit(0),
            (Some(1), _) => other,
            (_, Some(1)) => self,
            _ => Expr::bin(Op::Mul, self, other),
        }
    }

    /// `self / divisor`, dropping a divisor of 1.
    pub fn div_by(self, divisor: u32) -> Expr {
        if divisor == 1 {
            self
        } else {
            Expr::bin(Op::Div, self, Expr::Lit(divisor))
        }
    }

    /// `self % modulus`.
    pub fn rem_by(self, modulus: u32) -> Expr {
        if modulus == 1 {
            Expr::Lit(0)
        } else {
            Expr::bin(Op::Rem, self, Expr::Lit(modulus))
        }
    }

    /// `self >> amount` (a run-time shift amount allowed).
    pub fn shr_by(self, amount: Expr) -> Expr {
        if amount.as_lit() == Some(0) {
            self
        } else {
            Expr::bin(Op::Shr, self, amount)
        }
    }

    /// `self & mask`.
    pub fn and_mask(self, mask: u32) -> Expr {
        Expr::bin(Op::And, self, Expr::Lit(mask))
    }

    /// Whether the expression reads the thread index (directly or through a let).
    pub fn depends_on_thread(&self, lets: &[Let]) -> bool {
        match self {
            Expr::Thread => true,
            Expr::Let(i) => lets.get(*i).is_none_or(|l| l.expr.depends_on_thread(lets)),
            Expr::Lit(_) => false,
            Expr::Bin(_, a, b) => a.depends_on_thread(lets) || b.depends_on_thread(lets),
        }
    }

    /// Evaluates the expression for `thread`; `lets` holds the values of the program's
    /// lets computed so far. `None` on overflow, division by zero, a shift of 32 or
    /// more, or a let that is not computed yet.
    pub fn eval(&self, thread: u32, lets: &[u32]) -> Option<u32> {
        match self {
            Expr::Thread => Some(thread),
            Expr::Let(i) => lets.get(*i).copied(),
            Expr::Lit(v) => Some(*v),
            Expr::Bin(op, a, b) => op.apply(a.eval(thread, lets)?, b.eval(thread, lets)?),
        }
    }

    /// The CUDA C++ text, fully parenthesised, literals with a `u` suffix; lets are
    /// printed by name.
    pub fn cuda(&self, lets: &[Let]) -> String {
        let mut s = String::new();
        self.write_cuda(&mut s, lets, true);
        s
    }

    fn write_cuda(&self, s: &mut String, lets: &[Let], top: bool) {
        match self {
            Expr::Thread => s.push_str("thread"),
            Expr::Let(i) => match lets.get(*i) {
                Some(l) => s.push_str(&l.name),
                None => {
                    let _ = write!(s, "/* missing let {i} */0u");
                }
            },
            Expr::Lit(v) => {
                let _ = write!(s, "{v}u");
            }
            Expr::Bin(op, a, b) => {
                if !top {
                    s.push('(');
                }
                a.write_cuda(s, lets, false);
                let _ = write!(s, " {} ", op.symbol());
                b.write_cuda(s, lets, false);
                if !top {
                    s.push(')');
                }
            }
        }
    }
}

/// Evaluates `lets` in order for `thread`: the values an emitted function computes in
/// its prologue. `None` if one of them fails to evaluate.
pub fn eval_lets(lets: &[Let], thread: u32) -> Option<Vec<u32>> {
    let mut values = Vec::with_capacity(lets.len());
    for l in lets {
        let v = l.expr.eval(thread, &values)?;
        values.push(v);
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_constructors_simplify_and_fold() {
        assert_eq!(Expr::Thread.times(Expr::lit(1)), Expr::Thread);
        assert_eq!(Expr::Thread.plus(Expr::lit(0)), Expr::Thread);
        assert_eq!(Expr::Thread.div_by(1), Expr::Thread);
        assert_eq!(Expr::lit(6).times(Expr::lit(7)), Expr::lit(42));
        assert_eq!(Expr::Thread.times(Expr::lit(0)), Expr::lit(0));
        assert_eq!(Expr::Thread.rem_by(1), Expr::lit(0));
    }

    #[test]
    fn printed_and_evaluated_trees_agree() {
        let lets = vec![Let {
            name: "row_t".into(),
            expr: Expr::Thread.div_by(4).rem_by(8),
            comment: String::new(),
        }];
        let e = Expr::Let(0)
            .times(Expr::lit(16))
            .plus(Expr::Thread.rem_by(4));
        assert_eq!(e.cuda(&lets), "(row_t * 16u) + (thread % 4u)");
        for t in 0..256 {
            let values = eval_lets(&lets, t).unwrap();
            assert_eq!(e.eval(t, &values), Some((t / 4 % 8) * 16 + t % 4));
        }
        assert!(e.depends_on_thread(&lets));
        assert!(!Expr::lit(3).depends_on_thread(&lets));
    }

    #[test]
    fn evaluation_reports_overflow_and_bad_shifts() {
        assert_eq!(Expr::lit(u32::MAX).plus(Expr::Thread).eval(1, &[]), None);
        assert_eq!(Expr::Thread.shr_by(Expr::lit(32)).eval(1, &[]), None);
        assert_eq!(Expr::Let(3).eval(0, &[]), None);
    }
}
