//! Keeps ARCHITECTURE.md true: every module file of the crates is named
//! there by its path (in backticks, relative to the repository), and every path
//! it names exists.

use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The folders whose `.rs` files are modules.
const SOURCES: [&str; 9] = [
    "allocator/src",
    "kernels/src",
    "engine/src",
    "halide-harness/src",
    "fleet/src",
    "runner/src",
    "results/src",
    "halide-abi/src",
    "halide-ffi/src",
];

/// Where a path named in ARCHITECTURE.md is checked to exist.
const CHECKED: [&str; 13] = [
    "results/",
    "engine/",
    "halide-harness/",
    "fleet/",
    "allocator/",
    "halide-abi/",
    "halide-ffi/",
    "kernels/",
    "runner/",
    "cases/",
    "bench/",
    "scripts/",
    "reports/",
];

/// Named in ARCHITECTURE.md but made by runs, not committed.
const GENERATED: [&str; 1] = ["reports/out/"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The text between backticks, in order.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

fn architecture() -> String {
    std::fs::read_to_string(repo().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

#[test]
fn architecture_names_every_module() {
    let text = architecture();
    let spans = code_spans(&text);
    let mut missing = Vec::new();
    for dir in SOURCES {
        let mut files = Vec::new();
        rust_files(&repo().join(dir), &mut files);
        assert!(!files.is_empty(), "no .rs files under {dir}");
        for file in files {
            let rel = file.strip_prefix(repo()).unwrap();
            let rel = rel.to_string_lossy().replace('\\', "/");
            if !spans.contains(&rel.as_str()) {
                missing.push(rel);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name these modules (add a line for each, as `path`):\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_path_in_architecture_exists() {
    let text = architecture();
    let gone: Vec<&str> = code_spans(&text)
        .into_iter()
        .filter(|s| !s.contains(char::is_whitespace) && !s.contains('*'))
        .filter(|s| CHECKED.iter().any(|c| s.starts_with(c)))
        .filter(|s| !GENERATED.iter().any(|g| s.starts_with(g)))
        .filter(|s| !repo().join(s).exists())
        .collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md names paths that do not exist:\n  {}",
        gone.join("\n  ")
    );
}
