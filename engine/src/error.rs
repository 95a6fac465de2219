//! A problem in a case file, located: `path:line:column: message`.

use std::path::{Path, PathBuf};

/// A problem in a case file, located.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {message}", path.display())]
pub struct CaseError {
    /// The case file.
    pub path: PathBuf,
    /// 1-based; 0 when the problem has no place in the file (it cannot be read).
    pub line: u64,
    /// 1-based; 0 with line 0.
    pub column: u64,
    /// What is wrong, as `step: field: what`.
    pub message: String,
}

impl CaseError {
    /// A problem at `line`:`column` of `path`.
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
        let message = if crate::files::blank(src) {
            "the file is empty; a case has at least `about` and `steps`".to_owned()
        } else {
            plain_words(e, message)
        };
        // serde names unknown and missing fields and variants itself; for a bad
        // value, name the key written before it on that line.
        let names_itself = message.contains("unknown field")
            || message.contains("unknown variant")
            || message.contains("missing; it is required")
            || message.contains("written twice")
            || message.starts_with("the file");
        let message = match field_at(src, line, column) {
            Some(f) if !names_itself && !message.contains(&format!("`{f}`")) => {
                format!("field `{f}`: {message}")
            }
            _ => message,
        };
        CaseError::new(path, line, column, message)
    }
}

/// The first YAML tag (`!name`, `!!binary`) in `src`, as an error: tags would
/// change how a value is read, and the suite's files need none.
pub fn refuse_tags(path: &Path, src: &str) -> Result<(), CaseError> {
    use serde_saphyr::granit_parser::{Event, Parser};
    for event in Parser::new_from_str(src) {
        // A syntax error is for the YAML reader to report, with its own words.
        let Ok((event, span)) = event else {
            return Ok(());
        };
        let tag = match &event {
            Event::Scalar(_, _, _, tag)
            | Event::SequenceStart(_, _, tag)
            | Event::MappingStart(_, _, tag) => tag.as_ref(),
            _ => None,
        };
        if let Some(tag) = tag {
            let at = span.tag_start.unwrap_or(span.start);
            let tag = tag.to_string();
            let tag = tag
                .strip_prefix("tag:yaml.org,2002:")
                .map_or(tag.clone(), |t| format!("!!{t}"));
            return Err(CaseError::new(
                path,
                at.line() as u64,
                at.col() as u64 + 1,
                format!("the YAML tag `{tag}` is not allowed; write the value without it"),
            ));
        }
    }
    Ok(())
}

/// serde-saphyr's messages that name its own API or types, in plain words.
fn plain_words(e: &serde_saphyr::Error, message: String) -> String {
    if let serde_saphyr::Error::Budget { breach, .. } = e {
        use serde_saphyr::budget::BudgetBreach as B;
        return match breach {
            B::Depth { depth } => {
                format!("the file nests {depth} levels deep; the YAML reader stops there")
            }
            B::ScalarBytes { total_scalar_bytes } => format!(
                "the file holds {total_scalar_bytes} bytes of values; the YAML reader stops there"
            ),
            B::Aliases { .. }
            | B::AliasAnchorRatio { .. }
            | B::RecordedAnchorEvents { .. }
            | B::RecordedAnchorBytes { .. } => {
                "the file repeats anchors (`*name`) too often; the YAML reader stops there".into()
            }
            _ => "the file is too large or complex for the YAML reader".into(),
        };
    }
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest
            .split(", set DuplicateKeyPolicy")
            .next()
            .unwrap_or(rest);
        return format!("`{key}` is written twice in one mapping");
    }
    if let Some(ty) = message.strip_prefix("invalid ") {
        let range = match ty {
            "u8" => Some("0 to 255".to_owned()),
            "u32" => Some(format!("0 to {}", u32::MAX)),
            "u64" | "usize" => Some(format!("0 to {}", u64::MAX)),
            "i32" => Some(format!("{} to {}", i32::MIN, i32::MAX)),
            "i64" => Some(format!("{} to {}", i64::MIN, i64::MAX)),
            _ => None,
        };
        if let Some(range) = range {
            return format!("expected a whole number from {range}");
        }
    }
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|f| f.strip_suffix('`'))
    {
        return format!("field {field}: missing; it is required here");
    }
    match message.as_str() {
        "expected mapping start" => return "expected a mapping (`name: value` lines)".into(),
        "expected sequence start" => return "expected a list (`- item` lines or `[a, b]`)".into(),
        "invalid boolean" => return "expected true or false".into(),
        _ => {}
    }
    if message == "expected string scalar" {
        return "expected a single text value here, not a list or mapping".into();
    }
    if message.starts_with("multiple YAML documents") {
        return "the file holds more than one YAML document (a `---` line); a case is one".into();
    }
    message
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
