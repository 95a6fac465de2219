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

use std::fmt;
use std::str::FromStr;

/// Coordinate names there can be: one per buffer dimension.
pub use vkcopy::MAX_DIMS;

/// How deep parentheses and argument lists may nest: the parser recurses once
/// per level.
const MAX_NESTING: usize = 256;

/// Operations an expression may expand to once chained comparisons repeat
/// their middle operands, as they do in WGSL. Only hostile input gets close.
const MAX_EXPANDED: u64 = 1 << 20;

/// Deepest an expression of a device kernel may nest, in operations.
pub const MAX_WGSL_DEPTH: usize = 64;

/// Most operations an expression of a device kernel may expand to.
pub const MAX_WGSL_OPS: u64 = 1 << 14;

/// Deepest parenthesis nesting of the WGSL of an expression: naga's parser
/// stops at 200 levels of expressions and statements together.
const MAX_WGSL_PARENS: usize = 150;

/// Stack slots evaluation keeps on the native stack; deeper expressions use
/// the heap.
const INLINE_STACK: usize = 16;

const COORDINATES: &str = "coordinates are x, y, z, w, d4..d15";
const FUNCTIONS: &str = "functions are min, max, clamp, abs, select";
const KEYWORDS: [&str; 5] = ["and", "or", "not", "if", "else"];
const FUNCTION_NAMES: [&str; 5] = ["min", "max", "clamp", "abs", "select"];

/// Why an expression did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// Byte offset of the problem in the source.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl ExprError {
    fn new(offset: usize, message: impl Into<String>) -> Self {
        ExprError {
            offset,
            message: message.into(),
        }
    }
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.offset + 1, self.message)
    }
}

impl std::error::Error for ExprError {}

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
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

    fn symbol(self) -> &'static str {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bin {
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
fn div(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_div_euclid(b)
    }
}

/// Halide's modulo: never negative, and zero for a zero divisor.
fn rem(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_rem_euclid(b)
    }
}

