//! Reading the suite's own files (cases, recorded tables): regular files only,
//! their size checked before a byte is read, so that a named pipe, a device or
//! a stray large file gives an error instead of a hang.

use std::path::Path;

/// Largest case or table file read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The text of the regular file `path`, at most [`MAX_FILE_BYTES`] long.
pub fn read_text(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err(
            "not a regular file (a folder, pipe or device); the suite reads only files".into(),
        );
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} bytes; a case or table file is at most {MAX_FILE_BYTES}",
            meta.len()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))
}

/// `path` as a report shows it: resolved (no `..`), and relative to the
/// working directory when inside it.
pub fn shown(path: &Path) -> String {
    let full = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let here = std::env::current_dir().and_then(std::fs::canonicalize);
    match here.as_ref().map(|h| full.strip_prefix(h)) {
        Ok(Ok(rel)) => rel.display().to_string(),
        _ => full.display().to_string(),
    }
}

/// The entries of the folder `dir`, sorted by path.
pub fn sorted_entries(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut entries: Vec<std::path::PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    Ok(entries)
}

/// Whether a YAML text has nothing but blank lines and comments.
pub fn blank(src: &str) -> bool {
    src.lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_folders_and_large_files() {
        let dir = std::env::temp_dir().join(format!("vkcopy-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(read_text(&dir)
            .unwrap_err()
            .starts_with("not a regular file"));
        let big = dir.join("big.yaml");
        std::fs::write(&big, vec![b' '; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert_eq!(
            read_text(&big).unwrap_err(),
            format!(
                "{} bytes; a case or table file is at most {MAX_FILE_BYTES}",
                MAX_FILE_BYTES + 1
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn shown_paths_are_resolved() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("b.yaml"), "").unwrap();
        let full = std::fs::canonicalize(dir.path()).unwrap().join("b.yaml");
        assert_eq!(
            shown(&dir.path().join("a/../b.yaml")),
            full.display().to_string()
        );
        assert_eq!(shown(std::path::Path::new("Cargo.toml")), "Cargo.toml");
    }
}
