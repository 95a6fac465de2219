//! The stack machine expressions run on: postfix operations over `i64` with
//! Halide's division, and the interpreter that evaluates them. Every other part
//! of the language (parser, folding, lanes, WGSL) reads or writes these
//! operations, so this file imports nothing of theirs.

/// Stack slots evaluation keeps on the native stack; deeper expressions use
/// the heap.
const INLINE_STACK: usize = 16;

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Cmp {
    fn test(self, a: i64, b: i64) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
        }
    }

    pub(super) fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
        }
    }
}

/// An operation on two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Min,
    Max,
    And,
    Or,
}

impl Bin {
    #[inline(always)]
    fn apply(self, a: i64, b: i64) -> i64 {
        match self {
            Bin::Add => a.wrapping_add(b),
            Bin::Sub => a.wrapping_sub(b),
            Bin::Mul => a.wrapping_mul(b),
            Bin::Div => div(a, b),
            Bin::Mod => rem(a, b),
            Bin::Min => a.min(b),
            Bin::Max => a.max(b),
            Bin::And => i64::from(a != 0 && b != 0),
            Bin::Or => i64::from(a != 0 || b != 0),
        }
    }
}

/// Halide's division: Euclidean, and zero for a zero divisor.
pub(super) fn div(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_div_euclid(b)
    }
}

/// Halide's modulo: never negative, and zero for a zero divisor.
pub(super) fn rem(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_rem_euclid(b)
    }
}

/// One postfix operation. Operands are popped right first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Lit(i64),
    Coord(usize),
    /// Input `j` of [`Expr::parse_with`](super::Expr::parse_with)'s names.
    Input(usize),
    Neg,
    Not,
    Abs,
    Bin(Bin),
    Cmp(Cmp),
    /// A link of a comparison chain other than the last: pops `b`, `a`; pushes
    /// `a op b`, then `b` again for the next link.
    CmpKeep(Cmp),
    /// Pops `hi`, `lo`, `v`.
    Clamp,
    /// Pops `b`, `a`, `cond`.
    Select,
}

impl Op {
    /// Values popped and pushed.
    pub(super) fn arity(self) -> (usize, usize) {
        match self {
            Op::Lit(_) | Op::Coord(_) | Op::Input(_) => (0, 1),
            Op::Neg | Op::Not | Op::Abs => (1, 1),
            Op::Bin(_) | Op::Cmp(_) => (2, 1),
            Op::CmpKeep(_) => (2, 2),
            Op::Clamp | Op::Select => (3, 1),
        }
    }
}

/// Runs `ops`, leaving their results at the bottom of `stack`; returns how many
/// there are. The parser checked that `stack` is deep enough.
#[inline(always)]
pub(super) fn exec(ops: &[Op], coords: &[i64], inputs: &[i64], stack: &mut [i64]) -> usize {
    let mut sp = 0;
    for &op in ops {
        match op {
            Op::Lit(v) => {
                stack[sp] = v;
                sp += 1;
            }
            Op::Coord(d) => {
                stack[sp] = coords.get(d).copied().unwrap_or(0);
                sp += 1;
            }
            Op::Input(j) => {
                stack[sp] = inputs.get(j).copied().unwrap_or(0);
                sp += 1;
            }
            Op::Neg => stack[sp - 1] = stack[sp - 1].wrapping_neg(),
            Op::Not => stack[sp - 1] = i64::from(stack[sp - 1] == 0),
            Op::Abs => stack[sp - 1] = stack[sp - 1].wrapping_abs(),
            Op::Bin(bin) => {
                sp -= 1;
                stack[sp - 1] = bin.apply(stack[sp - 1], stack[sp]);
            }
            Op::Cmp(cmp) => {
                sp -= 1;
                stack[sp - 1] = i64::from(cmp.test(stack[sp - 1], stack[sp]));
            }
            Op::CmpKeep(cmp) => {
                stack[sp - 2] = i64::from(cmp.test(stack[sp - 2], stack[sp - 1]));
            }
            Op::Clamp => {
                sp -= 2;
                stack[sp - 1] = stack[sp - 1].min(stack[sp + 1]).max(stack[sp]);
            }
            Op::Select => {
                sp -= 2;
                stack[sp - 1] = if stack[sp - 1] != 0 {
                    stack[sp]
                } else {
                    stack[sp + 1]
                };
            }
        }
    }
    sp
}

/// Evaluates `ops`, which need `depth` stack slots, without allocating unless
/// they need more than [`INLINE_STACK`].
#[inline]
pub(super) fn run(ops: &[Op], depth: usize, coords: &[i64], inputs: &[i64]) -> i64 {
    if depth <= INLINE_STACK {
        let mut stack = [0; INLINE_STACK];
        exec(ops, coords, inputs, &mut stack);
        stack[0]
    } else {
        let mut stack = vec![0; depth];
        exec(ops, coords, inputs, &mut stack);
        stack[0]
    }
}

