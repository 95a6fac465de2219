//! `cases/REFERENCE.md`: every field, step and value of the case format with
//! its type and description, written from the JSON Schema ([`crate::schema`])
//! so that the reference says what the parser accepts.

use serde_json::{Map, Value};

use crate::schema::case_schema;

/// Where the reference lives, relative to the cases folder.
pub const REFERENCE_FILE: &str = "REFERENCE.md";

/// The reference as committed.
pub fn text() -> String {
    let schema = case_schema();
    let empty = Map::new();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut out = String::new();
    out.push_str("# Case reference\n\n");
    out.push_str(
        "Generated from the runner's serde types by `vkcopy-suite schema --write`\n\
         (with `case.schema.json`); do not edit. The ideas behind the fields, with\n\
         examples, are in [README.md](README.md).\n\n",
    );
    out.push_str("## Case file\n\n");
    out.push_str(&describe(&schema));
    out.push_str("\n\n");
    fields(&schema, &mut out);

    out.push_str("\n## Steps\n\n");
    if let Some(step) = defs.get("Step") {
        out.push_str(&describe(step));
        out.push_str("\n\n");
        for family in alternatives(step) {
            let name = ref_name(family).unwrap_or("?");
            let Some(def) = defs.get(name) else { continue };
            let title = name.strip_suffix("Step").unwrap_or(name).to_lowercase();
            out.push_str(&format!("### {title}\n\n"));
            for variant in alternatives(def) {
                step_entry(variant, &mut out);
            }
        }
    }

    out.push_str("## Types\n\n");
    for (name, def) in defs {
        if name == "Step" || name.ends_with("Step") {
            continue;
        }
        out.push_str(&format!("### {name}\n\n{}\n\n", describe(def)));
        if def.get("properties").is_some() {
            fields(def, &mut out);
            out.push('\n');
        } else if let Some(values) = def.get("oneOf").and_then(Value::as_array) {
            out.push_str("| value | meaning |\n|---|---|\n");
            for v in values {
                let name = v.get("const").map(plain).unwrap_or_default();
                out.push_str(&format!("| `{name}` | {} |\n", cell(&describe(v))));
            }
            out.push('\n');
        } else if let Some(alts) = def.get("anyOf").and_then(Value::as_array) {
            for a in alts {
                out.push_str(&format!("- {}: {}\n", type_of(a), describe(a)));
            }
            out.push('\n');
        } else {
            out.push_str(&format!("A {}.\n\n", type_of(def)));
        }
    }
    out
}

/// One step: its name, how it is written, its description and fields.
fn step_entry(variant: &Value, out: &mut String) {
    if let Some(name) = variant.get("const").and_then(Value::as_str) {
        out.push_str(&format!(
            "#### `{name}`\n\n`- {name}`\n\n{}\n\n",
            describe(variant)
        ));
        return;
    }
    let Some((name, body)) = variant
        .get("properties")
        .and_then(Value::as_object)
        .and_then(|p| p.iter().next())
    else {
        return;
    };
    out.push_str(&format!("#### `{name}`\n\n"));
    let form = match body.get("properties") {
        Some(_) => format!("`- {name}: {{ ... }}` with the fields below"),
        None => format!("`- {name}: VALUE`, VALUE a {}", type_of(body)),
    };
    out.push_str(&format!("{form}\n\n{}\n\n", describe(variant)));
    if body.get("properties").is_some() {
        fields(body, out);
        out.push('\n');
    }
}

/// A table of an object schema's fields.
fn fields(object: &Value, out: &mut String) {
    let Some(props) = object.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    out.push_str("| field | type | | description |\n|---|---|---|---|\n");
    for (name, field) in props {
        let req = if required.contains(&name.as_str()) {
            "required"
        } else {
            "optional"
        };
        out.push_str(&format!(
            "| `{name}` | {} | {req} | {} |\n",
            type_of(field),
            cell(&describe(field))
        ));
    }
}

/// The alternatives of a `oneOf` or `anyOf`.
fn alternatives(schema: &Value) -> Vec<&Value> {
    ["oneOf", "anyOf"]
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Value::as_array))
        .flatten()
        .collect()
}

fn ref_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
}

/// A type in words, with links to named types.
fn type_of(schema: &Value) -> String {
    if let Some(name) = ref_name(schema) {
        return format!("[{name}](#{})", name.to_lowercase());
    }
    let alts: Vec<&Value> = alternatives(schema)
        .into_iter()
        .filter(|a| a.get("type") != Some(&Value::from("null")))
        .collect();
    if schema.get("const").is_none() && schema.get("enum").is_none() && !alts.is_empty() {
        let kinds: Vec<String> = alts.iter().map(|a| type_of(a)).collect();
        return kinds.join(" or ");
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null")
            .to_owned(),
        _ => "any".to_owned(),
    };
    match ty.as_str() {
        "array" => match schema.get("items") {
            Some(items) => format!("list of {}", type_of(items)),
            None => "list".to_owned(),
        },
        "object" => {
            let key = schema
                .get("propertyNames")
                .map(type_of)
                .unwrap_or_else(|| "name".to_owned());
            match schema.get("additionalProperties") {
                Some(v) if v.is_object() => format!("map of {key} to {}", type_of(v)),
                _ => "object".to_owned(),
            }
        }
        "integer" => {
            let range = match (schema.get("minimum"), schema.get("maximum")) {
                (Some(lo), Some(hi)) => format!(" {lo} to {hi}"),
                (Some(lo), None) => format!(" from {lo}"),
                (None, Some(hi)) => format!(" up to {hi}"),
                (None, None) => String::new(),
            };
            format!("integer{range}")
        }
        other => other.to_owned(),
    }
}

fn describe(schema: &Value) -> String {
    schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .replace('\n', " ")
}

fn plain(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// Text fit for a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    #[test]
    fn reference_names_every_step() {
        let text = super::text();
        for name in crate::steps::step_names() {
            assert!(text.contains(&format!("#### `{name}`")), "{name} missing");
        }
    }
}
