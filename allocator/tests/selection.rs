//! The selection cases of `cases/selection/` against the policies, without a
//! device: every expected pick holds, and every recorded table in
//! `cases/devices/` has a case that covers the three roles under the three
//! policies. (The suite runner checks the picks too; the coverage rule is here.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use vkcopy::memory::policy::{MemoryRequest, Policy, Role};
use vkcopy::memory::table::MemoryTable;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    about: String,
    selection: Selection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Selection {
    table: String,
    expect: Vec<Expect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    request: String,
    #[serde(default, rename = "halide-legacy")]
    halide_legacy: Option<u32>,
    #[serde(default)]
    halide: Option<u32>,
    #[serde(default)]
    vkcopy: Option<u32>,
}

fn cases_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cases")
        .join(sub)
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

#[test]
fn selection_cases_hold_and_cover_every_table() {
    let tables: BTreeMap<String, MemoryTable> = yaml_files(&cases_dir("devices"))
        .iter()
        .map(|p| {
            let table = MemoryTable::from_yaml_file(p).unwrap_or_else(|e| panic!("{e}"));
            (stem(p), table)
        })
        .collect();
    let mut failures = Vec::new();
    let mut covered = Vec::new();
    for path in yaml_files(&cases_dir("selection")) {
        let src = std::fs::read_to_string(&path).unwrap();
        let case: Case =
            serde_saphyr::from_str(&src).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            !case.about.trim().is_empty(),
            "{}: empty about",
            path.display()
        );
        let name = &case.selection.table;
        assert_eq!(
            &stem(&path),
            name,
            "{}: a case is named like its table",
            path.display()
        );
        let table = tables
            .get(name)
            .unwrap_or_else(|| panic!("{}: no table {name} in cases/devices", path.display()));
        let mut checked: Vec<(String, Policy)> = Vec::new();
        for e in &case.selection.expect {
            let role = e.request.parse::<Role>().ok();
            let raw = match role {
                Some(_) => None,
                None => Some(e.request.parse::<MemoryRequest>().unwrap_or_else(|err| {
                    panic!("{}: request {}: {err}", path.display(), e.request)
                })),
            };
            for (policy, want) in [
                (Policy::HalideLegacy, e.halide_legacy),
                (Policy::Halide, e.halide),
                (Policy::Vkcopy, e.vkcopy),
            ] {
                let Some(want) = want else { continue };
                let got = match (role, raw) {
                    (Some(role), _) => policy
                        .role_candidates(table, role, u32::MAX)
                        .map(|list| list[0]),
                    (None, Some(raw)) => policy.select(table, &raw, u32::MAX),
                    (None, None) => unreachable!("a role or a request"),
                };
                if got != Ok(want) {
                    failures.push(format!(
                        "{}: {} under {policy}: expected type {want}, got {got:?}",
                        path.display(),
                        e.request
                    ));
                }
                checked.push((e.request.clone(), policy));
            }
        }
        for role in Role::ALL {
            for policy in Policy::ALL {
                assert!(
                    checked.contains(&(role.to_string(), policy)),
                    "{}: {role} under {policy} is not checked",
                    path.display()
                );
            }
        }
        covered.push(name.clone());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let missing: Vec<&String> = tables.keys().filter(|t| !covered.contains(t)).collect();
    assert!(
        missing.is_empty(),
        "tables without a selection case: {missing:?}"
    );
}
