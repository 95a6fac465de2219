//! The error of a parse: where in the source, and what is wrong. Its own file
//! because the lexer, the parser and the `Expr` API all give it.

use std::fmt;

/// Why an expression did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// Byte offset of the problem in the source.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl ExprError {
    pub(super) fn new(offset: usize, message: impl Into<String>) -> Self {
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
