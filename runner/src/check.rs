//! `vkcopy-suite check`: loads and plans case files, recorded memory tables and
//! expectation files without a Vulkan instance, collecting every problem as
//! `file:line:col: step: field: what`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use vkcopy_engine::discover::{case_files, cases_root, misnamed_files};
use vkcopy_engine::expectations::Expectations;
use vkcopy_engine::layers::Layer;
use vkcopy_engine::plan;
use vkcopy_engine::rt::MemoryTable;

/// What a check looked at and what it found.
#[derive(Debug, Default)]
pub struct Checked {
    /// Case files checked.
    pub cases: usize,
    /// Recorded memory tables checked.
    pub tables: usize,
    /// Expectation files checked.
    pub expectations: usize,
    /// Located problems, one line each, in file order.
    pub errors: Vec<String>,
}

impl Checked {
    /// `checked 109 cases, 19 tables, 3 expectation files: 0 errors`
    /// (`1 case`, `1 error` in the singular).
    pub fn summary(&self) -> String {
        let n = |count: usize, one: &str| match count {
            1 => format!("1 {one}"),
            _ => format!("{count} {one}s"),
        };
        format!(
            "checked {}, {}, {}: {}",
            n(self.cases, "case"),
            n(self.tables, "table"),
            n(self.expectations, "expectation file"),
            n(self.errors.len(), "error")
        )
    }
}

/// The kind of a file to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Case,
    Table,
    Expectations,
}

/// The cases folder that `path` belongs to: the nearest folder above it with a
/// `devices/` folder (where recorded tables are looked up), else the default.
pub fn root_of(path: &Path) -> PathBuf {
    let start = if path.is_dir() {
        Some(path)
    } else {
        path.parent()
    };
    start
        .into_iter()
        .flat_map(Path::ancestors)
        .find(|d| d.join("devices").is_dir())
        .map(Path::to_owned)
        .unwrap_or_else(cases_root)
}

fn parent_named(path: &Path, name: &str) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == name)
}

/// Whether `path` is in `expectations/` or in one of its layer folders.
fn in_expectations(path: &Path) -> bool {
    parent_named(path, "expectations")
        || (Layer::FOLDERS.iter().any(|f| parent_named(path, f))
            && path
                .parent()
                .is_some_and(|p| parent_named(p, "expectations")))
}

/// A file directly in `expectations/` that no run reads: not `all.yaml`, a
/// policy's or a runtime's (a device's list belongs in a layer folder).
fn unread_expectations(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let read = name == "all.yaml" || name.starts_with("policy-") || name.starts_with("runtime-");
    (!read && parent_named(path, "expectations")).then(|| {
        format!(
            "{}: no run reads this file by itself: a device's expectations go in \
             device/, model/ or driver/ (reports/README.md, expectations), or name it with --expectations",
            path.display()
        )
    })
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.is_dir() && p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    out.sort();
    out
}

/// The files below `path`, by kind: a folder gives its cases, the tables of
/// its `devices/` folder and, for a cases folder, the expectation files in
/// `../reports/expectations/`; a file is a table in a `devices/` folder, an
/// expectations file in an `expectations/` folder, else a case.
fn files(path: &Path, out: &mut BTreeSet<(Kind, PathBuf)>) -> Result<(), String> {
    if path.exists() && !path.is_dir() {
        let kind = if parent_named(path, "devices") {
            Kind::Table
        } else if in_expectations(path) {
            Kind::Expectations
        } else {
            Kind::Case
        };
        out.insert((kind, path.to_owned()));
        return Ok(());
    }
    if !path.is_dir() {
        return Err(format!("{}: no such file or folder", path.display()));
    }
    if path.file_name().is_some_and(|n| n == "devices") {
        out.extend(yaml_files(path).into_iter().map(|p| (Kind::Table, p)));
        return Ok(());
    }
    out.extend(case_files(path)?.into_iter().map(|p| (Kind::Case, p)));
    let devices = path.join("devices");
    out.extend(yaml_files(&devices).into_iter().map(|p| (Kind::Table, p)));
    if devices.is_dir() {
        let expectations = crate::suite::expectations_dir(path);
        let layers = Layer::FOLDERS.iter().map(|f| expectations.join(f));
        out.extend(
            std::iter::once(expectations.clone())
                .chain(layers)
                .flat_map(|d| yaml_files(&d))
                .map(|p| (Kind::Expectations, p)),
        );
    }
    Ok(())
}

/// Folders' `*.yml` files, which the suite does not read: a case written so is
/// silently never run.
fn misnamed(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .filter(|p| p.is_dir())
        .flat_map(|p| misnamed_files(p.as_path()))
        .map(|f| {
            format!(
                "{}: the suite reads only *.yaml files; rename it to .yaml",
                f.display()
            )
        })
        .collect()
}

/// Reads a recorded table as the suite does: a regular file of bounded size,
/// without YAML tags.
fn read_table(path: &Path) -> Result<(), String> {
    let src =
        vkcopy_engine::files::read_text(path).map_err(|e| format!("{}: {e}", path.display()))?;
    vkcopy_engine::error::refuse_tags(path, &src).map_err(|e| e.to_string())?;
    MemoryTable::from_yaml_str(&src, &path.display().to_string())
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Checks `paths` (the default cases folder when empty).
pub fn check(paths: &[PathBuf]) -> Checked {
    let default = [cases_root()];
    let paths = if paths.is_empty() {
        &default[..]
    } else {
        paths
    };
    let mut found = BTreeSet::new();
    let mut checked = Checked::default();
    for p in paths {
        if let Err(e) = files(p, &mut found) {
            checked.errors.push(e);
        }
    }
    checked.errors.extend(misnamed(paths));
    for (kind, path) in &found {
        let result = match kind {
            Kind::Case => {
                checked.cases += 1;
                if let Err(errors) = plan::load_all(&root_of(path), path) {
                    checked
                        .errors
                        .extend(errors.iter().map(ToString::to_string));
                }
                Ok(())
            }
            Kind::Table => {
                checked.tables += 1;
                read_table(path)
            }
            Kind::Expectations => {
                checked.expectations += 1;
                match unread_expectations(path) {
                    Some(e) => Err(e),
                    None => Expectations::load(path).map(drop),
                }
            }
        };
        if let Err(e) = result {
            checked.errors.push(e);
        }
    }
    checked
}
