//! Integer expressions of element coordinates.
//!
//! Cases fill buffers and check their contents with expressions such as
//! `x + 256*y`. The same [`Expr`] is evaluated on the host and translated to
//! WGSL ([`Expr::to_wgsl`]) for compute shaders, so the language holds only
//! what a shader computes directly: integers, no variables, no loops.
//!
//! On the host, [`Expr::eval`] is fine for a few values. For whole buffers,
//! [`Expr::compile`] once, then [`Compiled::eval_row`] along dimension 0 (or
//! [`Compiled::eval`] per element): affine expressions such as `x + 256*y`
//! skip the interpreter entirely.
//!
//! # Grammar
//!
//! ```text
//! construct               example                       value at x = 3, y = 5
//! integer literal         42   0xff   1_000_000         42   255   1000000
//! coordinate              x  y  z  w  d4 .. d15         3    5  (dims 0, 1, 2, 3, 4 .. 15)
//! input (of a map)        a  f  input                   the input's element at (x, y, ...)
//! arithmetic              x + 256*y - 1                 1282
//! unary minus             -x                            -3
//! parentheses             (x + y) * 2                   16
//! division, modulo        -x / 2   -x % 2               -2   1
//! comparison              x < y   x == y   x != y       1    0    1
//! chained comparison      1 <= x < 3                    0    (1 <= x and x < 3)
//! logic                   x > 0 and not y == 5          0
//!                         x == 0 or y == 5              1
//! conditional             7 if x < y else 0             7
//! functions               min(x, y)   max(x, y)         3    5
//!                         clamp(x * y, 0, 10)           10
//!                         abs(x - y)                    2
//!                         select(x < y, 1, 2)           1
//! ```
//!
//! Literals are decimal or `0x` hex, with `_` allowed between digits; there are
//! no floating-point numbers. Coordinates past the ones given to `eval` are 0.
//!
//! Inputs are names given to [`Expr::parse_with`] (a map's buffers); input `j`
//! is the value `inputs[j]` of [`Expr::eval_with`]. Their values are integers as
//! well: an element converted to `i32` as a C cast does (floats truncated toward
//! zero, saturating), then computed with like any other operand.
//!
//! Precedence, loosest first, as in Python:
//!
//! ```text
//! A if C else B             1 if c else 2 if d else 3  is  1 if c else (2 if d else 3)
//! or
//! and                       a or b and c               is  a or (b and c)
//! not                       not x < 3                  is  not (x < 3)
//! < <= > >= == !=           chainable: 40 <= x < 56    is  40 <= x and x < 56
//! + -                       left to right
//! * / %                     left to right
//! - (unary)                 -7 / 2                     is  (-7) / 2 == -4
//! literal, coordinate, f(...), (...)
//! ```
//!
//! # Semantics
//!
//! - Arithmetic is on `i64` and wraps on overflow, as two's complement does.
//! - `/` and `%` are Halide's: Euclidean, so the remainder is never negative and
//!   `a == (a / b) * b + a % b` with `0 <= a % b < |b|`. For a positive divisor
//!   this rounds toward negative infinity. Division by zero is defined, as in
//!   Halide: `x / 0 == 0` and `x % 0 == 0`. Examples: `-7 / 2 == -4`,
//!   `-7 % 2 == 1`, `7 / -2 == -3`, `7 % -2 == 1`.
//! - Comparisons, `and`, `or` and `not` give 1 or 0; any non-zero value is
//!   true. Both sides are always evaluated (nothing has side effects).
//! - `A if C else B` and `select(C, A, B)` are A when C is non-zero, else B.
//! - `clamp(v, lo, hi)` is Halide's `max(min(v, hi), lo)`: `lo` when `lo > hi`.
//! - `abs` wraps: `abs(-9223372036854775808)` is itself.
//!
//! # WGSL
//!
//! [`Expr::to_wgsl`] computes in `i32`, with the functions of
//! [`Expr::wgsl_prelude`] for division and modulo. It agrees with the host
//! whenever every value fits in `i32`. Constant subexpressions are folded on the
//! host in `i64` first, and the remaining literals keep their low 32 bits.
//!
//! # Limits
//!
//! Parentheses and argument lists nest at most 256 deep, so hostile input gives
//! an error rather than exhausting the stack; operator chains, `else` chains,
//! `not`s and unary minuses are loops and may be any length. An expression may
//! not expand to more than 2^20 operations in WGSL, where chained comparisons
//! repeat their middle operand.
//!
//! A device kernel takes less ([`Expr::check_wgsl`]): at most
//! [`MAX_WGSL_DEPTH`] operations deep, each link of a chain such as
//! `x + x + x` counting one, and at most [`MAX_WGSL_OPS`] operations once
//! expanded, so that the WGSL stays well inside naga's limits.

