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
