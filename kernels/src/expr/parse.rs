//! The parser: tokens to postfix operations, by recursive descent with
//! Python's precedence. Names are resolved here too (coordinates, inputs,
//! functions), since what a name may be is a question of the grammar.

use vkcopy::MAX_DIMS;

use super::error::ExprError;
use super::lex::{lex, too_large, Tok, Token};
use super::vm::{Bin, Op};

/// How deep parentheses and argument lists may nest: the parser recurses once
/// per level.
pub(super) const MAX_NESTING: usize = 256;

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
