//! A problem in a case file, located: `path:line:column: message`.

use std::path::{Path, PathBuf};

/// A problem in a case file, located.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {message}", path.display())]
pub struct CaseError {
    pub path: PathBuf,
    /// 1-based; 0 when the problem has no place in the file (it cannot be read).
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl CaseError {
    pub fn new(path: &Path, line: u64, column: u64, message: impl Into<String>) -> Self {
        CaseError {
            path: path.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }

    /// A YAML or serde error of the text `src` read from `path`, in one line.
    pub fn from_yaml(path: &Path, src: &str, e: &serde_saphyr::Error) -> Self {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        // The first line of serde-saphyr's message, without its own location prefix.
        let text = e.to_string();
        let first = text.lines().next().unwrap_or("").to_owned();
        let message = first
            .split_once(": ")
            .filter(|(pre, _)| pre.starts_with("error"))
            .map_or(first.clone(), |(_, rest)| rest.to_owned());
        let message = message
            .strip_prefix(&format!("line {line} column {column}: "))
            .map(str::to_owned)
            .unwrap_or(message);
        // serde names unknown fields and variants itself; for a bad value, name the
        // key written before it on that line.
        let names_itself = message.contains("unknown field") || message.contains("unknown variant");
        let message = match field_at(src, line, column) {
            Some(f) if !names_itself && !message.contains(&format!("`{f}`")) => {
                format!("field `{f}`: {message}")
            }
            _ => message,
        };
        CaseError::new(path, line, column, message)
    }
}

/// The name of the field of `line` that starts before `column`: the last
/// `name:` before it. Gives serde's "invalid value" errors a field name.
fn field_at(src: &str, line: u64, column: u64) -> Option<String> {
    let text = src.lines().nth(line.checked_sub(1)? as usize)?;
    let before: String = text
        .chars()
        .take(column.saturating_sub(1) as usize)
        .collect();
    let key_end = before.rfind(':')?;
    let key: String = before[..key_end]
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    (!key.is_empty()).then_some(key)
}
