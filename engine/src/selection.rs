//! Selection cases: which memory type each policy picks for a request on a
//! recorded table. Pure logic; needs no device.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use crate::error::CaseError;
use crate::rt::{MemoryRequest, MemoryTable, Policy, Role};
use crate::vocab::RequestName;

/// A selection case as written: the type each policy must pick on a recorded table.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// A file in `cases/devices/`, without `.yaml`.
    pub table: String,
    /// The requests and the type each policy must pick; at least one.
    #[schemars(with = "Vec<SelectionExpect>", length(min = 1))]
    pub expect: Vec<Spanned<SelectionExpect>>,
}

/// One request and the memory type index each named policy must pick.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectionExpect {
    /// `readback`, `upload`, `device`, or a raw `visibility/caching` pair.
    #[schemars(with = "RequestName")]
    pub request: String,
    /// The type index `halide-legacy` must pick; not checked when left out.
    #[serde(default, rename = "halide-legacy")]
    pub halide_legacy: Option<u32>,
    /// The type index `halide` must pick; not checked when left out.
    #[serde(default)]
    pub halide: Option<u32>,
    /// The type index `vkcopy` must pick; not checked when left out.
    #[serde(default)]
    pub vkcopy: Option<u32>,
}

/// One selection check.
#[derive(Clone, Debug)]
pub struct SelectionCheck {
    pub line: u64,
    /// As written: `readback` or `device_to_host/cached_coherent`.
    pub request: String,
    pub role: Option<Role>,
    pub raw: Option<MemoryRequest>,
    pub expect: Vec<(Policy, u32)>,
}

/// A checked selection case.
#[derive(Clone, Debug)]
pub struct SelectionPlan {
    pub table_name: String,
    pub table: MemoryTable,
    pub checks: Vec<SelectionCheck>,
}

/// The recorded table `name` of the cases folder `root`.
pub fn recorded_table(root: &Path, name: &str) -> Result<MemoryTable, String> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !plain {
        return Err(format!(
            "'{name}' is not a table name: give the name of a file in the cases' devices/ \
             folder without .yaml (e.g. lavapipe); a table elsewhere is given on the command line"
        ));
    }
    let file = root.join("devices").join(format!("{name}.yaml"));
    if !file.exists() {
        return Err(format!(
            "no recorded table '{name}' in devices/; {}",
            tables_there(&root.join("devices"))
        ));
    }
    table_file(&file)
}

/// The recorded tables of the folder `devices`, as a message says them: `the
/// tables are a, b`, or why there are none.
pub fn tables_there(devices: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(devices) else {
        return "the folder does not exist".into();
    };
    let mut known: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let stem = p.file_stem()?.to_str()?.to_owned();
            (p.extension()? == "yaml").then_some(stem)
        })
        .collect();
    known.sort();
    if known.is_empty() {
        return "the folder holds no *.yaml table".into();
    }
    format!("the tables are {}", known.join(", "))
}

/// The recorded table in the file `file`.
pub fn table_file(file: &Path) -> Result<MemoryTable, String> {
    let src = crate::files::read_text(file).map_err(|e| format!("{}: {e}", file.display()))?;
    crate::error::refuse_tags(file, &src).map_err(|e| e.to_string())?;
    MemoryTable::from_yaml_str(&src, &file.display().to_string()).map_err(|e| e.to_string())
}

/// Checks a selection case of the file `path` below `root`.
pub fn plan(
    root: &Path,
    path: &Path,
    sel: &Selection,
    at: &Location,
) -> Result<SelectionPlan, CaseError> {
    let err = |at: &Location, m: String| CaseError::new(path, at.line(), at.column(), m);
    let table =
        recorded_table(root, &sel.table).map_err(|e| err(at, format!("selection.table: {e}")))?;
    let mut checks = Vec::new();
    for e in &sel.expect {
        let (request, at) = (&e.value.request, &e.referenced);
        let (role, raw) = match request.parse::<Role>() {
            Ok(r) => (Some(r), None),
            Err(_) => match request.parse::<MemoryRequest>() {
                Ok(r) => (None, Some(r)),
                Err(e) => {
                    return Err(err(at, format!(
                        "request '{request}': not readback, upload, device, device_mapped or a visibility/caching pair: {e}"
                    )))
                }
            },
        };
        let mut expect = Vec::new();
        for (p, v) in [
            (Policy::HalideLegacy, e.value.halide_legacy),
            (Policy::Halide, e.value.halide),
            (Policy::Vkcopy, e.value.vkcopy),
        ] {
            let Some(t) = v else { continue };
            if t as usize >= table.types.len() {
                return Err(err(
                    at,
                    format!(
                        "{p}: type {t} does not exist; {} has {} types",
                        sel.table,
                        table.types.len()
                    ),
                ));
            }
            expect.push((p, t));
        }
        if expect.is_empty() {
            return Err(err(
                at,
                "names no policy (halide-legacy, halide, vkcopy)".into(),
            ));
        }
        checks.push(SelectionCheck {
            line: at.line(),
            request: request.clone(),
            role,
            raw,
            expect,
        });
    }
    if checks.is_empty() {
        return Err(err(at, "selection.expect is empty".into()));
    }
    Ok(SelectionPlan {
        table_name: sel.table.clone(),
        table,
        checks,
    })
}

/// Checks every expectation of a selection case; lists every mismatch.
pub fn check(s: &SelectionPlan) -> Result<(), String> {
    let mut wrong = Vec::new();
    for c in &s.checks {
        for &(policy, want) in &c.expect {
            let picked = match (c.role, &c.raw) {
                (Some(role), _) => policy.select_role(&s.table, role, u32::MAX),
                (None, Some(raw)) => policy.select(&s.table, raw, u32::MAX),
                (None, None) => unreachable!("the plan has a role or a raw request"),
            };
            match picked {
                Ok(t) if t == want => {}
                Ok(t) => wrong.push(format!(
                    "line {}: {} under {policy}: picked {}, expected {}",
                    c.line,
                    c.request,
                    s.table.describe_type(t),
                    s.table.describe_type(want)
                )),
                Err(e) => wrong.push(format!(
                    "line {}: {} under {policy}: {e}; expected type {want}",
                    c.line, c.request
                )),
            }
        }
    }
    if wrong.is_empty() {
        return Ok(());
    }
    Err(format!(
        "selection differs on {}:\n  {}",
        s.table_name,
        wrong.join("\n  ")
    ))
}
