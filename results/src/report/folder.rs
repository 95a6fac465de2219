//! A run's report folder. Its name is taken when the run starts (a name no run
//! has taken), so that cases can be written into it as they end
//! ([`super::journal`]); the report files are written at the end, each into a
//! temporary file renamed into place, `results.json` last. A folder without
//! `results.json` is a run in progress or one that was interrupted.

use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

/// The file whose presence says that a run's report is complete.
pub const RESULTS: &str = "results.json";

/// Creates a new folder `parent/<name>`, or `parent/<name>-2`, `-3` ... when
/// taken (by an earlier run, or by another run at the same moment).
pub fn create_new(parent: &Path, name: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(parent)?;
    for n in 1.. {
        let target = if n == 1 {
            parent.join(name)
        } else {
            parent.join(format!("{name}-{n}"))
        };
        match std::fs::create_dir(&target) {
            Ok(()) => return Ok(target),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    unreachable!("an unbounded range ends only by returning")
}

/// Writes `files` (name, contents) into `dir`, each whole or not at all, the
/// [`RESULTS`] file last whatever its place in `files`. On an error, the files
/// written so far are removed again.
pub fn fill(dir: &Path, files: &[(&str, Vec<u8>)]) -> io::Result<()> {
    let mut order: Vec<&(&str, Vec<u8>)> = files.iter().collect();
    order.sort_by_key(|(name, _)| *name == RESULTS);
    let mut written = Vec::new();
    for (name, bytes) in order {
        let tmp = dir.join(format!(".{name}.tmp"));
        let done = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, dir.join(name)));
        if let Err(e) = done {
            let _ = std::fs::remove_file(&tmp);
            for w in written {
                let _ = std::fs::remove_file(dir.join(w));
            }
            return Err(e);
        }
        written.push(*name);
    }
    Ok(())
}

/// `2026-12-01T12:23:48Z` as a folder name: `20261201T122348Z`.
pub fn stamp_name(utc: &str) -> String {
    utc.chars().filter(|c| !matches!(c, '-' | ':')).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_gets_its_own_folder() {
        let dir = tempfile::tempdir().unwrap();
        let a = create_new(dir.path(), "run").unwrap();
        let b = create_new(dir.path(), "run").unwrap();
        assert_eq!(a, dir.path().join("run"));
        assert_eq!(b, dir.path().join("run-2"));
        fill(&a, &[("a.txt", b"first".to_vec())]).unwrap();
        fill(&b, &[("a.txt", b"second".to_vec())]).unwrap();
        assert_eq!(std::fs::read(a.join("a.txt")).unwrap(), b"first");
        assert_eq!(std::fs::read(b.join("a.txt")).unwrap(), b"second");
        // No temporary file is left.
        let names: Vec<_> = std::fs::read_dir(&a)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["a.txt"]);
    }

    #[test]
    fn a_failed_write_leaves_no_report() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            (RESULTS, b"{}".to_vec()),
            ("summary.md", b"x".to_vec()),
            ("no/such/sub.txt", Vec::new()),
        ];
        let err = fill(dir.path(), &files).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        // Neither the files before the failing one nor results.json remain.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn results_are_written_last() {
        let dir = tempfile::tempdir().unwrap();
        // results.json first in the list, then a file that cannot be written:
        // a reader must never find results.json beside a half report.
        let files = [(RESULTS, b"{}".to_vec()), ("no/such.txt", Vec::new())];
        assert!(fill(dir.path(), &files).is_err());
        assert!(!dir.path().join(RESULTS).exists());
    }

    #[test]
    fn stamps_make_folder_names() {
        assert_eq!(stamp_name("2026-12-01T12:23:48Z"), "20261201T122348Z");
    }
}