/// The stack slots `ops` need, and their size with chained comparisons
/// expanded (middle operands twice).
pub(super) fn measure(ops: &[Op]) -> (usize, u64) {
    let mut sizes: Vec<u64> = Vec::new();
    let mut depth = 0;
    for &op in ops {
        let (pops, _) = op.arity();
        let base = sizes.len().saturating_sub(pops);
        let kept = sizes.last().copied().unwrap_or(0);
        let size = sizes[base..]
            .iter()
            .fold(1u64, |acc, &s| acc.saturating_add(s));
        sizes.truncate(base);
        sizes.push(size);
        if let Op::CmpKeep(_) = op {
            sizes.push(kept);
        }
        depth = depth.max(sizes.len());
    }
    (depth, sizes.first().copied().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use crate::expr::tests::{at, parse, value};

    #[test]
    fn coordinates() {
        let coords: Vec<i64> = (0..16).map(|d| 10 + d).collect();
        for (name, d) in [("x", 0), ("y", 1), ("z", 2), ("w", 3), ("d4", 4), ("d9", 9)] {
            assert_eq!(at(name, &coords), coords[d], "{name}");
        }
        assert_eq!(at("d15", &coords), 25);
        // Missing coordinates are 0.
        assert_eq!(at("x + y + d15", &[1]), 1);
        assert_eq!(at("d15", &[]), 0);
        assert_eq!(at("x", &[-5]), -5);
    }

    #[test]
    fn arithmetic() {
        assert_eq!(at("x + 256*y", &[3, 5]), 1283);
        assert_eq!(at("3*x + 2*y + z + 4*w", &[1, 2, 3, 4]), 26);
        assert_eq!(at("((x+y)%8)*16 + 120", &[5, 6]), 3 * 16 + 120);
        assert_eq!(at("x - y", &[3, 5]), -2);
        assert_eq!(at("-x", &[3]), -3);
        assert_eq!(at("--x", &[3]), 3);
        assert_eq!(at("- - -x", &[3]), -3);
        assert_eq!(at("(x + y) * 2", &[3, 5]), 16);
        assert_eq!(at("x / 4", &[17]), 4);
        assert_eq!(at("x % 4", &[17]), 1);
        assert_eq!(value("((((1))))"), 1);
    }

    #[test]
    fn halide_division() {
        assert_eq!(value("-7 / 2"), -4);
        assert_eq!(value("-7 % 2"), 1);
        assert_eq!(value("7 / -2"), -3);
        assert_eq!(value("7 % -2"), 1);
        assert_eq!(value("-7 / -2"), 4);
        assert_eq!(value("-7 % -2"), 1);
        assert_eq!(value("7 / 2"), 3);
        assert_eq!(value("-8 / 2"), -4);
        assert_eq!(value("-8 % 2"), 0);
        assert_eq!(value("7 / 0"), 0);
        assert_eq!(value("7 % 0"), 0);
        assert_eq!(at("x / 0", &[-9]), 0);
        assert_eq!(at("x % 0", &[-9]), 0);
        assert_eq!(at("x / y", &[-7, 2]), -4);
        assert_eq!(at("x % y", &[-7, 2]), 1);
        assert_eq!(at("x / y", &[7, -2]), -3);
        assert_eq!(at("x % y", &[7, -2]), 1);
        // The Euclidean identity, everywhere the divisor is non-zero.
        let e = parse("(x / y) * y + x % y == x and 0 <= x % y < abs(y)");
        let c = e.compile();
        for a in -20..=20 {
            for b in (-6..=6).filter(|&b| b != 0) {
                assert_eq!(e.eval(&[a, b]), 1, "{a} / {b}");
                assert_eq!(c.eval(&[a, b]), 1, "{a} / {b}");
            }
        }
    }

    #[test]
    fn functions() {
        assert_eq!(at("min(x, y)", &[3, 5]), 3);
        assert_eq!(at("max(x, y)", &[3, 5]), 5);
        assert_eq!(at("min(x, -y)", &[3, 5]), -5);
        assert_eq!(at("clamp(x, 20, 100)", &[5]), 20);
        assert_eq!(at("clamp(x, 20, 100)", &[50]), 50);
        assert_eq!(at("clamp(x, 20, 100)", &[500]), 100);
        // Halide's clamp: lo wins when lo > hi.
        assert_eq!(at("clamp(x, 100, 20)", &[50]), 100);
        assert_eq!(at("clamp(max(x, y), 20, 100)", &[30, 70]), 70);
        assert_eq!(at("abs(x)", &[-5]), 5);
        assert_eq!(at("abs(x)", &[5]), 5);
        assert_eq!(at("select(x, 10, 20)", &[1]), 10);
        assert_eq!(at("select(x, 10, 20)", &[0]), 20);
        assert_eq!(at("select(x < 8, 1, 2)", &[9]), 2);
        assert_eq!(at("max(min(x, 3), min(y, 4))", &[9, 1]), 3);
        assert_eq!(at("abs ( x - y )", &[3, 8]), 5);
    }

    #[test]
    fn wrapping() {
        assert_eq!(value("9223372036854775807 + 1"), i64::MIN);
        assert_eq!(value("-9223372036854775808 - 1"), i64::MAX);
        assert_eq!(value("-(-9223372036854775808)"), i64::MIN);
        assert_eq!(value("- -9223372036854775808"), i64::MIN);
        assert_eq!(value("-9223372036854775808 / -1"), i64::MIN);
        assert_eq!(value("-9223372036854775808 % -1"), 0);
        assert_eq!(value("abs(-9223372036854775808)"), i64::MIN);
        assert_eq!(value("4611686018427387904 * 4"), 0);
        assert_eq!(
            value("3037000500 * 3037000500"),
            3037000500i64.wrapping_mul(3037000500)
        );
        let big = [i64::MAX, i64::MIN];
        assert_eq!(at("x + 1", &big), i64::MIN);
        assert_eq!(at("y - 1", &big), i64::MAX);
        assert_eq!(
            at("x * 256 + y", &big),
            i64::MAX.wrapping_mul(256).wrapping_add(i64::MIN)
        );
        assert_eq!(at("-y", &big), i64::MIN);
        assert_eq!(at("y / -1", &big), i64::MIN);
        assert_eq!(at("y % -1", &big), 0);
        assert_eq!(at("abs(y)", &big), i64::MIN);
    }
}