/// One postfix operation. Operands are popped right first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Lit(i64),
    Coord(usize),
    /// Input `j` of [`Expr::parse_with`]'s names.
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
    fn arity(self) -> (usize, usize) {
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
fn exec(ops: &[Op], coords: &[i64], inputs: &[i64], stack: &mut [i64]) -> usize {
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
fn run(ops: &[Op], depth: usize, coords: &[i64], inputs: &[i64]) -> i64 {
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
        let mut parser = Parser {
            src,
            tokens: lex(src)?,
            pos: 0,
            ops: Vec::new(),
            depth: 0,
            inputs,
        };
        parser.expr()?;
        let t = parser.peek();
        match t.kind {
            Tok::End => {}
            Tok::RParen => return Err(ExprError::new(t.offset, "unmatched ')'")),
            _ => {
                return Err(ExprError::new(
                    t.offset,
                    format!("expected an operator, found {}", parser.found(t)),
                ))
            }
        }
        let ops = fold(parser.ops);
        let (stack, expanded) = measure(&ops);
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
        let word = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !word {
            return Err(format!(
                "'{name}' cannot be an input of an expression: names are letters, digits and _"
            ));
        }
        if coordinate(name).is_ok() {
            return Err(format!(
                "'{name}' is a coordinate, so it cannot name an input"
            ));
        }
        if KEYWORDS.contains(&name) || FUNCTION_NAMES.contains(&name) {
            return Err(format!(
                "'{name}' is a keyword or function, so it cannot name an input"
            ));
        }
        Ok(())
    }

    /// Whether input `j` is used.
    pub fn uses_input(&self, j: usize) -> bool {
        self.ops.contains(&Op::Input(j))
    }

    /// Prepares the expression for evaluation over a whole buffer.
    pub fn compile(&self) -> Compiled {
        let kind = if let Some(v) = self.is_constant() {
            Kind::Constant(v)
        } else if let Some((coefs, offset)) = affine(&self.ops) {
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
        let mut stack: Vec<Wgsl> = Vec::with_capacity(self.stack);
        fn pop(stack: &mut Vec<Wgsl>) -> Wgsl {
            stack.pop().unwrap_or_else(|| Wgsl::literal(0))
        }
        for &op in &self.ops {
            match op {
                Op::Lit(v) => stack.push(Wgsl::literal(v)),
                Op::Coord(_) | Op::Input(_) => {
                    let text = match op {
                        Op::Coord(d) => coord(d),
                        Op::Input(j) => input(j),
                        _ => String::new(),
                    };
                    let atomic = !text.is_empty()
                        && text.chars().all(|c| {
                            c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']')
                        });
                    stack.push(Wgsl {
                        text,
                        boolean: false,
                        atomic,
                    });
                }
                Op::Neg => {
                    let a = pop(&mut stack).into_int();
                    stack.push(Wgsl::arith(format!("-{}", a.operand())));
                }
                Op::Not => {
                    let a = pop(&mut stack);
                    stack.push(if a.boolean {
                        Wgsl::boolean(format!("!{}", a.operand()))
                    } else {
                        Wgsl::boolean(format!("{} == 0i", a.operand()))
                    });
                }
                Op::Abs => {
                    let a = pop(&mut stack).into_int();
                    stack.push(Wgsl::call(format!("abs({})", a.text)));
                }
                Op::Bin(bin) => {
                    let b = pop(&mut stack);
                    let a = pop(&mut stack);
                    stack.push(match bin {
                        Bin::And | Bin::Or => {
                            let symbol = if bin == Bin::And { "&&" } else { "||" };
                            let (a, b) = (a.into_bool(), b.into_bool());
                            Wgsl::boolean(format!("{} {symbol} {}", a.operand(), b.operand()))
                        }
                        Bin::Add | Bin::Sub | Bin::Mul => {
                            let symbol = match bin {
                                Bin::Add => "+",
                                Bin::Sub => "-",
                                _ => "*",
                            };
                            let (a, b) = (a.into_int(), b.into_int());
                            Wgsl::arith(format!("{} {symbol} {}", a.operand(), b.operand()))
                        }
                        Bin::Div | Bin::Mod | Bin::Min | Bin::Max => {
                            let name = match bin {
                                Bin::Div => "hl_div",
                                Bin::Mod => "hl_mod",
                                Bin::Min => "min",
                                _ => "max",
                            };
                            let (a, b) = (a.into_int(), b.into_int());
                            Wgsl::call(format!("{name}({}, {})", a.text, b.text))
                        }
                    });
                }
                Op::Cmp(cmp) | Op::CmpKeep(cmp) => {
                    let b = pop(&mut stack).into_int();
                    let a = pop(&mut stack).into_int();
                    stack.push(Wgsl::boolean(format!(
                        "{} {} {}",
                        a.operand(),
                        cmp.symbol(),
                        b.operand()
                    )));
                    // WGSL has no chains: the next link repeats the operand.
                    if let Op::CmpKeep(_) = op {
                        stack.push(b);
                    }
                }
                Op::Clamp => {
                    let hi = pop(&mut stack).into_int();
                    let lo = pop(&mut stack).into_int();
                    let v = pop(&mut stack).into_int();
                    // Not WGSL's clamp, which is min(max(v, lo), hi) and rejects
                    // constant lo > hi.
                    stack.push(Wgsl::call(format!(
                        "max(min({}, {}), {})",
                        v.text, hi.text, lo.text
                    )));
                }
                Op::Select => {
                    let b = pop(&mut stack).into_int();
                    let a = pop(&mut stack).into_int();
                    let cond = pop(&mut stack).into_bool();
                    stack.push(Wgsl::call(format!(
                        "select({}, {}, {})",
                        b.text, a.text, cond.text
                    )));
                }
            }
        }
        pop(&mut stack).into_int().operand()
    }

    /// Checks that the expression fits a device kernel: at most
    /// [`MAX_WGSL_DEPTH`] operations deep and [`MAX_WGSL_OPS`] operations
    /// expanded. Without this check, [`Expr::to_wgsl`] of a deep expression
    /// gives WGSL that naga rejects.
    pub fn check_wgsl(&self) -> Result<(), String> {
        let (depth, expanded) = tree(&self.ops);
        if depth > MAX_WGSL_DEPTH {
            return Err(format!(
                "nests {depth} operations deep (each link of a chain such as x + x + x counts \
                 one); a device kernel takes at most {MAX_WGSL_DEPTH}"
            ));
        }
        if expanded > MAX_WGSL_OPS {
            return Err(format!(
                "{expanded} operations once chained comparisons are expanded; a device kernel \
                 takes at most {MAX_WGSL_OPS}"
            ));
        }
        let text = self.to_wgsl(&|d| format!("c{d}"));
        let parens = text
            .bytes()
            .scan(0usize, |open, b| {
                match b {
                    b'(' => *open += 1,
                    b')' => *open = open.saturating_sub(1),
                    _ => {}
                }
                Some(*open)
            })
            .max()
            .unwrap_or(0);
        if parens > MAX_WGSL_PARENS {
            return Err(format!(
                "nests {parens} parentheses deep once written as WGSL; a device kernel takes \
                 at most {MAX_WGSL_PARENS} (fewer nested comparisons, clamps or conditions)"
            ));
        }
        Ok(())
    }

    /// WGSL functions [`Expr::to_wgsl`] calls: `hl_div` and `hl_mod`, Halide's
    /// division and modulo on `i32`.
    pub fn wgsl_prelude() -> &'static str {
        WGSL_PRELUDE
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
        let x0 = coords.first().copied().unwrap_or(0);
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
            // Too short to pay for setting up the lanes.
            Kind::Ops { ops, stack } if out.len() < LANES / 4 => {
                // Coordinates past MAX_DIMS are never used.
                let mut at = [0; MAX_DIMS];
                let n = coords.len().min(MAX_DIMS);
                at[..n].copy_from_slice(&coords[..n]);
                for (i, o) in out.iter_mut().enumerate() {
                    at[0] = x0.wrapping_add(i as i64);
                    *o = run(ops, *stack, &at, &[]);
                }
            }
            Kind::Ops { ops, stack } => {
                let mut inline = [[0; LANES]; INLINE_LANE_STACK];
                let mut heap = Vec::new();
                let lanes: &mut [Lanes] = if *stack <= INLINE_LANE_STACK {
                    &mut inline
                } else {
                    heap.resize(*stack, [0; LANES]);
                    &mut heap
                };
                for (chunk, out) in out.chunks_mut(LANES).enumerate() {
                    let x = x0.wrapping_add((chunk * LANES) as i64);
                    exec_lanes(ops, coords, x, lanes);
                    out.copy_from_slice(&lanes[0][..out.len()]);
                }
            }
        }
    }
}

