//! The JSON Schema of `results.json`, generated from the serde types of
//! [`Report`]: `reports/results.schema.json` is this text.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::Report;

/// Where the committed schema lives, relative to the cases folder.
pub const SCHEMA_FILE: &str = "../reports/results.schema.json";

/// The schema of a `results.json` as [`Report`] writes it.
pub fn results_schema() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    generator.into_root_schema_for::<Report>().to_value()
}

/// The schema as committed: pretty JSON with a final newline.
pub fn results_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&results_schema()).unwrap_or_default();
    s.push('\n');
    s
}
