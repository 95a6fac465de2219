//! The range of an expression's values over a box of coordinates, by interval
//! arithmetic: device kernels compute in `i32`, the host in `i64`, and the two
//! agree exactly when no value of the computation leaves `i32`.

use super::vm::{Bin, Op};
use super::Expr;

/// Inclusive bounds of a value, wide enough for any product of two `i64`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    lo: i128,
    hi: i128,
}

impl Range {
    fn point(v: i64) -> Range {
        Range {
            lo: v.into(),
            hi: v.into(),
        }
    }

    fn flag() -> Range {
        Range { lo: 0, hi: 1 }
    }

    fn union(self, o: Range) -> Range {
        Range {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }

    fn magnitude(self) -> i128 {
        self.lo.abs().max(self.hi.abs())
    }

    fn in_i32(self) -> bool {
        self.lo >= i32::MIN.into() && self.hi <= i32::MAX.into()
    }
}

fn bin(op: Bin, a: Range, b: Range) -> Range {
    match op {
        Bin::Add => Range {
            lo: a.lo + b.lo,
            hi: a.hi + b.hi,
        },
        Bin::Sub => Range {
            lo: a.lo - b.hi,
            hi: a.hi - b.lo,
        },
        Bin::Mul => {
            let p = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi];
            Range {
                lo: *p.iter().min().expect("four"),
                hi: *p.iter().max().expect("four"),
            }
        }
        // Euclidean division by a non-zero divisor is no larger than the
        // dividend; by zero it is 0.
        Bin::Div => Range {
            lo: -a.magnitude(),
            hi: a.magnitude(),
        },
        // Euclidean remainder: 0 to |b| - 1 (0 for a zero divisor).
        Bin::Mod => Range {
            lo: 0,
            hi: (b.magnitude() - 1).max(0),
        },
        Bin::Min => Range {
            lo: a.lo.min(b.lo),
            hi: a.hi.min(b.hi),
        },
        Bin::Max => Range {
            lo: a.lo.max(b.lo),
            hi: a.hi.max(b.hi),
        },
        Bin::And | Bin::Or => Range::flag(),
    }
}

impl Expr {
    /// Whether every value computed, the result included, stays inside `i32` for
    /// coordinates in `boxes` (inclusive bounds per dimension; dimensions past the
    /// end are 0), so that a device kernel (which computes in `i32`) gives what the
    /// host gives. Conservative: an error may name an expression that does stay
    /// inside at the coordinates actually used.
    pub fn fits_i32(&self, boxes: &[(i64, i64)]) -> Result<(), String> {
        let mut stack: Vec<Range> = Vec::with_capacity(self.stack);
        let pop = |s: &mut Vec<Range>| s.pop().unwrap_or(Range::point(0));
        for &op in &self.ops {
            match op {
                Op::Lit(v) => stack.push(Range::point(v)),
                Op::Coord(d) => {
                    stack.push(boxes.get(d).map_or(Range::point(0), |&(lo, hi)| Range {
                        lo: lo.into(),
                        hi: hi.into(),
                    }))
                }
                // A map's input: any i32.
                Op::Input(_) => stack.push(Range {
                    lo: i32::MIN.into(),
                    hi: i32::MAX.into(),
                }),
                Op::Neg => {
                    let a = pop(&mut stack);
                    stack.push(Range {
                        lo: -a.hi,
                        hi: -a.lo,
                    });
                }
                Op::Not => {
                    pop(&mut stack);
                    stack.push(Range::flag());
                }
                Op::Abs => {
                    let a = pop(&mut stack);
                    let lo = if a.lo <= 0 && a.hi >= 0 {
                        0
                    } else {
                        a.lo.abs().min(a.hi.abs())
                    };
                    stack.push(Range {
                        lo,
                        hi: a.magnitude(),
                    });
                }
                Op::Bin(b) => {
                    let (y, x) = (pop(&mut stack), pop(&mut stack));
                    stack.push(bin(b, x, y));
                }
                Op::Cmp(_) => {
                    pop(&mut stack);
                    pop(&mut stack);
                    stack.push(Range::flag());
                }
                Op::CmpKeep(_) => {
                    let b = pop(&mut stack);
                    pop(&mut stack);
                    stack.push(Range::flag());
                    stack.push(b);
                }
                Op::Clamp => {
                    let (hi, lo, v) = (pop(&mut stack), pop(&mut stack), pop(&mut stack));
                    let capped = bin(Bin::Min, v, hi);
                    stack.push(bin(Bin::Max, capped, lo));
                }
                Op::Select => {
                    let (b, a) = (pop(&mut stack), pop(&mut stack));
                    pop(&mut stack);
                    stack.push(a.union(b));
                }
            }
            let top = *stack.last().expect("an operation pushes");
            if !top.in_i32() {
                return Err(format!(
                    "`{}` may compute values from {} to {} (in the whole or a part) over these \
                     coordinates, past 32 bits; a device kernel computes in i32 (fill on the \
                     host for such values)",
                    self.source, top.lo, top.hi
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fits(src: &str, boxes: &[(i64, i64)]) -> bool {
        Expr::parse(src).unwrap().fits_i32(boxes).is_ok()
    }

    #[test]
    fn ranges_follow_the_operations() {
        let b = [(0, 99), (-5, 5)];
        assert!(fits("x + 256 * y", &b));
        assert!(fits("x * 21000000", &b));
        assert!(!fits("x * 22000000", &b));
        assert!(fits("2147483647 - x", &b));
        assert!(!fits("2147483647 + x", &b));
        assert!(!fits("-2147483648 - x", &b));
        assert!(fits("-2147483648 + x", &b));
        assert!(!fits("abs(-2147483648 + x)", &b));
        assert!(fits("(x * 21000000) / y", &b));
        assert!(fits("(x * 21000000) % 7 + 2147483640", &b));
        assert!(!fits("(x * 2147483647) % 7", &b));
        assert!(fits("min(x, 5) * 400000000", &b));
        assert!(!fits("max(x, 5) * 400000000", &b));
        assert!(fits("clamp(x, -3, 3) * 700000000", &b));
        assert!(fits("(x < 2147483647) * 2147483647", &b));
        assert!(!fits("2147483648", &b));
        // An intermediate value past 32 bits is refused even when the result is not.
        assert!(!fits("(x * 4294967296) / 4294967296", &b));
        // Coordinates past the box are 0.
        assert!(fits("z * 2147483647", &b));
        let e = Expr::parse("2147483647 + x")
            .unwrap()
            .fits_i32(&b)
            .unwrap_err();
        assert_eq!(
            e,
            "`2147483647 + x` may compute values from 2147483647 to 2147483746 (in the whole \
             or a part) over these coordinates, past 32 bits; a device kernel computes in i32 \
             (fill on the host for such values)"
        );
    }
}
