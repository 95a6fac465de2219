use super::parse::MAX_NESTING;
use super::vm::{div, rem};
use super::*;

fn parse(src: &str) -> Expr {
    Expr::parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"))
}

/// Value of `src` at `coords`, checking that `Compiled` agrees.
fn at(src: &str, coords: &[i64]) -> i64 {
    let e = parse(src);
    let v = e.eval(coords);
    assert_eq!(e.compile().eval(coords), v, "{src:?} at {coords:?}");
    v
}

fn value(src: &str) -> i64 {
    at(src, &[])
}

fn error(src: &str) -> ExprError {
    match Expr::parse(src) {
        Ok(e) => panic!("{src:?} parsed as {e:?}"),
        Err(e) => e,
    }
}

/// Checks the offset and that the message contains `message`.
fn check_error(src: &str, offset: usize, message: &str) {
    let e = error(src);
    assert_eq!(e.offset, offset, "{src:?}: {e}");
    assert!(e.message.contains(message), "{src:?}: {e}");
}

#[test]
fn literals() {
    assert_eq!(value("42"), 42);
    assert_eq!(value("0"), 0);
    assert_eq!(value("0x1F"), 31);
    assert_eq!(value("0Xff"), 255);
    assert_eq!(value("1_000_000"), 1_000_000);
    assert_eq!(value("0xFF_FF"), 0xffff);
    assert_eq!(value("9223372036854775807"), i64::MAX);
    assert_eq!(value("-9223372036854775808"), i64::MIN);
    assert_eq!(value("0x7fff_ffff_ffff_ffff"), i64::MAX);
    assert_eq!(value(" \t\n 7 \r\n"), 7);
}

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
fn comparisons() {
    for (src, expected) in [
        ("1 < 2", 1),
        ("2 < 2", 0),
        ("2 <= 2", 1),
        ("3 > 2", 1),
        ("2 >= 3", 0),
        ("2 == 2", 1),
        ("2 != 2", 0),
        ("1 < 2 < 3", 1),
        ("1 < 3 < 2", 0),
        ("3 < 1 < 2", 0),
        ("3 > 2 > 1", 1),
        ("1 == 1 != 2", 1),
        ("1 < 2 < 3 < 4 < 5", 1),
        ("1 < 2 < 3 < 3 < 5", 0),
        // Not (1 < 2) < 0.
        ("1 < 2 > 0", 1),
    ] {
        assert_eq!(value(src), expected, "{src}");
    }
    for (x, expected) in [(39, 0), (40, 1), (55, 1), (56, 0)] {
        assert_eq!(at("40 <= x < 56", &[x]), expected, "x = {x}");
    }
    // The middle operand is computed once and used by both links.
    for x in -3..10 {
        let expected = i64::from(0 < x - 1 && x - 1 < 5);
        assert_eq!(at("0 < x - 1 < 5", &[x]), expected);
    }
    assert_eq!(at("x < y <= z", &[1, 2, 2]), 1);
    assert_eq!(at("x < y <= z", &[1, 3, 2]), 0);
    assert_eq!(at("x < y <= z", &[2, 2, 2]), 0);
}

#[test]
fn logic() {
    for (src, expected) in [
        ("2 and 3", 1),
        ("2 and 0", 0),
        ("0 or 5", 1),
        ("0 or 0", 0),
        ("not 0", 1),
        ("not 7", 0),
        ("not not 7", 1),
        ("not not not 7", 0),
        ("not not not not 7", 1),
        ("not 1 == 0", 1),
        ("1 or 0 and 0", 1),
        ("0 and 1 or 1", 1),
        ("(1 or 0) and 0", 0),
        ("not 0 and 0", 0),
    ] {
        assert_eq!(value(src), expected, "{src}");
    }
    assert_eq!(at("not x < 3", &[2]), 0);
    assert_eq!(at("not x", &[0]), 1);
    assert_eq!(at("x and y", &[4, -1]), 1);
}

