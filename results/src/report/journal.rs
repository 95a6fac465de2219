//! `journal.jsonl`: a run's cases written as each one ends, so that a GPU hang,
//! a kill or a reboot loses at most the case in flight, and `run --resume DIR`
//! goes on from there (as IGT's runner resumes). Line 1 is the [`Header`]; each
//! further line one [`CaseRecord`], in the order the cases ended, each flushed
//! to the disk before the next case is counted.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::CaseRecord;

/// The journal's file name in a run's folder.
pub const FILE: &str = "journal.jsonl";

/// What a resumed run needs to run as the interrupted one did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// `run`'s arguments, as given.
    pub argv: Vec<String>,
    /// The folder they were given in (relative paths among them are relative to it).
    pub cwd: PathBuf,
    /// When the run started, UTC.
    pub started: String,
    /// The device it opened.
    pub device: String,
}

/// A journal open for appending.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
}

impl Journal {
    /// A new journal in the run folder `dir`, its header written.
    pub fn create(dir: &Path, header: &Header) -> std::io::Result<Journal> {
        let path = dir.join(FILE);
        let mut j = Journal {
            file: File::create_new(&path)?,
            path,
        };
        j.line(header)?;
        Ok(j)
    }

    /// The journal of an interrupted run in `dir`, to append to.
    pub fn reopen(dir: &Path) -> std::io::Result<Journal> {
        let path = dir.join(FILE);
        let file = std::fs::OpenOptions::new().append(true).open(&path)?;
        Ok(Journal { file, path })
    }

    /// Appends one case, on the disk when this returns.
    pub fn append(&mut self, record: &CaseRecord) -> std::io::Result<()> {
        self.line(record)
    }

    /// Where the journal is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn line(&mut self, value: &impl Serialize) -> std::io::Result<()> {
        let mut text = serde_json::to_string(value).map_err(std::io::Error::other)?;
        text.push('\n');
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()
    }
}

/// The header and the cases of the journal in `dir`. A last line cut short
/// (the process killed mid-write) is dropped; any other bad line is an error.
pub fn read(dir: &Path) -> Result<(Header, Vec<CaseRecord>), String> {
    let path = dir.join(FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.split_inclusive('\n');
    let bad = |n: usize, e: serde_json::Error| format!("{}:{n}: {e}", path.display());
    let header: Header = match lines.next() {
        Some(l) => serde_json::from_str(l).map_err(|e| bad(1, e))?,
        None => return Err(format!("{}: empty: not a run's journal", path.display())),
    };
    let mut cases = Vec::new();
    for (i, line) in lines.enumerate() {
        match serde_json::from_str(line) {
            Ok(c) => cases.push(c),
            Err(_) if !line.ends_with('\n') => break,
            Err(e) => return Err(bad(i + 2, e)),
        }
    }
    Ok((header, cases))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{Outcome, Status, Verdict};

    fn record(name: &str) -> CaseRecord {
        CaseRecord {
            name: name.into(),
            path: format!("{name}.yaml"),
            verdict: Verdict::Pass,
            attempts: 1,
            expectation: None,
            expected_by: None,
            tags: vec!["fast".into()],
            outcome: Outcome::new(
                Status::Pass,
                String::new(),
                std::time::Duration::from_millis(5),
            ),
        }
    }

    fn header() -> Header {
        Header {
            argv: vec!["--jobs".into(), "2".into()],
            cwd: "/tmp".into(),
            started: "2026-12-04T10:00:00Z".into(),
            device: "llvmpipe".into(),
        }
    }

    #[test]
    fn cases_come_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path(), &header()).unwrap();
        j.append(&record("a")).unwrap();
        drop(j);
        let mut j = Journal::reopen(dir.path()).unwrap();
        j.append(&record("b")).unwrap();
        let (h, cases) = read(dir.path()).unwrap();
        assert_eq!(h, header());
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(cases[1].tags, ["fast"]);
        // A second journal in one folder is refused, not mixed in.
        assert!(Journal::create(dir.path(), &header()).is_err());
    }

    #[test]
    fn a_line_cut_short_is_dropped_and_a_bad_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path(), &header()).unwrap();
        j.append(&record("a")).unwrap();
        let path = j.path().to_owned();
        drop(j);
        let whole = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{whole}{{\"name\": \"b\", \"pa")).unwrap();
        assert_eq!(read(dir.path()).unwrap().1.len(), 1);
        std::fs::write(&path, format!("{whole}not json\n")).unwrap();
        let err = read(dir.path()).unwrap_err();
        assert!(err.contains("journal.jsonl:3: "), "{err}");
    }
}