mod error;
mod fold;
mod lanes;
mod lex;
mod parse;
mod range;
mod vm;
mod wgsl;

use std::fmt;
use std::str::FromStr;

pub use error::ExprError;
/// Coordinate names there can be: one per buffer dimension.
pub use vkcopy::MAX_DIMS;
pub use wgsl::{MAX_WGSL_DEPTH, MAX_WGSL_OPS};

use vm::{run, Op};

/// Operations an expression may expand to once chained comparisons repeat
/// their middle operands, as they do in WGSL. Only hostile input gets close.
const MAX_EXPANDED: u64 = 1 << 20;

/// A parsed expression; see the [module documentation](self) for the language.
///
/// Held as postfix operations, so that evaluation, translation and drop never
/// recurse however long the expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    source: String,
    ops: Vec<Op>,
    /// Stack slots `ops` need.
    stack: usize,
}

impl Expr {
    /// Parses `src`; the error gives the byte offset of the problem.
    pub fn parse(src: &str) -> Result<Expr, ExprError> {
        Expr::parse_with(src, &[])
    }

    /// Parses `src` where the names `inputs` are operands: input `j` is
    /// `inputs[j]` (see [`Expr::eval_with`]). A name that is a coordinate, a
    /// keyword or a function cannot be an input (offset 0).
    pub fn parse_with(src: &str, inputs: &[&str]) -> Result<Expr, ExprError> {
        for name in inputs {
            Expr::check_input_name(name).map_err(|m| ExprError::new(0, m))?;
        }
        let ops = fold::fold(parse::parse(src, inputs)?);
        let (stack, expanded) = vm::measure(&ops);
        if expanded > MAX_EXPANDED {
            return Err(ExprError::new(0, "expression too large"));
        }
        Ok(Expr {
            source: src.to_owned(),
            ops,
            stack,
        })
    }

    /// The expression `v`.
    pub fn constant(v: i64) -> Expr {
        Expr {
            source: v.to_string(),
            ops: vec![Op::Lit(v)],
            stack: 1,
        }
    }

    /// The value at `coords`, where `coords[d]` is coordinate `d`; coordinates
    /// past the end of `coords` are 0. Allocation-free for any realistic
    /// expression; use [`Expr::compile`] for many elements.
    pub fn eval(&self, coords: &[i64]) -> i64 {
        run(&self.ops, self.stack, coords, &[])
    }

    /// The value at `coords` where input `j` has the value `inputs[j]` (0 past
    /// the end).
    pub fn eval_with(&self, coords: &[i64], inputs: &[i64]) -> i64 {
        run(&self.ops, self.stack, coords, inputs)
    }

    /// Whether `name` may name an input: not a coordinate, keyword or function.
    pub fn check_input_name(name: &str) -> Result<(), String> {
        parse::check_input_name(name)
    }

    /// Whether input `j` is used.
    pub fn uses_input(&self, j: usize) -> bool {
        self.ops.contains(&Op::Input(j))
    }

    /// Prepares the expression for evaluation over a whole buffer.
    pub fn compile(&self) -> Compiled {
        let kind = if let Some(v) = self.is_constant() {
            Kind::Constant(v)
        } else if let Some((coefs, offset)) = fold::affine(&self.ops) {
            Kind::Affine { coefs, offset }
        } else {
            Kind::Ops {
                ops: self.ops.clone(),
                stack: self.stack,
            }
        };
        Compiled { kind }
    }

    /// Whether the value depends on coordinate `d` (0 for `x`).
    pub fn uses_dim(&self, d: usize) -> bool {
        self.ops.contains(&Op::Coord(d))
    }

    /// The highest coordinate used (0 for `x`), or `None` if none is.
    pub fn max_dim(&self) -> Option<usize> {
        self.ops
            .iter()
            .filter_map(|op| match *op {
                Op::Coord(d) => Some(d),
                _ => None,
            })
            .max()
    }

    /// The value, if the expression uses no coordinate.
    pub fn is_constant(&self) -> Option<i64> {
        // Folding leaves an expression without coordinates as one literal.
        match self.ops[..] {
            [Op::Lit(v)] => Some(v),
            _ => None,
        }
    }

    /// A WGSL `i32` expression computing this one, parenthesized when it is not
    /// a single term. `coord(d)` gives the WGSL `i32` expression of coordinate
    /// `d`. Needs [`Expr::wgsl_prelude`] in the shader.
    pub fn to_wgsl(&self, coord: &dyn Fn(usize) -> String) -> String {
        self.to_wgsl_with(coord, &|_| "0i".to_owned())
    }

    /// [`Expr::to_wgsl`] where `input(j)` gives the WGSL `i32` expression of
    /// input `j`.
    pub fn to_wgsl_with(
        &self,
        coord: &dyn Fn(usize) -> String,
        input: &dyn Fn(usize) -> String,
    ) -> String {
        wgsl::translate(&self.ops, self.stack, coord, input)
    }