/// Elements [`Compiled::eval_row`] computes per operation.
const LANES: usize = 64;

/// Lane stack slots kept on the native stack (4 KiB).
const INLINE_LANE_STACK: usize = 8;

type Lanes = [i64; LANES];

/// [`exec`] over [`LANES`] elements whose coordinate 0 is `x0, x0 + 1, ...`.
fn exec_lanes(ops: &[Op], coords: &[i64], x0: i64, stack: &mut [Lanes]) {
    let mut sp = 0;
    for &op in ops {
        match op {
            Op::Lit(v) => {
                stack[sp] = [v; LANES];
                sp += 1;
            }
            Op::Coord(0) => {
                for (i, v) in stack[sp].iter_mut().enumerate() {
                    *v = x0.wrapping_add(i as i64);
                }
                sp += 1;
            }
            Op::Coord(d) => {
                stack[sp] = [coords.get(d).copied().unwrap_or(0); LANES];
                sp += 1;
            }
            // Compiled expressions read no inputs (as Expr::eval).
            Op::Input(_) => {
                stack[sp] = [0; LANES];
                sp += 1;
            }
            Op::Neg => map1(&mut stack[sp - 1], i64::wrapping_neg),
            Op::Not => map1(&mut stack[sp - 1], |a| i64::from(a == 0)),
            Op::Abs => map1(&mut stack[sp - 1], i64::wrapping_abs),
            Op::Bin(bin) => {
                sp -= 1;
                let (a, b) = pair(stack, sp - 1);
                match bin {
                    Bin::Add => map2(a, b, i64::wrapping_add),
                    Bin::Sub => map2(a, b, i64::wrapping_sub),
                    Bin::Mul => map2(a, b, i64::wrapping_mul),
                    Bin::Div => map2(a, b, div),
                    Bin::Mod => map2(a, b, rem),
                    Bin::Min => map2(a, b, i64::min),
                    Bin::Max => map2(a, b, i64::max),
                    Bin::And => map2(a, b, |a, b| i64::from(a != 0 && b != 0)),
                    Bin::Or => map2(a, b, |a, b| i64::from(a != 0 || b != 0)),
                }
            }
            Op::Cmp(cmp) => {
                sp -= 1;
                let (a, b) = pair(stack, sp - 1);
                compare(cmp, a, b);
            }
            Op::CmpKeep(cmp) => {
                let (a, b) = pair(stack, sp - 2);
                compare(cmp, a, b);
            }
            Op::Clamp => {
                sp -= 2;
                let (v, rest) = stack[sp - 1..].split_at_mut(1);
                for ((v, lo), hi) in v[0].iter_mut().zip(&rest[0]).zip(&rest[1]) {
                    *v = (*v).min(*hi).max(*lo);
                }
            }
            Op::Select => {
                sp -= 2;
                let (c, rest) = stack[sp - 1..].split_at_mut(1);
                for ((c, a), b) in c[0].iter_mut().zip(&rest[0]).zip(&rest[1]) {
                    *c = if *c != 0 { *a } else { *b };
                }
            }
        }
    }
}

