//! The lane evaluator behind [`Compiled::eval_row`](super::Compiled::eval_row):
//! each operation runs over [`LANES`] consecutive elements of a row at once,
//! so dispatching on operations is paid once per chunk rather than per value.

use vkcopy::MAX_DIMS;

use super::vm::{div, rem, run, Bin, Cmp, Op};

/// Elements computed per operation.
const LANES: usize = 64;

/// Lane stack slots kept on the native stack (4 KiB).
const INLINE_LANE_STACK: usize = 8;

type Lanes = [i64; LANES];

/// `out[i]` is the value of `ops` (which need `stack` slots) at `coords`
/// with coordinate 0 advanced by `i`, from 0 if `coords` is empty.
pub(super) fn eval_row(ops: &[Op], stack: usize, coords: &[i64], out: &mut [i64]) {
    let x0 = coords.first().copied().unwrap_or(0);
    // Too short to pay for setting up the lanes.
    if out.len() < LANES / 4 {
        // Coordinates past MAX_DIMS are never used.
        let mut at = [0; MAX_DIMS];
        let n = coords.len().min(MAX_DIMS);
        at[..n].copy_from_slice(&coords[..n]);
        for (i, o) in out.iter_mut().enumerate() {
            at[0] = x0.wrapping_add(i as i64);
            *o = run(ops, stack, &at, &[]);
        }
        return;
    }
    let mut inline = [[0; LANES]; INLINE_LANE_STACK];
    let mut heap = Vec::new();
    let lanes: &mut [Lanes] = if stack <= INLINE_LANE_STACK {
        &mut inline
    } else {
        heap.resize(stack, [0; LANES]);
        &mut heap
    };
    for (chunk, out) in out.chunks_mut(LANES).enumerate() {
        let x = x0.wrapping_add((chunk * LANES) as i64);
        exec_lanes(ops, coords, x, lanes);
        out.copy_from_slice(&lanes[0][..out.len()]);
    }
}

/// [`exec`](super::vm::exec) over [`LANES`] elements whose coordinate 0 is `x0, x0 + 1, ...`.
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

#[cfg(test)]
mod tests {
    use crate::expr::tests::{parse, CORPUS};

    #[test]
    fn eval_row_matches_eval() {
        let starts = [-1000, -70, -1, 0, 3, 50, i64::MAX - 40];
        for src in CORPUS
            .iter()
            .chain(&["x", "x * x", "40 <= x < 56", "(x + y) % 7"])
        {
            let e = parse(src);
            let c = e.compile();
            for len in [0, 1, 15, 16, 17, 64, 65, 200] {
                for x0 in starts {
                    for rest in [&[][..], &[7][..], &[-3, 2, 1, 0, 5][..]] {
                        let mut coords = vec![x0];
                        coords.extend_from_slice(rest);
                        let mut row = vec![i64::MIN + 1; len];
                        c.eval_row(&coords, &mut row);
                        for (i, &v) in row.iter().enumerate() {
                            coords[0] = x0.wrapping_add(i as i64);
                            assert_eq!(v, e.eval(&coords), "{src:?} at {coords:?}");
                        }
                    }
                }
            }
            // No coordinates: dimension 0 starts at 0, the others are 0.
            let mut row = vec![0; 100];
            c.eval_row(&[], &mut row);
            for (i, &v) in row.iter().enumerate() {
                assert_eq!(v, e.eval(&[i as i64]), "{src:?} at {i}");
            }
        }
        // Deeper than the inline lane stack.
        let deep = parse("x + (x + (x + (x + (x + (x + (x + (x + (x + (x * x)))))))))");
        let mut row = vec![0; 130];
        deep.compile().eval_row(&[-5, 1], &mut row);
        for (i, &v) in row.iter().enumerate() {
            assert_eq!(v, deep.eval(&[-5 + i as i64]));
        }
    }
}
