//! WGSL text of an expression, for device kernels: `i32` arithmetic, with
//! Halide's division and modulo as functions of a prelude, and the limits that
//! keep the text inside what naga accepts.

use super::vm::{Bin, Op};

/// Deepest an expression of a device kernel may nest, in operations.
pub const MAX_WGSL_DEPTH: usize = 64;

/// Most operations an expression of a device kernel may expand to.
pub const MAX_WGSL_OPS: u64 = 1 << 14;

/// Deepest parenthesis nesting of the WGSL of an expression: naga's parser
/// stops at 200 levels of expressions and statements together.
const MAX_WGSL_PARENS: usize = 150;

/// A WGSL `i32` expression computing `ops` (which need `stack_slots` slots),
/// parenthesized when it is not a single term; `coord(d)` and `input(j)` give
/// the WGSL of coordinate `d` and input `j`.
pub(super) fn translate(
    ops: &[Op],
    stack_slots: usize,
    coord: &dyn Fn(usize) -> String,
    input: &dyn Fn(usize) -> String,
) -> String {
    let mut stack: Vec<Wgsl> = Vec::with_capacity(stack_slots);
    fn pop(stack: &mut Vec<Wgsl>) -> Wgsl {
        stack.pop().unwrap_or_else(|| Wgsl::literal(0))
    }
    for &op in ops {
        match op {
            Op::Lit(v) => stack.push(Wgsl::literal(v)),
            Op::Coord(_) | Op::Input(_) => {
                let text = match op {
                    Op::Coord(d) => coord(d),
                    Op::Input(j) => input(j),
                    _ => String::new(),
                };
                let atomic = !text.is_empty()
                    && text
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']'));
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

/// Whether `ops` fit a device kernel: not too deep, not too large once
/// expanded, and WGSL text that naga's nesting limit accepts.
pub(super) fn check(ops: &[Op], stack_slots: usize) -> Result<(), String> {
    let (depth, expanded) = tree(ops);
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
    let text = translate(ops, stack_slots, &|d| format!("c{d}"), &|_| "0i".to_owned());
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

/// `hl_div` and `hl_mod`, which [`translate`] calls.
pub(super) const PRELUDE: &str = "\
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

#[cfg(test)]
mod tests {
    use crate::expr::tests::parse;
    use crate::expr::vm::{div, rem};
    use crate::expr::Expr;

    fn wgsl(src: &str) -> String {
        parse(src).to_wgsl(&|d| {
            ["x", "y", "z", "w"]
                .get(d)
                .map_or(format!("c[{d}]"), |s| s.to_string())
        })
    }

    #[test]
    fn to_wgsl() {
        assert_eq!(wgsl("x + 256*y"), "(x + (256i * y))");
        assert_eq!(wgsl("x"), "x");
        assert_eq!(wgsl("(x)"), "x");
        assert_eq!(wgsl("-x"), "(-x)");
        assert_eq!(wgsl("-x - -y"), "((-x) - (-y))");
        assert_eq!(
            wgsl("((x+y)%8)*16 + 120"),
            "((hl_mod(x + y, 8i) * 16i) + 120i)"
        );
        assert_eq!(wgsl("x / -3"), "hl_div(x, -3i)");
        assert_eq!(
            wgsl("clamp(max(x, y), 20, 100)"),
            "max(min(max(x, y), 100i), 20i)"
        );
        assert_eq!(
            wgsl("x + 256*y + (7 if 40 <= x < 56 and 40 <= y < 56 else 0)"),
            "((x + (256i * y)) + select(0i, 7i, ((40i <= x) && (x < 56i)) && ((40i <= y) && (y < 56i))))"
        );
        assert_eq!(wgsl("x < y"), "i32(x < y)");
        assert_eq!(wgsl("not x"), "i32(x == 0i)");
        assert_eq!(wgsl("not x < 3"), "i32(!(x < 3i))");
        assert_eq!(wgsl("x and 2"), "i32((x != 0i) && (2i != 0i))");
        assert_eq!(
            wgsl("select(x, abs(y), d4)"),
            "select(c[4], abs(y), x != 0i)"
        );
        assert_eq!(wgsl("(x < 3) * 5"), "(i32(x < 3i) * 5i)");
        // Constants fold on the host; literals keep their low 32 bits.
        assert_eq!(wgsl("x + 2 * 3"), "(x + 6i)");
        assert_eq!(wgsl("2147483647 + 1"), "(-2147483647i - 1i)");
        assert_eq!(wgsl("x * 0x1_0000_0005"), "(x * 5i)");
        assert_eq!(wgsl("x - 2147483648 / 2"), "(x - 1073741824i)");
        assert_eq!(wgsl("-5"), "(-5i)");
        let custom = parse("x + y").to_wgsl(&|d| format!("i32(gid.{})", ["x", "y"][d]));
        assert_eq!(custom, "((i32(gid.x)) + (i32(gid.y)))");
        let prelude = Expr::wgsl_prelude();
        assert!(prelude.contains("fn hl_div(a: i32, b: i32) -> i32"));
        assert!(prelude.contains("fn hl_mod(a: i32, b: i32) -> i32"));
    }

    /// hl_div and hl_mod transcribed to Rust with i32 semantics as WGSL defines
    /// them, checked against the host on i32.
    #[test]
    fn wgsl_prelude_semantics() {
        fn hl_div(a: i32, b: i32) -> i32 {
            if b == 0 {
                return 0;
            }
            if b == -1 {
                return a.wrapping_neg();
            }
            let q = a / b;
            if a % b < 0 {
                if b > 0 {
                    return q - 1;
                }
                return q + 1;
            }
            q
        }
        fn hl_mod(a: i32, b: i32) -> i32 {
            if b == 0 || b == -1 {
                return 0;
            }
            let r = a % b;
            if r < 0 {
                return r.wrapping_add(b.wrapping_abs());
            }
            r
        }
        let samples = [
            i32::MIN,
            i32::MIN + 1,
            -1000,
            -9,
            -7,
            -2,
            -1,
            0,
            1,
            2,
            7,
            9,
            1000,
            i32::MAX,
        ];
        for a in samples {
            for b in samples {
                let (a64, b64) = (i64::from(a), i64::from(b));
                assert_eq!(hl_div(a, b), div(a64, b64) as i32, "{a} / {b}");
                assert_eq!(hl_mod(a, b), rem(a64, b64) as i32, "{a} % {b}");
            }
        }
    }
}