/// Slot `i` mutably and slot `i + 1`.
#[inline(always)]
fn pair(stack: &mut [Lanes], i: usize) -> (&mut Lanes, &Lanes) {
    let (a, b) = stack[i..].split_at_mut(1);
    (&mut a[0], &b[0])
}

#[inline(always)]
fn map1(a: &mut Lanes, f: impl Fn(i64) -> i64) {
    for a in a {
        *a = f(*a);
    }
}

#[inline(always)]
fn map2(a: &mut Lanes, b: &Lanes, f: impl Fn(i64, i64) -> i64) {
    for (a, b) in a.iter_mut().zip(b) {
        *a = f(*a, *b);
    }
}

fn compare(cmp: Cmp, a: &mut Lanes, b: &Lanes) {
    match cmp {
        Cmp::Lt => map2(a, b, |a, b| i64::from(a < b)),
        Cmp::Le => map2(a, b, |a, b| i64::from(a <= b)),
        Cmp::Gt => map2(a, b, |a, b| i64::from(a > b)),
        Cmp::Ge => map2(a, b, |a, b| i64::from(a >= b)),
        Cmp::Eq => map2(a, b, |a, b| i64::from(a == b)),
        Cmp::Ne => map2(a, b, |a, b| i64::from(a != b)),
    }
}

/// The affine form of `ops`, if they are one: coefficients up to the last
/// coordinate used, and the constant. Exact under wrapping, since wrapping
/// `+ - *` are ring operations on integers modulo 2^64.
fn affine(ops: &[Op]) -> Option<(Vec<i64>, i64)> {
    // Slot MAX_DIMS holds the constant.
    type Form = [i64; MAX_DIMS + 1];
    let is_constant = |f: &Form| f[..MAX_DIMS].iter().all(|&k| k == 0);
    let mut stack: Vec<Form> = Vec::new();
    for &op in ops {
        match op {
            Op::Lit(v) => {
                let mut f = [0; MAX_DIMS + 1];
                f[MAX_DIMS] = v;
                stack.push(f);
            }
            Op::Coord(d) => {
                let mut f = [0; MAX_DIMS + 1];
                *f.get_mut(d)? = 1;
                stack.push(f);
            }
            Op::Neg => {
                let f = stack.last_mut()?;
                *f = f.map(i64::wrapping_neg);
            }
            Op::Bin(bin @ (Bin::Add | Bin::Sub | Bin::Mul)) => {
                let b = stack.pop()?;
                let a = stack.last_mut()?;
                match bin {
                    Bin::Add => a
                        .iter_mut()
                        .zip(b)
                        .for_each(|(a, b)| *a = a.wrapping_add(b)),
                    Bin::Sub => a
                        .iter_mut()
                        .zip(b)
                        .for_each(|(a, b)| *a = a.wrapping_sub(b)),
                    _ => {
                        let (form, k) = if is_constant(&b) {
                            (*a, b[MAX_DIMS])
                        } else if is_constant(a) {
                            (b, a[MAX_DIMS])
                        } else {
                            return None;
                        };
                        *a = form.map(|c| c.wrapping_mul(k));
                    }
                }
            }
            _ => return None,
        }
    }
    let f = stack.pop()?;
    let used = f[..MAX_DIMS]
        .iter()
        .rposition(|&k| k != 0)
        .map_or(0, |d| d + 1);
    Some((f[..used].to_vec(), f[MAX_DIMS]))
}

