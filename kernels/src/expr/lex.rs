//! The lexer: source text to tokens, with the offset of each for errors. It
//! catches the operators of other languages (`&&`, `//`, `=`) here, where the
//! message can say what to write instead.

use super::error::ExprError;
use super::vm::Cmp;

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tok<'a> {
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

/// A token and where it is in the source, in bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Token<'a> {
    pub(super) kind: Tok<'a>,
    pub(super) offset: usize,
    pub(super) len: usize,
}

/// The tokens of `src`, ending with [`Tok::End`].
pub(super) fn lex(src: &str) -> Result<Vec<Token<'_>>, ExprError> {
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

/// The message for a literal past `i64`.
pub(super) fn too_large() -> String {
    format!("integer literal too large; the largest is {}", i64::MAX)
}

#[cfg(test)]
mod tests {
    use crate::expr::tests::{check_error, value};

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
    fn errors() {
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
        check_error("99999999999999999999999", 0, "integer literal too large");
        check_error("-99999999999999999999999", 1, "integer literal too large");
        check_error("0x1_0000_0000_0000_0000", 0, "integer literal too large");
    }
}
