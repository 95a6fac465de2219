//! Finds case files: every `*.yaml` below the cases folder except the recorded
//! memory tables in `devices/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The folder the suite's files are found in: the unpacked archive this binary
/// came from (`<home>/bin/vkcopy-suite` beside `<home>/manifest.json`), else
/// the repository it was built in (resolved, so that messages name
/// `<repo>/cases/...`, not `runner/../cases`).
pub fn home() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let archived = exe
        .as_deref()
        .and_then(|e| e.parent()?.parent())
        .filter(|h| crate::manifest::is_unpacked(h));
    match archived {
        Some(h) => h.to_owned(),
        None => {
            let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            own.canonicalize().unwrap_or(own)
        }
    }
}

/// The `cases/` folder: `VKCOPY_CASES` if set, else the one in [`home`].
pub fn cases_root() -> PathBuf {
    match std::env::var_os("VKCOPY_CASES") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => home().join("cases"),
    }
}

/// Case files below `root`, sorted by path: every `*.yaml` that is not a folder
/// (a pipe or other non-file is listed, and loading it says what it is).
/// Symbolic links are followed, but a folder reached twice (a link loop, or two
/// links to one folder) is an error, and so are two files with one case name
/// (`a::b.yaml` and `a/b.yaml`).
pub fn case_files(root: &Path) -> Result<Vec<PathBuf>, String> {
    let found = walk(root)?;
    let mut names: BTreeMap<String, &PathBuf> = BTreeMap::new();
    for path in &found.yaml {
        if let Some(first) = names.insert(case_name(root, path), path) {
            return Err(format!(
                "{} and {} are both case {}; rename one",
                first.display(),
                path.display(),
                case_name(root, path)
            ));
        }
    }
    Ok(found.yaml)
}

/// Files below `root` that look like cases but are not read: `*.yml`.
pub fn misnamed_files(root: &Path) -> Vec<PathBuf> {
    walk(root).map(|f| f.yml).unwrap_or_default()
}

/// What a walk of a cases folder finds, each list sorted.
#[derive(Default)]
struct Found {
    yaml: Vec<PathBuf>,
    yml: Vec<PathBuf>,
}

fn walk(root: &Path) -> Result<Found, String> {
    if !root.is_dir() {
        return Err(format!("{} is not a folder", root.display()));
    }
    let devices = root.join("devices").canonicalize().ok();
    let mut seen = BTreeMap::new();
    let mut found = Found::default();
    visit(root, devices.as_deref(), &mut seen, &mut found)?;
    found.yaml.sort();
    found.yml.sort();
    Ok(found)
}

/// Most folders a cases folder may hold: a guard for a walk that cannot end.
const MAX_FOLDERS: usize = 10_000;

fn visit(
    dir: &Path,
    devices: Option<&Path>,
    seen: &mut BTreeMap<PathBuf, PathBuf>,
    found: &mut Found,
) -> Result<(), String> {
    let real = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    if Some(real.as_path()) == devices {
        return Ok(());
    }
    if let Some(first) = seen.get(&real) {
        return Err(format!(
            "{} is folder {} again (a symbolic link loop, or a second link to it); \
             the suite reads each folder once: remove the link",
            dir.display(),
            first.display()
        ));
    }
    if seen.len() >= MAX_FOLDERS {
        return Err(format!(
            "more than {MAX_FOLDERS} folders below the cases folder"
        ));
    }
    seen.insert(real, dir.to_owned());
    let entries =
        crate::files::sorted_entries(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for path in entries {
        // Follows links; a dangling link is listed if named like a case.
        let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
        if is_dir {
            visit(&path, devices, seen, found)?;
        } else if path.extension().is_some_and(|e| e == "yaml") {
            found.yaml.push(path);
        } else if path.extension().is_some_and(|e| e == "yml") {
            found.yml.push(path);
        }
    }
    Ok(())
}

/// The test name of a case file below `root`, as `run` and `list` say it.
pub fn case_name(root: &Path, path: &Path) -> String {
    // `cases/basic/x.yaml` is below `runner/../cases` too: compare real paths
    // when the written ones differ.
    let rel = path
        .strip_prefix(root)
        .map(Path::to_owned)
        .unwrap_or_else(|_| match (root.canonicalize(), path.canonicalize()) {
            (Ok(root), Ok(real)) => real
                .strip_prefix(&root)
                .map_or(path.to_owned(), Path::to_owned),
            _ => path.to_owned(),
        });
    rel.with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("::")
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

    /// A link loop, a pipe and two files of one name, in a folder of their own.
    #[cfg(unix)]
    #[test]
    fn loops_pipes_and_twin_names() {
        let root = std::env::temp_dir().join(format!("vkcopy-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::create_dir_all(root.join("devices")).unwrap();
        std::fs::write(root.join("a/one.yaml"), "about: x").unwrap();
        std::fs::write(root.join("devices/t.yaml"), "name: t").unwrap();
        std::fs::write(root.join("a/two.yml"), "about: x").unwrap();
        let files = case_files(&root).unwrap();
        assert_eq!(files, vec![root.join("a/one.yaml")]);
        assert_eq!(misnamed_files(&root), vec![root.join("a/two.yml")]);

        std::os::unix::fs::symlink("..", root.join("a/loop")).unwrap();
        let e = case_files(&root).unwrap_err();
        assert!(
            e.contains("a/loop is folder") && e.contains("symbolic link loop"),
            "{e}"
        );
        std::fs::remove_file(root.join("a/loop")).unwrap();

        std::fs::write(root.join("a::one.yaml"), "about: x").unwrap();
        let e = case_files(&root).unwrap_err();
        assert!(e.ends_with("are both case a::one; rename one"), "{e}");
        std::fs::remove_file(root.join("a::one.yaml")).unwrap();

        let fifo = root.join("a/pipe.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert_eq!(case_files(&root).unwrap().len(), 2);
            let e = crate::files::read_text(&fifo).unwrap_err();
            assert!(e.starts_with("not a regular file"), "{e}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn filters_by_glob() {
        assert!(name_matches("halide::*", "halide::device_crop"));
        assert!(name_matches("halide/device_*", "halide::device_crop"));
        assert!(!name_matches("basic::*", "halide::device_crop"));
    }
}
