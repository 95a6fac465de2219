//! Loop variables: `repeat` binds a name that value expressions, bounds and
//! buffer names of its steps use. The value is written into the text before
//! the expression is parsed, so the expression language needs no variables.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

use crate::rt::Expr;

/// Longest expression a case may write: kernels compile it to WGSL, whose parser
/// has a recursion limit.
pub const MAX_EXPR_LEN: usize = 4096;

/// Names a loop variable may not take: the coordinates and the words of the
/// expression language.
const RESERVED: [&str; 14] = [
    "x", "y", "z", "w", "and", "or", "not", "if", "else", "min", "max", "clamp", "abs", "select",
];

/// An integer as written: a number, or an expression of loop variables (`"y % 2"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Int {
    Lit(i64),
    Expr(String),
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IntVisitor;
        impl Visitor<'_> for IntVisitor {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or an expression of loop variables")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int, E> {
                Ok(Int::Lit(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int, E> {
                i64::try_from(v)
                    .map(Int::Lit)
                    .map_err(|_| E::custom(format!("{v} is out of range")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Int, E> {
                Ok(Int::Expr(v.to_owned()))
            }
        }
        d.deserialize_any(IntVisitor)
    }
}

impl schemars::JsonSchema for Int {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Int".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An integer, or an expression of loop variables in quotes (`\"t % 2\"`); a bare variable name needs no quotes.",
            "anyOf": [
                { "type": "integer", "description": "A number." },
                { "type": "string", "description": "An expression of loop variables." },
            ],
        })
    }
}

impl fmt::Display for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Int::Lit(v) => write!(f, "{v}"),
            Int::Expr(s) => f.write_str(s),
        }
    }
}

/// Loop variables in scope, innermost last.
#[derive(Clone, Debug, Default)]
pub struct Bindings(Vec<(String, i64)>);

impl Bindings {
    pub fn push(&mut self, var: &str, value: i64) {
        self.0.push((var.to_owned(), value));
    }

    pub fn pop(&mut self) {
        self.0.pop();
    }

    pub fn set_last(&mut self, value: i64) {
        if let Some(last) = self.0.last_mut() {
            last.1 = value;
        }
    }

    fn get(&self, name: &str) -> Option<i64> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    /// Why `var` cannot name a new loop variable, if it cannot.
    pub fn check_new(&self, var: &str) -> Result<(), String> {
        let mut chars = var.chars();
        let ident = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident {
            return Err(format!("'{var}' is not a name (letters, digits, _)"));
        }
        let coordinate =
            var.len() > 1 && var.starts_with('d') && var[1..].chars().all(|c| c.is_ascii_digit());
        if RESERVED.contains(&var) || coordinate {
            return Err(format!(
                "'{var}' is a coordinate or a word of the expression language; name the loop variable otherwise (e.g. t, i, row)"
            ));
        }
        if self.get(var).is_some() {
            return Err(format!(
                "'{var}' is already the variable of an outer repeat"
            ));
        }
        Ok(())
    }

    /// `src` with every loop variable replaced by its value.
    pub fn substitute(&self, src: &str) -> String {
        if self.0.is_empty() {
            return src.to_owned();
        }
        let mut out = String::with_capacity(src.len());
        let mut rest = src;
        while let Some(c) = rest.chars().next() {
            if c.is_ascii_alphanumeric() || c == '_' {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let word = &rest[..end];
                // A word that starts with a digit is a literal such as 0xff.
                match self.get(word).filter(|_| !c.is_ascii_digit()) {
                    Some(v) => out.push_str(&format!("({v})")),
                    None => out.push_str(word),
                }
                rest = &rest[end..];
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }

    /// Parses an expression after substitution; errors quote the text as written.
    pub fn parse(&self, src: &str) -> Result<Expr, String> {
        self.parse_with(src, &[])
    }

    /// [`Bindings::parse`] where the names `inputs` are a map's inputs.
    pub fn parse_with(&self, src: &str, inputs: &[&str]) -> Result<Expr, String> {
        let shown: String = src.chars().take(60).collect();
        let shown = if shown.len() < src.len() {
            format!("{shown}...")
        } else {
            shown
        };
        if src.len() > MAX_EXPR_LEN {
            return Err(format!(
                "'{shown}': {} characters; at most {MAX_EXPR_LEN}",
                src.len()
            ));
        }
        Expr::parse_with(&self.substitute(src), inputs).map_err(|e| format!("'{shown}': {e}"))
    }

    /// The value of an integer written with loop variables only.
    pub fn int(&self, v: &Int) -> Result<i64, String> {
        let src = match v {
            Int::Lit(v) => return Ok(*v),
            Int::Expr(s) => s,
        };
        let e = self.parse(src)?;
        if e.max_dim().is_some() {
            return Err(format!(
                "'{src}' uses a coordinate; bounds take numbers and loop variables only"
            ));
        }
        Ok(e.eval(&[]))
    }

    /// A buffer name with each `{expression}` replaced by its value: `a{t - 1}`.
    pub fn name(&self, s: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = s;
        while let Some(open) = rest.find('{') {
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("name '{s}': '{{' without '}}'"))?;
            out.push_str(&rest[..open]);
            let inner = &rest[open + 1..open + close];
            let v = self
                .int(&Int::Expr(inner.to_owned()))
                .map_err(|e| format!("name '{s}': {e}"))?;
            out.push_str(&v.to_string());
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// `t = 3, i = 1`, for messages; empty outside loops.
    pub fn describe(&self) -> String {
        self.0
            .iter()
            .map(|(n, v)| format!("{n} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: i64) -> Bindings {
        let mut b = Bindings::default();
        b.push("t", v);
        b
    }

    #[test]
    fn substitutes_whole_words_only() {
        let b = t(-3);
        assert_eq!(
            b.substitute("x + t*2 + tt + 0x1t"),
            "x + (-3)*2 + tt + 0x1t"
        );
        assert_eq!(b.int(&Int::Expr("t % 2".into())), Ok(1));
        assert_eq!(b.name("a{t + 4}b").unwrap(), "a1b");
        assert!(b.int(&Int::Expr("x + t".into())).is_err());
    }

    #[test]
    fn loop_variables_are_not_coordinates() {
        let b = t(0);
        assert!(b.check_new("y").is_err());
        assert!(b.check_new("d4").is_err());
        assert!(b.check_new("t").is_err());
        assert!(b.check_new("row").is_ok());
        assert!(b.check_new("d").is_ok());
    }
}
