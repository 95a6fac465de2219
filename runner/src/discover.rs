//! Finds case files: every `*.yaml` below the cases folder except the recorded
//! memory tables in `devices/`.

use std::path::{Path, PathBuf};

/// The `cases/` folder: `VKCOPY_CASES` if set, else the one in this repository.
pub fn cases_root() -> PathBuf {
    match std::env::var_os("VKCOPY_CASES") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("cases"),
    }
}

/// Case files below `root`, sorted by path.
pub fn case_files(root: &Path) -> Result<Vec<PathBuf>, String> {
    if !root.is_dir() {
        return Err(format!("{} is not a folder", root.display()));
    }
    // The root is taken literally: brackets in a folder name are not a glob.
    let pattern = format!(
        "{}/**/*.yaml",
        glob::Pattern::escape(&root.to_string_lossy())
    );
    let devices = root.join("devices");
    let mut out = Vec::new();
    for entry in glob::glob(&pattern).map_err(|e| format!("{pattern}: {e}"))? {
        let path = entry.map_err(|e| e.to_string())?;
        if !path.starts_with(&devices) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Files below `root` that look like cases but are not read: `*.yml`.
pub fn misnamed_files(root: &Path) -> Vec<PathBuf> {
    let pattern = format!(
        "{}/**/*.yml",
        glob::Pattern::escape(&root.to_string_lossy())
    );
    let mut out: Vec<PathBuf> = glob::glob(&pattern)
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    out.sort();
    out
}

/// Whether `name` (`halide::device_crop`) matches a glob such as `halide::*` or
/// `*crop*`; `/` in the pattern stands for `::`.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    let pattern = pattern.replace('/', "::");
    glob::Pattern::new(&pattern)
        .map(|p| p.matches(name))
        .unwrap_or(false)
}

/// Checks that `pattern` is a valid glob, for command-line filters.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    glob::Pattern::new(&pattern.replace('/', "::"))
        .map(|_| ())
        .map_err(|e| format!("'{pattern}' is not a valid glob: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cases_but_not_device_tables() {
        let files = case_files(&cases_root()).unwrap();
        assert!(files
            .iter()
            .any(|p| p.ends_with("basic/round_trip_2d.yaml")));
        assert!(!files
            .iter()
            .any(|p| p.components().any(|c| c.as_os_str() == "devices")));
    }

    #[test]
    fn filters_by_glob() {
        assert!(name_matches("halide::*", "halide::device_crop"));
        assert!(name_matches("halide/device_*", "halide::device_crop"));
        assert!(!name_matches("basic::*", "halide::device_crop"));
    }
}
