//! The JSON Schema of the case format, generated from the serde types of
//! `crate::case` and `crate::steps`: `cases/case.schema.json` is this
//! text, and `cases/REFERENCE.md` is written from it.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::case::CaseFile;

/// Where the committed schema lives, relative to the cases folder.
pub const SCHEMA_FILE: &str = "case.schema.json";

/// The schema of a case file.
pub fn case_schema() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    generator.into_root_schema_for::<CaseFile>().to_value()
}

/// The schema as committed: pretty JSON with a final newline.
pub fn case_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&case_schema()).unwrap_or_default();
    s.push('\n');
    s
}