/// Replaces every operation whose operands are all literals by its result, so
/// constants cost nothing per element and WGSL never sees constant arithmetic
/// (which shader compilers evaluate strictly, rejecting overflow).
fn fold(ops: Vec<Op>) -> Vec<Op> {
    let mut out: Vec<Op> = Vec::with_capacity(ops.len());
    // Per stack slot: whether it is a literal that is its own op at the end of `out`.
    let mut literal: Vec<bool> = Vec::new();
    for op in ops {
        let (pops, pushes) = op.arity();
        let base = literal.len().saturating_sub(pops);
        if pops > 0 && literal[base..].iter().all(|&l| l) {
            let mut code = out.split_off(out.len().saturating_sub(pops));
            code.push(op);
            let mut stack = [0; 4];
            let n = exec(&code, &[], &[], &mut stack);
            out.extend(stack[..n].iter().map(|&v| Op::Lit(v)));
            literal.truncate(base);
            literal.extend(std::iter::repeat_n(true, n));
        } else {
            out.push(op);
            literal.truncate(base);
            literal.push(matches!(op, Op::Lit(_)));
            // The operand CmpKeep pushes back shares code with its result.
            literal.extend(std::iter::repeat_n(false, pushes - 1));
        }
    }
    out
}

/// The stack slots `ops` need, and their size with chained comparisons
/// expanded (middle operands twice).
fn measure(ops: &[Op]) -> (usize, u64) {
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

/// The depth of the tree of `ops` in operations, and its size with chained
/// comparisons expanded.
fn tree(ops: &[Op]) -> (usize, u64) {
    // (depth, size) per stack slot.
    let mut slots: Vec<(usize, u64)> = Vec::new();
    for &op in ops {
        let (pops, _) = op.arity();
        let base = slots.len().saturating_sub(pops);
        let kept = slots.last().copied().unwrap_or((0, 0));
        let node = slots[base..]
            .iter()
            .fold((1usize, 1u64), |(d, n), &(cd, cn)| {
                (d.max(cd + 1), n.saturating_add(cn))
            });
        slots.truncate(base);
        slots.push(node);
        if let Op::CmpKeep(_) = op {
            slots.push(kept);
        }
    }
    slots.first().copied().unwrap_or((0, 0))
}

/// A piece of WGSL under construction.
struct Wgsl {
    text: String,
    /// A `bool`, rather than an `i32`.
    boolean: bool,
    /// Safe as an operand without parentheses.
    atomic: bool,
}

impl Wgsl {
    fn arith(text: String) -> Self {
        Wgsl {
            text,
            boolean: false,
            atomic: false,
        }
    }

    fn call(text: String) -> Self {
        Wgsl {
            text,
            boolean: false,
            atomic: true,
        }
    }

    fn boolean(text: String) -> Self {
        Wgsl {
            text,
            boolean: true,
            atomic: false,
        }
    }

    /// Keeps the low 32 bits, as `i32` arithmetic would.
    fn literal(v: i64) -> Self {
        match v as i32 {
            // 2147483648i is out of range, so build the minimum.
            i32::MIN => Wgsl::arith("-2147483647i - 1i".to_owned()),
            v if v < 0 => Wgsl::arith(format!("-{}i", v.unsigned_abs())),
            v => Wgsl::call(format!("{v}i")),
        }
    }

    fn operand(&self) -> String {
        if self.atomic {
            self.text.clone()
        } else {
            format!("({})", self.text)
        }
    }

    fn into_int(self) -> Self {
        if self.boolean {
            Wgsl::call(format!("i32({})", self.text))
        } else {
            self
        }
    }

    fn into_bool(self) -> Self {
        if self.boolean {
            self
        } else {
            Wgsl::boolean(format!("{} != 0i", self.operand()))
        }
    }
}

const WGSL_PRELUDE: &str = "\
// Halide's integer division: Euclidean (the remainder is never negative), so it
// rounds down for positive divisors; x / 0 == 0.
fn hl_div(a: i32, b: i32) -> i32 {
    if b == 0i { return 0i; }
    if b == -1i { return -a; }
    let q = a / b;
    if a % b < 0i {
        if b > 0i { return q - 1i; }
        return q + 1i;
    }
    return q;
}

// Halide's integer modulo: never negative; x % 0 == 0.
fn hl_mod(a: i32, b: i32) -> i32 {
    if b == 0i || b == -1i { return 0i; }
    let r = a % b;
    // Wraps when b is i32's minimum, giving the right answer.
    if r < 0i { return r + abs(b); }
    return r;
}
";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    /// Up to u64: 2^63 is valid after a unary minus.
    Int(u64),
    Name(&'a str),
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    LParen,
    RParen,
    Comma,
    Cmp(Cmp),
    End,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    kind: Tok<'a>,
    offset: usize,
    len: usize,
}

fn lex(src: &str) -> Result<Vec<Token<'_>>, ExprError> {
    let bytes = src.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    // Only ASCII is consumed, so `i` stays on a char boundary.
    while let Some(&c) = bytes.get(i) {
        let start = i;
        let next = bytes.get(i + 1).copied();
        let (kind, len) = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'0'..=b'9' => {
                let len = bytes[i..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                    .count();
                let text = &src[i..i + len];
                if bytes.get(i + len) == Some(&b'.')
                    && bytes.get(i + len + 1).is_some_and(u8::is_ascii_digit)
                {
                    return Err(ExprError::new(
                        start,
                        "floating-point numbers are not supported",
                    ));
                }
                (
                    Tok::Int(int_literal(text).map_err(|m| ExprError::new(start, m))?),
                    len,
                )
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let len = bytes[i..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                    .count();
                (Tok::Name(&src[i..i + len]), len)
            }
            b'+' => (Tok::Plus, 1),
            b'-' => (Tok::Minus, 1),
            b'*' => (Tok::Star, 1),
            b'/' if next == Some(b'/') => {
                return Err(ExprError::new(
                    start,
                    "'//' is not an operator; '/' already divides integers",
                ))
            }
            b'/' => (Tok::Slash, 1),
            b'%' => (Tok::Percent, 1),
            b'(' => (Tok::LParen, 1),
            b')' => (Tok::RParen, 1),
            b',' => (Tok::Comma, 1),
            b'<' if next == Some(b'=') => (Tok::Cmp(Cmp::Le), 2),
            b'<' => (Tok::Cmp(Cmp::Lt), 1),
            b'>' if next == Some(b'=') => (Tok::Cmp(Cmp::Ge), 2),
            b'>' => (Tok::Cmp(Cmp::Gt), 1),
            b'=' if next == Some(b'=') => (Tok::Cmp(Cmp::Eq), 2),
            b'!' if next == Some(b'=') => (Tok::Cmp(Cmp::Ne), 2),
            b'=' => return Err(ExprError::new(start, "'=' is not an operator; use '=='")),
            b'!' => return Err(ExprError::new(start, "'!' is not an operator; use 'not'")),
            b'&' if next == Some(b'&') => {
                return Err(ExprError::new(start, "'&&' is not an operator; use 'and'"))
            }
            b'|' if next == Some(b'|') => {
                return Err(ExprError::new(start, "'||' is not an operator; use 'or'"))
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(ExprError::new(
                    start,
                    format!("unexpected character '{ch}'"),
                ));
            }
        };
        tokens.push(Token {
            kind,
            offset: start,
            len,
        });
        i += len;
    }
    tokens.push(Token {
        kind: Tok::End,
        offset: src.len(),
        len: 0,
    });
    Ok(tokens)
}

/// The value of a decimal or `0x` literal, `_` allowed between digits.
fn int_literal(text: &str) -> Result<u64, String> {
    let invalid = || format!("invalid integer literal '{text}'");
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None if text.len() > 1 && text.starts_with('0') => {
            return Err(format!(
                "invalid integer literal '{text}': no leading zeros (hex is 0x...)"
            ))
        }
        None => (text, 10),
    };
    if digits.is_empty() || digits.starts_with('_') {
        return Err(invalid());
    }
    let mut value: u64 = 0;
    for c in digits.chars().filter(|&c| c != '_') {
        let digit = c.to_digit(radix).ok_or_else(invalid)?;
        value = value
            .checked_mul(radix.into())
            .and_then(|v| v.checked_add(digit.into()))
            .ok_or_else(too_large)?;
    }
    Ok(value)
}

