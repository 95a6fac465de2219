//! The committed JSON Schema and reference are current, describe everything,
//! accept every case of `cases/` and reject malformed files as the parser does.

use std::path::PathBuf;

use serde_json::Value;
use vkcopy_engine::discover::{case_files, cases_root};
use vkcopy_engine::reference;
use vkcopy_engine::step_table;
use vkcopy_engine::{plan, schema};

fn committed(file: &str) -> String {
    let path = cases_root().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(&committed(schema::SCHEMA_FILE)).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn yaml(src: &str) -> Value {
    serde_saphyr::from_str(src).unwrap()
}

#[test]
fn committed_schema_and_reference_are_current() {
    let fix = "regenerate them: cargo run -p vkcopy-suite -- schema --write";
    assert!(
        committed(schema::SCHEMA_FILE) == schema::case_schema_text(),
        "cases/{} is stale; {fix}",
        schema::SCHEMA_FILE
    );
    assert!(
        committed(reference::REFERENCE_FILE) == reference::text(),
        "cases/{} is stale; {fix}",
        reference::REFERENCE_FILE
    );
    assert!(
        committed(step_table::RUNTIMES_FILE)
            == step_table::text(&cases_root(), vkcopy_suite::target::RUNTIMES).unwrap(),
        "cases/{} is stale; {fix}",
        step_table::RUNTIMES_FILE
    );
}

/// Every step but those `repeat` and `when` plan away is used by a case,
/// so the table of steps on each runtime has a row read off a real case.
#[test]
fn every_step_is_in_the_runtimes_table_from_a_case() {
    let table = step_table::text(&cases_root(), vkcopy_suite::target::RUNTIMES).unwrap();
    let unused: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("(no case uses it)"))
        .collect();
    assert!(
        unused
            .iter()
            .all(|l| l.starts_with("| `repeat`") || l.starts_with("| `when`")),
        "{unused:#?}"
    );
    assert!(
        table
            .contains("| `start_copy_to_host` | `async-copies` | runs | skipped: `async-copies` |"),
        "{table}"
    );
    assert!(
        table.contains("| `copy_to_host` | — | runs | runs |"),
        "{table}"
    );
}

#[test]
fn schema_accepts_every_case() {
    let v = validator();
    let files = case_files(&cases_root()).unwrap();
    assert!(files.len() >= 100, "{} cases", files.len());
    let mut rejected = Vec::new();
    for f in &files {
        let instance = yaml(&std::fs::read_to_string(f).unwrap());
        for e in v.iter_errors(&instance) {
            rejected.push(format!("{}: {} at {}", f.display(), e, e.instance_path()));
        }
    }
    assert!(rejected.is_empty(), "{}", rejected.join("\n"));
}