#[test]
fn conditional() {
    assert_eq!(at("7 if x > 2 else 0", &[3]), 7);
    assert_eq!(at("7 if x > 2 else 0", &[2]), 0);
    for (x, expected) in [(0, 1), (1, 2), (2, 3), (-1, 3)] {
        assert_eq!(at("1 if x == 0 else 2 if x == 1 else 3", &[x]), expected);
    }
    let src = "x + 256*y + (7 if 40 <= x < 56 and 40 <= y < 56 else 0)";
    assert_eq!(at(src, &[40, 40]), 40 + 256 * 40 + 7);
    assert_eq!(at(src, &[56, 40]), 56 + 256 * 40);
    assert_eq!(at(src, &[50, 39]), 50 + 256 * 39);
    // Conditions inside conditions need parentheses, as in Python.
    assert_eq!(at("(1 if x else 2) if y else 3", &[0, 1]), 2);
    assert_eq!(at("x if (y if z else 0) else 9", &[5, 1, 1]), 5);
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
fn precedence() {
    for (src, expected) in [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("- 2 * 3", -6),
        ("-7 / 2", -4),
        ("-(7 / 2)", -3),
        ("2 * 3 % 4", 2),
        ("2 * (3 % 4)", 6),
        ("10 - 3 - 2", 5),
        ("100 / 10 / 5", 2),
        ("1 + 2 < 4", 1),
        ("1 + (2 < 4)", 2),
        ("1 if 0 else 2 if 0 else 3", 3),
        ("1 if 0 else 2 if 1 else 3", 2),
        ("1 if 1 else 2 if 0 else 3", 1),
        ("1 + 1 if 0 else 5", 5),
        ("1 + 1 if 1 else 5", 2),
        ("5 if 0 or 1 else 6", 5),
        ("2 * -3", -6),
        ("2 - -3", 5),
    ] {
        assert_eq!(value(src), expected, "{src}");
    }
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
fn errors() {
    check_error("", 0, "empty expression");
    check_error("   ", 0, "empty expression");
    check_error(
        "x + q",
        4,
        "unknown name 'q'; coordinates are x, y, z, w, d4..d15",
    );
    check_error("foo", 0, "unknown name 'foo'");
    check_error("d16", 0, "no coordinate 'd16'");
    check_error("x + d99999999999999999999999", 4, "no coordinate");
    check_error("d2", 0, "'d2' is written 'z'");
    check_error("d05", 0, "unknown name 'd05'");
    check_error("x $ y", 2, "unexpected character '$'");
    check_error("x + é", 4, "unexpected character 'é'");
    check_error("x && y", 2, "use 'and'");
    check_error("x || y", 2, "use 'or'");
    check_error("!x", 0, "use 'not'");
    check_error("x = 1", 2, "use '=='");
    check_error("x // 2", 2, "'//'");
    check_error("x + 1.5", 4, "floating-point");
    check_error("2x", 0, "invalid integer literal '2x'");
    check_error("0x", 0, "invalid integer literal '0x'");
    check_error("0xg", 0, "invalid integer literal '0xg'");
    check_error("007", 0, "leading zeros");
    check_error("(x + 1", 0, "unclosed '('");
    check_error("x * ((y + 1)", 4, "unclosed '('");
    check_error("x + 1)", 5, "unmatched ')'");
    check_error("(x + 1))", 7, "unmatched ')'");
    check_error("(x 1)", 3, "expected ')', found '1'");
    check_error("()", 1, "expected an operand, found ')'");
    check_error("clamp(x, 1)", 0, "clamp takes 3 arguments, got 2");
    check_error("x + abs()", 4, "abs takes 1 argument, got 0");
    check_error("min(1, 2, 3)", 0, "min takes 2 arguments, got 3");
    check_error("select(1)", 0, "select takes 3 arguments, got 1");
    check_error("min(1 2)", 6, "expected ',' or ')', found '2'");
    check_error(
        "min(1,",
        6,
        "expected an operand, found the end of the expression",
    );
    check_error("min(1,)", 6, "expected an operand, found ')'");
    check_error("min(1", 3, "unclosed '('");
    check_error("foo(1)", 0, "unknown function 'foo'");
    check_error("min + 1", 0, "'min' is a function");
    check_error("x y", 2, "expected an operator, found 'y'");
    check_error("x (1)", 0, "unknown function 'x'");
    check_error("x 1", 2, "expected an operator, found '1'");
    check_error("x + 9223372036854775808", 4, "integer literal too large");
    check_error("99999999999999999999999", 0, "integer literal too large");
    check_error("-99999999999999999999999", 1, "integer literal too large");
    check_error("0x1_0000_0000_0000_0000", 0, "integer literal too large");
    check_error(
        "x +",
        3,
        "expected an operand, found the end of the expression",
    );
    check_error("x + * y", 4, "expected an operand, found '*'");
    check_error("+x", 0, "expected an operand, found '+'");
    check_error(
        "x if y",
        6,
        "expected 'else', found the end of the expression",
    );
    check_error("x if y z", 7, "expected 'else', found 'z'");
    check_error("x + and", 4, "expected an operand, found 'and'");
    check_error("x < not y", 4, "expected an operand, found 'not'");
    check_error("if(1)", 0, "expected an operand, found 'if'");
}

#[test]
fn deep_nesting() {
    let src = format!("{}x{}", "(".repeat(100_000), ")".repeat(100_000));
    check_error(&src, MAX_NESTING, "nested too deeply");
    let src = format!("{}x{}", "min(1, ".repeat(100_000), ")".repeat(100_000));
    check_error(&src, MAX_NESTING * 7 + 3, "nested too deeply");
    check_error(&"(".repeat(100_000), MAX_NESTING, "nested too deeply");
    // Up to the limit is fine, and needs little stack.
    let src = format!(
        "{}x{}",
        "(-x + (".repeat(MAX_NESTING / 2),
        "))".repeat(MAX_NESTING / 2)
    );
    let e = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || Expr::parse(&src))
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(e.eval(&[3]), 3 - 3 * (MAX_NESTING as i64 / 2));
    // Long flat chains loop rather than recurse.
    let long = vec!["x"; 100_000].join(" + ");
    assert_eq!(at(&long, &[2]), 200_000);
    let mut long = "-".repeat(100_001);
    long.push('x');
    assert_eq!(at(&long, &[2]), -2);
    let long = format!("{}x", "not ".repeat(100_001));
    assert_eq!(at(&long, &[2]), 0);
    let long = format!("{}0", "x if y else ".repeat(10_000));
    assert_eq!(at(&long, &[5, 1]), 5);
    assert_eq!(at(&long, &[5, 0]), 0);
    let long = format!("0 < {}", vec!["x"; 10_000].join(" < "));
    assert_eq!(at(&long, &[1]), 0);
    let long = format!("0 <= {}", vec!["x"; 10_000].join(" <= "));
    assert_eq!(at(&long, &[1]), 1);
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

/// Expressions for the comparisons below, covering every operation.
const CORPUS: &[&str] = &[
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