fn too_large() -> String {
    format!("integer literal too large; the largest is {}", i64::MAX)
}

/// The dimension of coordinate `name`.
fn coordinate(name: &str) -> Result<usize, String> {
    match name {
        "x" => return Ok(0),
        "y" => return Ok(1),
        "z" => return Ok(2),
        "w" => return Ok(3),
        _ => {}
    }
    let digits = name.strip_prefix('d').unwrap_or("");
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits.len() == 1 || !digits.starts_with('0'));
    if canonical {
        return match digits.parse::<usize>() {
            Ok(d) if (4..MAX_DIMS).contains(&d) => Ok(d),
            Ok(d) if d < 4 => Err(format!("'{name}' is written '{}'", ["x", "y", "z", "w"][d])),
            _ => Err(format!("no coordinate '{name}'; {COORDINATES}")),
        };
    }
    if KEYWORDS.contains(&name) {
        return Err(format!("expected an operand, found '{name}'"));
    }
    if FUNCTION_NAMES.contains(&name) {
        return Err(format!("'{name}' is a function; call it as {name}(...)"));
    }
    Err(format!("unknown name '{name}'; {COORDINATES}"))
}

/// Recursive descent emitting postfix ops. Only parentheses and argument lists
/// recurse; operator chains, `not`s, unary minuses and `else` branches loop.
struct Parser<'a> {
    src: &'a str,
    /// Ends with `Tok::End`.
    tokens: Vec<Token<'a>>,
    pos: usize,
    ops: Vec<Op>,
    depth: usize,
    /// Names that are inputs.
    inputs: &'a [&'a str],
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        let last = self.tokens.len().saturating_sub(1);
        self.tokens
            .get(self.pos.min(last))
            .copied()
            .unwrap_or(Token {
                kind: Tok::End,
                offset: self.src.len(),
                len: 0,
            })
    }

    /// Returns the next token and moves past it, staying at the end.
    fn bump(&mut self) -> Token<'a> {
        let t = self.peek();
        if t.kind != Tok::End {
            self.pos += 1;
        }
        t
    }

    fn at_keyword(&self, keyword: &str) -> bool {
        matches!(self.peek().kind, Tok::Name(name) if name == keyword)
    }

    fn found(&self, t: Token<'_>) -> String {
        match t.kind {
            Tok::End => "the end of the expression".to_owned(),
            _ => format!(
                "'{}'",
                self.src.get(t.offset..t.offset + t.len).unwrap_or("?")
            ),
        }
    }

    /// expr := or_test ('if' or_test 'else' or_test)*, grouping to the right.
    fn expr(&mut self) -> Result<(), ExprError> {
        let mut selects = 0;
        loop {
            let start = self.ops.len();
            self.or_test()?;
            if !self.at_keyword("if") {
                break;
            }
            self.bump();
            let cond = self.ops.len();
            self.or_test()?;
            let t = self.peek();
            if !self.at_keyword("else") {
                return Err(ExprError::new(
                    t.offset,
                    format!("expected 'else', found {}", self.found(t)),
                ));
            }
            self.bump();
            // Select pops the condition first, so it must come before the value.
            self.ops[start..].rotate_left(cond - start);
            selects += 1;
        }
        self.ops.extend(std::iter::repeat_n(Op::Select, selects));
        Ok(())
    }

    fn or_test(&mut self) -> Result<(), ExprError> {
        self.and_test()?;
        while self.at_keyword("or") {
            self.bump();
            self.and_test()?;
            self.ops.push(Op::Bin(Bin::Or));
        }
        Ok(())
    }

    fn and_test(&mut self) -> Result<(), ExprError> {
        self.not_test()?;
        while self.at_keyword("and") {
            self.bump();
            self.not_test()?;
            self.ops.push(Op::Bin(Bin::And));
        }
        Ok(())
    }

    fn not_test(&mut self) -> Result<(), ExprError> {
        let mut nots = 0;
        while self.at_keyword("not") {
            self.bump();
            nots += 1;
        }
        self.comparison()?;
        // `not not a` is `a != 0`; more pairs change nothing.
        let keep = if nots == 0 { 0 } else { 2 - nots % 2 };
        self.ops.extend(std::iter::repeat_n(Op::Not, keep));
        Ok(())
    }

    fn comparison(&mut self) -> Result<(), ExprError> {
        self.sum()?;
        let mut links = 0;
        while let Tok::Cmp(cmp) = self.peek().kind {
            self.bump();
            self.sum()?;
            links += 1;
            // `a < b < c` is `a < b and b < c`, evaluating `b` once.
            if let Tok::Cmp(_) = self.peek().kind {
                self.ops.push(Op::CmpKeep(cmp));
            } else {
                self.ops.push(Op::Cmp(cmp));
            }
        }
        let ands = links.max(1) - 1;
        self.ops
            .extend(std::iter::repeat_n(Op::Bin(Bin::And), ands));
        Ok(())
    }

    fn sum(&mut self) -> Result<(), ExprError> {
        self.term()?;
        loop {
            let bin = match self.peek().kind {
                Tok::Plus => Bin::Add,
                Tok::Minus => Bin::Sub,
                _ => return Ok(()),
            };
            self.bump();
            self.term()?;
            self.ops.push(Op::Bin(bin));
        }
    }

    fn term(&mut self) -> Result<(), ExprError> {
        self.unary()?;
        loop {
            let bin = match self.peek().kind {
                Tok::Star => Bin::Mul,
                Tok::Slash => Bin::Div,
                Tok::Percent => Bin::Mod,
                _ => return Ok(()),
            };
            self.bump();
            self.unary()?;
            self.ops.push(Op::Bin(bin));
        }
    }

    fn unary(&mut self) -> Result<(), ExprError> {
        let mut negs = 0;
        while self.peek().kind == Tok::Minus {
            self.bump();
            negs += 1;
        }
        if negs > 0 && self.peek().kind == Tok::Int(1 << 63) {
            // i64's minimum is only reachable as a negated literal.
            self.bump();
            self.ops.push(Op::Lit(i64::MIN));
            negs -= 1;
        } else {
            self.primary()?;
        }
        if negs % 2 == 1 {
            self.ops.push(Op::Neg);
        }
        Ok(())
    }

    fn primary(&mut self) -> Result<(), ExprError> {
        let t = self.bump();
        match t.kind {
            Tok::Int(v) => {
                let v = i64::try_from(v).map_err(|_| ExprError::new(t.offset, too_large()))?;
                self.ops.push(Op::Lit(v));
                Ok(())
            }
            Tok::LParen => {
                self.enter(t)?;
                self.expr()?;
                self.depth -= 1;
                self.close(t, "')'")
            }
            Tok::Name(name) if self.peek().kind == Tok::LParen && !KEYWORDS.contains(&name) => {
                self.call(t, name)
            }
            Tok::Name(name) => {
                if let Some(j) = self.inputs.iter().position(|&i| i == name) {
                    self.ops.push(Op::Input(j));
                    return Ok(());
                }
                let d = coordinate(name).map_err(|m| {
                    let m = if self.inputs.is_empty() || !m.starts_with("unknown name") {
                        m
                    } else {
                        format!("{m}; inputs are {}", self.inputs.join(", "))
                    };
                    ExprError::new(t.offset, m)
                })?;
                self.ops.push(Op::Coord(d));
                Ok(())
            }
            Tok::End if self.src.trim().is_empty() => Err(ExprError::new(0, "empty expression")),
            _ => Err(ExprError::new(
                t.offset,
                format!("expected an operand, found {}", self.found(t)),
            )),
        }
    }

    fn call(&mut self, name_token: Token<'a>, name: &str) -> Result<(), ExprError> {
        let (op, arity) = match name {
            "min" => (Op::Bin(Bin::Min), 2),
            "max" => (Op::Bin(Bin::Max), 2),
            "clamp" => (Op::Clamp, 3),
            "abs" => (Op::Abs, 1),
            "select" => (Op::Select, 3),
            _ => {
                return Err(ExprError::new(
                    name_token.offset,
                    format!("unknown function '{name}'; {FUNCTIONS}"),
                ))
            }
        };
        let open = self.bump();
        self.enter(open)?;
        let mut args = 0;
        if self.peek().kind != Tok::RParen {
            loop {
                self.expr()?;
                args += 1;
                if self.peek().kind != Tok::Comma {
                    break;
                }
                self.bump();
            }
        }
        self.depth -= 1;
        self.close(open, "',' or ')'")?;
        if args != arity {
            let plural = if arity == 1 { "" } else { "s" };
            return Err(ExprError::new(
                name_token.offset,
                format!("{name} takes {arity} argument{plural}, got {args}"),
            ));
        }
        self.ops.push(op);
        Ok(())
    }

    /// Enters the group `open` starts, refusing to nest too deep.
    fn enter(&mut self, open: Token<'_>) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(ExprError::new(
                open.offset,
                format!("nested too deeply; the limit is {MAX_NESTING} levels"),
            ));
        }
        Ok(())
    }

    /// Consumes the ')' closing the group `open` started.
    fn close(&mut self, open: Token<'_>, expected: &str) -> Result<(), ExprError> {
        let t = self.peek();
        match t.kind {
            Tok::RParen => {
                self.bump();
                Ok(())
            }
            Tok::End => Err(ExprError::new(open.offset, "unclosed '('")),
            _ => Err(ExprError::new(
                t.offset,
                format!("expected {expected}, found {}", self.found(t)),
            )),
        }
    }
}

mod range;
#[cfg(test)]
mod tests;