/// Forms the parser accepts that no case of `cases/` may use yet.
#[test]
fn schema_accepts_the_short_forms() {
    let src = r#"
about: short forms
requires: { device_types: [discrete_gpu, any] }
buffers:
  g: { type: u8, extent: [4, 4] }
steps:
  - release_unused
  - copy_to_device: g
  - repeat:
      var: t
      from: 0
      to: "2 + 1"
      steps:
        - crop: { from: g, to: "c{t}", min: [t, 0], extent: [1, "4 - t"] }
        - when: { cond: "t > 0", steps: [ { release: "c{t - 1}" } ] }
  - expect_counters: { copies_to_device: 1 }
  - measure: { copy_to_host: g, repeat: 2, min_gbps: { cpu: 0.5 }, min_ratio: { of: host_memcpy, value: 0.1 } }
"#;
    let root = cases_root();
    plan::parse(&root, &root.join("basic/short.yaml"), src).unwrap();
    let errors: Vec<String> = validator()
        .iter_errors(&yaml(src))
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

const G: &str = "about: a\nbuffers:\n  g: { type: i32, extent: [8] }\n";

/// Malformed case files: each must fail the schema and the parser alike.
fn malformed() -> Vec<(&'static str, String)> {
    let steps = |s: &str| format!("{G}steps:\n{s}\n");
    vec![
        ("no about", "steps: [ { copy_to_device: g } ]\n".into()),
        ("unknown top-level field", format!("{G}abut: x\nsteps: [release_unused]\n")),
        ("unknown step", steps("  - copy_to_devise: g")),
        ("two names in one step", steps("  - { copy_to_device: g, copy_to_host: g }")),
        ("unknown element type", "about: a\nbuffers: { g: { type: i33, extent: [8] } }\nsteps: [ { copy_to_device: g } ]\n".into()),
        ("extent not a list", "about: a\nbuffers: { g: { type: i32, extent: 8 } }\nsteps: [ { copy_to_device: g } ]\n".into()),
        ("no dimensions", "about: a\nbuffers: { g: { type: i32, extent: [] } }\nsteps: [ { copy_to_device: g } ]\n".into()),
        ("host_offset past a page", "about: a\nbuffers: { g: { type: i32, extent: [8], host_offset: 5000 } }\nsteps: [ { copy_to_device: g } ]\n".into()),
        ("unknown step field", steps("  - fill_host: { buffer: g, valu: \"x\" }")),
        ("missing step field", steps("  - fill_host: { buffer: g }")),
        ("unknown device type", format!("{G}requires: {{ device_types: [gpu2] }}\nsteps: [release_unused]\n")),
        ("unknown policy", format!("{G}policy: fastest\nsteps: [release_unused]\n")),
        ("unknown error", steps("  - expect_error: { error: oops, step: { copy_to_host: g } }")),
        ("unknown counter", steps("  - expect_counters: { copies: 1 }")),
        ("unknown memory flag", steps("  - expect_memory: { role: readback, flags: [HOST_FAST] }")),
        ("unknown role", steps("  - expect_memory: { role: staging, type: 1 }")),
        ("negative threshold", steps("  - measure: { copy_to_host: g, min_gbps: { cpu: -1 } }")),
        ("threshold for an unknown device", steps("  - measure: { copy_to_host: g, max_us: { tpu: 5 } }")),
        ("no timed runs", steps("  - measure: { copy_to_host: g, repeat: 0 }")),
        ("unit step with fields", steps("  - release_unused: { all: true }")),
        ("bool as a number", steps("  - set_dirty: { buffer: g, host_dirty: 1 }")),
        ("steps not a list", format!("{G}steps: {{ copy_to_device: g }}\n")),
        ("a repeat without steps", steps("  - repeat: { var: t, from: 0, to: 2 }")),
        ("unknown request", "about: a\nselection: { table: lavapipe, expect: [ { request: sideways, vkcopy: 0 } ] }\n".into()),
        ("no selection expectations", "about: a\nselection: { table: lavapipe, expect: [] }\n".into()),
    ]
}

#[test]
fn schema_and_parser_reject_malformed_files() {
    let v = validator();
    let root = cases_root();
    let path: PathBuf = root.join("basic/malformed.yaml");
    let cases = malformed();
    assert_eq!(cases.len(), 25);
    for (what, src) in &cases {
        let instance: Value = serde_saphyr::from_str(src).unwrap_or(Value::Null);
        assert!(!v.is_valid(&instance), "the schema accepts: {what}\n{src}");
        let err = plan::parse(&root, &path, src).err();
        let err = err.unwrap_or_else(|| panic!("the parser accepts: {what}\n{src}"));
        let located = format!("{}:", path.display());
        assert!(err.to_string().starts_with(&located), "{what}: {err}");
        assert!(err.line > 0, "{what}: {err}");
    }
}

/// Every property, step and value has a description, so the reference and
/// the editor's hover say what each is.
#[test]
fn everything_is_described() {
    let schema = schema::case_schema();
    let mut missing = Vec::new();
    walk(&schema, "#", &mut missing);
    assert!(missing.is_empty(), "no description: {missing:#?}");
}

fn walk(v: &Value, at: &str, missing: &mut Vec<String>) {
    let Some(o) = v.as_object() else { return };
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        let newtype_step = props.len() == 1 && o.contains_key("description");
        for (name, p) in props {
            let described = p.get("description").is_some() || p.get("$ref").is_some();
            if !described && !newtype_step {
                missing.push(format!("{at}/properties/{name}"));
            }
            walk(p, &format!("{at}/properties/{name}"), missing);
        }
    }
    for key in ["oneOf", "anyOf"] {
        for (i, alt) in o
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let is_null = alt.get("type") == Some(&Value::from("null"));
            if alt.get("description").is_none() && alt.get("$ref").is_none() && !is_null {
                missing.push(format!("{at}/{key}/{i}"));
            }
            walk(alt, &format!("{at}/{key}/{i}"), missing);
        }
    }
    for (name, d) in o
        .get("$defs")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if d.get("description").is_none() {
            missing.push(format!("#/$defs/{name}"));
        }
        walk(d, &format!("#/$defs/{name}"), missing);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = o.get(key) {
            walk(sub, &format!("{at}/{key}"), missing);
        }
    }
}
