//! The parser: tokens to postfix operations, by recursive descent with
//! Python's precedence. Names are resolved here too (coordinates, inputs,
//! functions), since what a name may be is a question of the grammar.

use vkcopy::MAX_DIMS;

use super::error::ExprError;
use super::lex::{lex, too_large, Tok, Token};
use super::vm::{Bin, Op};

/// How deep parentheses and argument lists may nest: the parser recurses once
/// per level.
const MAX_NESTING: usize = 256;

const COORDINATES: &str = "coordinates are x, y, z, w, d4..d15";
const FUNCTIONS: &str = "functions are min, max, clamp, abs, select";
const KEYWORDS: [&str; 5] = ["and", "or", "not", "if", "else"];
const FUNCTION_NAMES: [&str; 5] = ["min", "max", "clamp", "abs", "select"];

/// The operations of `src`, where the names `inputs` are operands, before
/// folding.
pub(super) fn parse(src: &str, inputs: &[&str]) -> Result<Vec<Op>, ExprError> {
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
    Ok(parser.ops)
}

/// Whether `name` may name an input: not a coordinate, keyword or function.
pub(super) fn check_input_name(name: &str) -> Result<(), String> {
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
        self.left_assoc(Self::and_test, |p| p.at_keyword("or").then_some(Bin::Or))
    }

    fn and_test(&mut self) -> Result<(), ExprError> {
        self.left_assoc(Self::not_test, |p| p.at_keyword("and").then_some(Bin::And))
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
        self.left_assoc(Self::term, |p| match p.peek().kind {
            Tok::Plus => Some(Bin::Add),
            Tok::Minus => Some(Bin::Sub),
            _ => None,
        })
    }

    fn term(&mut self) -> Result<(), ExprError> {
        self.left_assoc(Self::unary, |p| match p.peek().kind {
            Tok::Star => Some(Bin::Mul),
            Tok::Slash => Some(Bin::Div),
            Tok::Percent => Some(Bin::Mod),
            _ => None,
        })
    }

    /// One level of left-associative operators: `next (op next)*`, where `op`
    /// names the operator at the parser's position, if any.
    fn left_assoc(
        &mut self,
        next: fn(&mut Self) -> Result<(), ExprError>,
        op: fn(&Self) -> Option<Bin>,
    ) -> Result<(), ExprError> {
        next(self)?;
        while let Some(bin) = op(self) {
            self.bump();
            next(self)?;
            self.ops.push(Op::Bin(bin));
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::tests::{at, check_error, value};
    use crate::expr::Expr;

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
}
