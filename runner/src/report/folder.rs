//! A run's report folder: written whole into a temporary folder, then renamed
//! to a name no run has taken, so that a folder is either a complete report or
//! absent, and no run overwrites another.

use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

/// Writes `files` (name, contents) into a new folder `parent/<name>`, or
/// `parent/<name>-2`, `-3` ... when taken; returns the folder. Nothing is left
/// behind on an error.
pub fn write_new(parent: &Path, name: &str, files: &[(&str, Vec<u8>)]) -> io::Result<PathBuf> {
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(".tmp-{name}-{}", std::process::id()));
    if tmp.exists() {
        // Left by an earlier process of the same id that was killed mid-write.
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir(&tmp)?;
    let written = files
        .iter()
        .try_for_each(|(file, bytes)| std::fs::write(tmp.join(file), bytes));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    for n in 1.. {
        let target = if n == 1 {
            parent.join(name)
        } else {
            parent.join(format!("{name}-{n}"))
        };
        if target.exists() {
            continue;
        }
        match std::fs::rename(&tmp, &target) {
            Ok(()) => return Ok(target),
            // Another run took the name between the check and the rename.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::AlreadyExists | ErrorKind::DirectoryNotEmpty
                ) => {}
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        }
    }
    unreachable!("an unbounded range ends only by returning")
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
        let a = write_new(dir.path(), "run", &[("a.txt", b"first".to_vec())]).unwrap();
        let b = write_new(dir.path(), "run", &[("a.txt", b"second".to_vec())]).unwrap();
        assert_eq!(a, dir.path().join("run"));
        assert_eq!(b, dir.path().join("run-2"));
        assert_eq!(std::fs::read(a.join("a.txt")).unwrap(), b"first");
        assert_eq!(std::fs::read(b.join("a.txt")).unwrap(), b"second");
        // No temporary folder is left.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_failed_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_new(dir.path(), "run", &[("no/such/sub.txt", Vec::new())]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn stamps_make_folder_names() {
        assert_eq!(stamp_name("2026-12-01T12:23:48Z"), "20261201T122348Z");
    }
}