    /// Checks that the expression fits a device kernel: at most
    /// [`MAX_WGSL_DEPTH`] operations deep and [`MAX_WGSL_OPS`] operations
    /// expanded. Without this check, [`Expr::to_wgsl`] of a deep expression
    /// gives WGSL that naga rejects.
    pub fn check_wgsl(&self) -> Result<(), String> {
        wgsl::check(&self.ops, self.stack)
    }

    /// WGSL functions [`Expr::to_wgsl`] calls: `hl_div` and `hl_mod`, Halide's
    /// division and modulo on `i32`.
    pub fn wgsl_prelude() -> &'static str {
        wgsl::PRELUDE
    }

    /// The text the expression was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl FromStr for Expr {
    type Err = ExprError;

    fn from_str(src: &str) -> Result<Expr, ExprError> {
        Expr::parse(src)
    }
}

impl TryFrom<&str> for Expr {
    type Error = ExprError;

    fn try_from(src: &str) -> Result<Expr, ExprError> {
        Expr::parse(src)
    }
}

impl TryFrom<String> for Expr {
    type Error = ExprError;

    fn try_from(src: String) -> Result<Expr, ExprError> {
        Expr::parse(&src)
    }
}

/// An [`Expr`] prepared for evaluation over many elements.
#[derive(Clone, Debug)]
pub struct Compiled {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Constant(i64),
    /// `offset + coefs[0]*x + coefs[1]*y + ...`: most fill patterns, evaluated
    /// without dispatching on operations.
    Affine {
        coefs: Vec<i64>,
        offset: i64,
    },
    Ops {
        ops: Vec<Op>,
        stack: usize,
    },
}

impl Compiled {
    /// Same as [`Expr::eval`], and allocation-free.
    #[inline]
    pub fn eval(&self, coords: &[i64]) -> i64 {
        match &self.kind {
            Kind::Constant(v) => *v,
            // Zip stops at the shorter: missing coordinates are 0.
            Kind::Affine { coefs, offset } => coefs
                .iter()
                .zip(coords)
                .fold(*offset, |acc, (&k, &c)| acc.wrapping_add(k.wrapping_mul(c))),
            Kind::Ops { ops, stack } => run(ops, *stack, coords, &[]),
        }
    }

    /// Values along dimension 0: `out[i]` is the value at `coords` with
    /// coordinate 0 advanced by `i` (from 0 if `coords` is empty). Several
    /// times faster than [`Compiled::eval`] per element for non-affine
    /// expressions, since each operation runs over many elements at once.
    pub fn eval_row(&self, coords: &[i64], out: &mut [i64]) {
        match &self.kind {
            Kind::Constant(v) => out.fill(*v),
            Kind::Affine { coefs, .. } => {
                let step = coefs.first().copied().unwrap_or(0);
                let mut v = self.eval(coords);
                for o in out {
                    *o = v;
                    v = v.wrapping_add(step);
                }
            }
            Kind::Ops { ops, stack } => lanes::eval_row(ops, *stack, coords, out),
        }
    }
}

