//! Rewrites of the operations on the host, before anything runs them:
//! constant folding at parse time, and the affine form (`offset + k0*x +
//! k1*y ...`) that lets [`Expr::compile`](super::Expr::compile) skip the
//! interpreter for most fill patterns.

use vkcopy::MAX_DIMS;

use super::vm::{exec, Bin, Op};

/// The affine form of `ops`, if they are one: coefficients up to the last
/// coordinate used, and the constant. Exact under wrapping, since wrapping
/// `+ - *` are ring operations on integers modulo 2^64.
pub(super) fn affine(ops: &[Op]) -> Option<(Vec<i64>, i64)> {
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
pub(super) fn fold(ops: Vec<Op>) -> Vec<Op> {
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

#[cfg(test)]
mod tests {
    use crate::expr::tests::{at, parse, CORPUS};
    use crate::expr::Kind;

    #[test]
    fn compiled_matches_eval() {
        let samples: [i64; 16] = [
            -1000,
            -65,
            -8,
            -3,
            -2,
            -1,
            0,
            1,
            2,
            3,
            7,
            40,
            55,
            56,
            255,
            1 << 40,
        ];
        for src in CORPUS {
            let e = parse(src);
            let c = e.compile();
            for &a in &samples {
                for &b in &samples {
                    let coords = [
                        a,
                        b,
                        a ^ b,
                        b.wrapping_sub(a),
                        a,
                        a,
                        a,
                        a,
                        a,
                        a,
                        a,
                        a,
                        a,
                        a,
                        a,
                        b,
                    ];
                    for len in [coords.len(), 2, 1, 0] {
                        let coords = &coords[..len];
                        assert_eq!(c.eval(coords), e.eval(coords), "{src:?} at {coords:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn compiled_affine() {
        // Affine forms take the fast path; check it really is the same function.
        for src in [
            "x + 256*y",
            "3*x + 2*y + z + 4*w",
            "-(x - 2) * 3 + y * (2 - 5)",
            "x - x",
        ] {
            assert!(
                matches!(parse(src).compile().kind, Kind::Affine { .. }),
                "{src}"
            );
        }
        assert!(matches!(parse("x * y").compile().kind, Kind::Ops { .. }));
        assert!(matches!(parse("2 * 3").compile().kind, Kind::Constant(6)));
        assert_eq!(at("-(x - 2) * 3 + y * (2 - 5)", &[4, 10]), -36);
    }
}