/// Tests of the API, and the helpers the tests of every module below share.
#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn parse(src: &str) -> Expr {
        Expr::parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"))
    }

    /// Value of `src` at `coords`, checking that `Compiled` agrees.
    pub(super) fn at(src: &str, coords: &[i64]) -> i64 {
        let e = parse(src);
        let v = e.eval(coords);
        assert_eq!(e.compile().eval(coords), v, "{src:?} at {coords:?}");
        v
    }

    pub(super) fn value(src: &str) -> i64 {
        at(src, &[])
    }

    fn error(src: &str) -> ExprError {
        match Expr::parse(src) {
            Ok(e) => panic!("{src:?} parsed as {e:?}"),
            Err(e) => e,
        }
    }

    /// Checks the offset and that the message contains `message`.
    pub(super) fn check_error(src: &str, offset: usize, message: &str) {
        let e = error(src);
        assert_eq!(e.offset, offset, "{src:?}: {e}");
        assert!(e.message.contains(message), "{src:?}: {e}");
    }

    /// Expressions covering every operation, for comparing evaluators.
    pub(super) const CORPUS: &[&str] = &[
        "x + 256*y",
        "3*x + 2*y + z + 4*w",
        "((x+y)%8)*16 + 120",
        "clamp(max(x, y), 20, 100)",
        "x + 256*y + (7 if 40 <= x < 56 and 40 <= y < 56 else 0)",
        "-x - 3*(y - 2*x) + 7",
        "(x + 1) * (y - 1)",
        "x / 3 + y % 5 - x / y - x % y",
        "x / -3 + y % -5",
        "abs(x - y) + min(x, -y) * max(y, 2)",
        "select(x < y, x * 2, y / 0) + (x % 0)",
        "not x or y and not y < 3",
        "x < y < 5 or -2 <= x - y != 1",
        "1 if x == 0 else 2 if y == 0 else x * y",
        "x * 9223372036854775807 + y * -9223372036854775808",
        "d4 + d15 * 2 - w",
        "2 * (3 * (x + 1) - 4) + -(y * 5)",
        "x * y",
        "7",
        "x - x + 3",
    ];

    #[test]
    fn api() {
        let e = parse("x + 256*y");
        assert_eq!(e.source(), "x + 256*y");
        assert_eq!(e.to_string(), "x + 256*y");
        assert_eq!("x + 256*y".parse::<Expr>(), Ok(e.clone()));
        assert_eq!(Expr::try_from("x + 256*y"), Ok(e.clone()));
        assert_eq!(e.max_dim(), Some(1));
        assert_eq!(e.is_constant(), None);
        assert_eq!(parse("x").max_dim(), Some(0));
        assert_eq!(parse("d15 + x").max_dim(), Some(15));
        assert_eq!(parse("1 + 2").max_dim(), None);
        assert_eq!(parse("1 + 2 * 3").is_constant(), Some(7));
        assert_eq!(parse("3 if 1 < 2 < 3 else 4").is_constant(), Some(3));
        assert_eq!(parse("select(0, 1, -(2))").is_constant(), Some(-2));
        assert_eq!(parse("x * 0").is_constant(), None);
        for v in [0, 1, -1, 42, i64::MAX, i64::MIN] {
            let c = Expr::constant(v);
            assert_eq!(c.is_constant(), Some(v));
            assert_eq!(c.eval(&[1, 2]), v);
            assert_eq!(c.compile().eval(&[]), v);
            assert_eq!(parse(c.source()).is_constant(), Some(v));
        }
        let err = error("x + q");
        assert_eq!(
            err.to_string(),
            "column 5: unknown name 'q'; coordinates are x, y, z, w, d4..d15"
        );
    }

    #[test]
    fn inputs() {
        let e = Expr::parse_with("clamp(f, 20, 100) + g * x", &["f", "g"]).unwrap();
        assert_eq!(e.eval_with(&[2], &[7, 3]), 26);
        assert_eq!(e.eval_with(&[2], &[500, -1]), 98);
        // Missing inputs are 0, as missing coordinates are; eval reads none.
        assert_eq!(e.eval_with(&[2], &[]), 20);
        assert_eq!(e.eval(&[2]), 20);
        assert!(e.uses_input(0) && e.uses_input(1) && !e.uses_input(2));
        assert_eq!(e.max_dim(), Some(0));
        assert_eq!(e.is_constant(), None);
        assert_eq!(
            e.to_wgsl_with(&|d| format!("c{d}"), &|j| format!("a{j}")),
            "(max(min(a0, 100i), 20i) + (a1 * c0))"
        );
        // Inputs are not folded as constants, and not affine.
        let e = Expr::parse_with("a + 1 + 2", &["a"]).unwrap();
        assert_eq!(e.eval_with(&[], &[4]), 7);
        assert_eq!(e.compile().eval(&[]), 3);
        // Names of inputs, and what may not be one.
        assert_eq!(
            Expr::parse_with("h", &["g"]).unwrap_err().to_string(),
            "column 1: unknown name 'h'; coordinates are x, y, z, w, d4..d15; inputs are g"
        );
        for (name, why) in [
            ("x", "'x' is a coordinate, so it cannot name an input"),
            ("d7", "'d7' is a coordinate, so it cannot name an input"),
            (
                "min",
                "'min' is a keyword or function, so it cannot name an input",
            ),
            (
                "if",
                "'if' is a keyword or function, so it cannot name an input",
            ),
            (
                "a-b",
                "'a-b' cannot be an input of an expression: names are letters, digits and _",
            ),
            (
                "1a",
                "'1a' cannot be an input of an expression: names are letters, digits and _",
            ),
        ] {
            assert_eq!(Expr::check_input_name(name).unwrap_err(), why);
            assert_eq!(Expr::parse_with("1", &[name]).unwrap_err().message, why);
        }
        for name in ["out", "input", "d0", "d16", "f_2", "_t"] {
            Expr::check_input_name(name).unwrap();
        }
        // A name that is an input is the input, not the coordinate it would be.
        let e = Expr::parse_with("d0 + d16", &["d0", "d16"]).unwrap();
        assert_eq!(e.eval_with(&[100], &[1, 2]), 3);
    }

    #[test]
    fn expansion_is_bounded() {
        // Each level repeats the whole inner chain in WGSL: 2^200 without a bound.
        let mut src = "x".to_owned();
        for _ in 0..200 {
            src = format!("0 < ({src}) < 9");
        }
        check_error(&src, 0, "expression too large");
    }
}
