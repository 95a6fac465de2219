//! The suite built once and carried to machines without Rust, as nextest
//! archives its builds: one `.tar.zst` holding the binary, the cases and their
//! tables, the expectations, the results schema and the Halide runtimes built
//! under `target/halide/`, with a manifest of versions first.
//!
//! ```text
//! <name>/manifest.json
//! <name>/bin/vkcopy-suite
//! <name>/cases/...                      cases/devices/ holds the tables
//! <name>/reports/expectations/...
//! <name>/reports/results.schema.json
//! <name>/target/halide/<runtime>/libhalide_runtime_vulkan.so
//! ```
//! An unpacked archive is a home of the suite ([`vkcopy_engine::discover::home`]): its
//! binary finds its cases and runtimes beside it.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

pub use vkcopy_engine::manifest::{is_unpacked, FileEntry, Manifest, BINARY, FORMAT, MANIFEST};

/// What to archive: the suite's home (a repository or an unpacked archive)
/// and the binary to carry.
pub struct Sources<'a> {
    /// The folder holding `cases/`, `reports/` and `target/halide/`.
    pub home: &'a Path,
    /// The `vkcopy-suite` binary.
    pub binary: &'a Path,
    /// `release` or `debug`, when known.
    pub profile: Option<&'a str>,
}

/// Why an archive could not be written, read or unpacked: each names the file
/// or folder it is about.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The archive is not one this binary reads.
    #[error("{}: {why}", file.display())]
    NotSuite {
        /// The archive.
        file: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The archive's manifest does not parse.
    #[error("{}: {MANIFEST}: {source}", file.display())]
    Manifest {
        /// The archive.
        file: PathBuf,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// Unpacking would remove what is not an unpacked archive.
    #[error("{}: {why}; name another with --extract-to", folder.display())]
    Occupied {
        /// The folder to unpack into.
        folder: PathBuf,
        /// What is there.
        why: &'static str,
    },
    /// A name or folder the archive cannot be made from.
    #[error("{}: {why}", path.display())]
    Refused {
        /// The name or folder.
        path: PathBuf,
        /// Why.
        why: &'static str,
    },
}

/// `path: error` for an I/O error.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io {
        path: path.to_owned(),
        source,
    }
}

fn not_suite(file: &Path, why: String) -> ArchiveError {
    ArchiveError::NotSuite {
        file: file.to_owned(),
        why,
    }
}

/// Writes the archive `out`, its top folder named after `out` without
/// `.tar.zst`, and returns its manifest.
pub fn write(out: &Path, src: &Sources) -> Result<Manifest, ArchiveError> {
    let top = top_name(out)?;
    let mut files: Vec<(String, PathBuf)> = vec![(BINARY.into(), src.binary.to_owned())];
    for dir in ["cases", "reports/expectations"] {
        let root = src.home.join(dir);
        if !root.is_dir() {
            return Err(ArchiveError::Refused {
                path: root,
                why: "no such folder to archive",
            });
        }
        collect(&root, dir, &mut files)?;
    }
    let schema = src.home.join("reports/results.schema.json");
    if schema.is_file() {
        files.push(("reports/results.schema.json".into(), schema));
    }
    let mut halide_runtimes = Vec::new();
    if let Ok(dirs) = std::fs::read_dir(src.home.join("target/halide")) {
        let mut dirs: Vec<PathBuf> = dirs.filter_map(|d| d.ok().map(|d| d.path())).collect();
        dirs.sort();
        for dir in dirs {
            let lib = dir.join("libhalide_runtime_vulkan.so");
            let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if lib.is_file() {
                files.push((
                    format!("target/halide/{name}/libhalide_runtime_vulkan.so"),
                    lib,
                ));
                halide_runtimes.push(name.to_owned());
            }
        }
    }
    let mut entries = Vec::new();
    for (path, from) in &files {
        let meta = std::fs::metadata(from).map_err(io(from))?;
        entries.push(FileEntry {
            path: path.clone(),
            bytes: meta.len(),
        });
    }
    let (commit, dirty) = git_state(src.home);
    let manifest = Manifest {
        format: FORMAT,
        suite_version: env!("CARGO_PKG_VERSION").into(),
        commit,
        dirty,
        created: vkcopy_engine::stamp::utc_now(),
        target: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
        profile: src.profile.map(str::to_owned),
        halide_runtimes,
        files: entries,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
    let mut tar = tar::Builder::new(Vec::new());
    tar.mode(tar::HeaderMode::Deterministic);
    // Plain entries, which every tar reads (a binary's runs of zeros would
    // otherwise become GNU sparse entries).
    tar.sparse(false);
    let mut header = tar::Header::new_gnu();
    header.set_size(json.len() as u64);
    header.set_mode(0o644);
    tar.append_data(&mut header, format!("{top}/{MANIFEST}"), json.as_slice())
        .map_err(io(out))?;
    for (path, from) in &files {
        let mut f = std::fs::File::open(from).map_err(io(from))?;
        tar.append_file(format!("{top}/{path}"), &mut f)
            .map_err(io(from))?;
    }
    let tarball = tar.into_inner().map_err(io(out))?;
    let tmp = out.with_extension("zst.tmp");
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut w = std::io::BufWriter::new(file);
    ruzstd::encoding::compress(
        tarball.as_slice(),
        &mut w,
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    let done = w
        .flush()
        .and_then(|()| std::fs::rename(&tmp, out))
        .map_err(io(out));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done.map(|()| manifest)
}

/// The manifest at the start of the archive `file`, read without unpacking the rest.
pub fn read_manifest(file: &Path) -> Result<Manifest, ArchiveError> {
    let mut tar = open(file)?;
    let mut entries = tar.entries().map_err(io(file))?;
    let first = entries
        .next()
        .ok_or_else(|| not_suite(file, "an empty archive".into()))?
        .map_err(io(file))?;
    manifest_of(file, first)
}

/// Unpacks the archive `file` into the folder `into` (its top folder's
/// contents, not the folder itself) and returns its manifest. A folder that
/// already holds this very archive (an equal manifest) is kept as it is; one
/// that holds another archive is replaced; any other folder that is not empty
/// is an error, so that nothing of a user's is removed.
pub fn unpack(file: &Path, into: &Path) -> Result<Manifest, ArchiveError> {
    let manifest = read_manifest(file)?;
    if manifest.format != FORMAT {
        let why = format!(
            "archive format {}; this binary reads format {FORMAT}",
            manifest.format
        );
        return Err(not_suite(file, why));
    }
    if into.exists() && !into.is_dir() {
        return Err(ArchiveError::Occupied {
            folder: into.to_owned(),
            why: "a file is there, not a folder",
        });
    }
    let present = into.join(MANIFEST);
    if present.is_file() {
        let old = std::fs::read(&present)
            .ok()
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok());
        if old.as_ref() == Some(&manifest) && into.join(BINARY).is_file() {
            return Ok(manifest);
        }
        std::fs::remove_dir_all(into).map_err(io(into))?;
    } else if std::fs::read_dir(into).is_ok_and(|mut d| d.next().is_some()) {
        return Err(ArchiveError::Occupied {
            folder: into.to_owned(),
            why: "a folder that is not an unpacked archive",
        });
    }
    // Into a sibling first, renamed into place when whole.
    let mut part = into.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    let _ = std::fs::remove_dir_all(&part);
    let result =
        unpack_into(file, &part).and_then(|()| std::fs::rename(&part, into).map_err(io(into)));
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&part);
    }
    result.map(|()| manifest)
}

fn unpack_into(file: &Path, dir: &Path) -> Result<(), ArchiveError> {
    let mut tar = open(file)?;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for entry in tar.entries().map_err(io(file))? {
        let mut entry = entry.map_err(io(file))?;
        let path = entry.path().map_err(io(file))?.into_owned();
        let mut parts = path.components();
        parts.next();
        let rel: PathBuf = parts.collect();
        if rel.as_os_str().is_empty() {
            continue;
        }
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            let why = format!("{}: a path outside the archive's folder", path.display());
            return Err(not_suite(file, why));
        }
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            let why = format!("{}: neither a file nor a folder ({kind:?})", path.display());
            return Err(not_suite(file, why));
        }
        let target = dir.join(&rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        entry.unpack(&target).map_err(io(&target))?;
    }
    if !dir.join(BINARY).is_file() || !dir.join(MANIFEST).is_file() {
        let why = format!("not an archive of the suite (no {BINARY} or {MANIFEST})");
        return Err(not_suite(file, why));
    }
    Ok(())
}

fn open(file: &Path) -> Result<tar::Archive<impl Read>, ArchiveError> {
    let f = std::fs::File::open(file).map_err(io(file))?;
    let zstd = ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(f))
        .map_err(|e| not_suite(file, format!("not a zstd file: {e}")))?;
    Ok(tar::Archive::new(zstd))
}

fn manifest_of(file: &Path, mut entry: tar::Entry<impl Read>) -> Result<Manifest, ArchiveError> {
    let path = entry.path().map(|p| p.into_owned()).unwrap_or_default();
    if path.file_name().and_then(|n| n.to_str()) != Some(MANIFEST) {
        let why = format!(
            "not an archive of the suite: it starts with {}, not {MANIFEST}",
            path.display()
        );
        return Err(not_suite(file, why));
    }
    let mut text = Vec::new();
    entry.read_to_end(&mut text).map_err(io(file))?;
    serde_json::from_slice(&text).map_err(|source| ArchiveError::Manifest {
        file: file.to_owned(),
        source,
    })
}

/// The archive's top folder: its file name without `.tar.zst`.
fn top_name(out: &Path) -> Result<String, ArchiveError> {
    let name = out.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name.strip_suffix(".tar.zst") {
        Some(stem) if !stem.is_empty() => Ok(stem.to_owned()),
        _ => Err(ArchiveError::Refused {
            path: out.to_owned(),
            why: "an archive's name ends in .tar.zst",
        }),
    }
}

/// The folder an archive unpacks into by default: beside it, named as its top folder.
pub fn default_folder(file: &Path) -> Result<PathBuf, ArchiveError> {
    let top = top_name(file)?;
    Ok(file.parent().unwrap_or(Path::new(".")).join(top))
}

fn collect(
    dir: &Path,
    under: &str,
    files: &mut Vec<(String, PathBuf)>,
) -> Result<(), ArchiveError> {
    let entries = vkcopy_engine::files::sorted_entries(dir).map_err(io(dir))?;
    for path in entries {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let rel = format!("{under}/{name}");
        if path.is_dir() {
            collect(&path, &rel, files)?;
        } else if path.is_file() {
            files.push((rel, path));
        }
    }
    Ok(())
}

/// The checkout's commit and whether it has changes; `(None, false)` outside git.
fn git_state(home: &Path) -> (Option<String>, bool) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(home)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&["status", "--porcelain", "--", "."]).is_some_and(|s| !s.is_empty());
            (Some(commit), dirty)
        }
        None => (None, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        for (f, text) in [
            ("cases/basic/a.yaml", "about: a\n"),
            ("cases/devices/t.yaml", "name: t\n"),
            ("reports/expectations/all.yaml", "expected_failures: []\n"),
            (
                "reports/expectations/driver/mesa-x.yaml",
                "known_flakes: []\n",
            ),
            ("target/halide/21.0.0/libhalide_runtime_vulkan.so", "lib"),
            ("target/halide/broken/other.o", "o"),
            ("bin", "#!/bin/sh\n"),
        ] {
            std::fs::create_dir_all(p.join(f).parent().unwrap()).unwrap();
            std::fs::write(p.join(f), text).unwrap();
        }
        dir
    }

    #[test]
    fn an_archive_unpacks_to_what_was_archived() {
        let h = home();
        let out = h.path().join("suite-x.tar.zst");
        let src = Sources {
            home: h.path(),
            binary: &h.path().join("bin"),
            profile: Some("debug"),
        };
        let m = write(&out, &src).unwrap();
        assert_eq!(m.halide_runtimes, ["21.0.0"]);
        let paths: Vec<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                BINARY,
                "cases/basic/a.yaml",
                "cases/devices/t.yaml",
                "reports/expectations/all.yaml",
                "reports/expectations/driver/mesa-x.yaml",
                "target/halide/21.0.0/libhalide_runtime_vulkan.so",
            ]
        );
        assert_eq!(read_manifest(&out).unwrap(), m);
        let into = default_folder(&out).unwrap();
        assert_eq!(into, h.path().join("suite-x"));
        assert_eq!(unpack(&out, &into).unwrap(), m);
        assert!(is_unpacked(&into) && !is_unpacked(h.path()));
        for f in &m.files {
            let got = std::fs::read(into.join(&f.path)).unwrap();
            assert_eq!(got.len() as u64, f.bytes, "{}", f.path);
        }
        assert_eq!(
            std::fs::read_to_string(into.join("cases/basic/a.yaml")).unwrap(),
            "about: a\n"
        );
        // Unpacked again: kept; a changed unpacked copy with another manifest is replaced.
        std::fs::write(into.join("cases/basic/a.yaml"), "x").unwrap();
        unpack(&out, &into).unwrap();
        assert_eq!(
            std::fs::read_to_string(into.join("cases/basic/a.yaml")).unwrap(),
            "x"
        );
        std::fs::write(into.join(MANIFEST), "{}").unwrap();
        unpack(&out, &into).unwrap();
        assert_eq!(
            std::fs::read_to_string(into.join("cases/basic/a.yaml")).unwrap(),
            "about: a\n"
        );
    }

    #[test]
    fn bad_archives_and_folders_are_refused() {
        let h = home();
        let src = Sources {
            home: h.path(),
            binary: &h.path().join("bin"),
            profile: None,
        };
        let e = write(&h.path().join("suite.tgz"), &src).unwrap_err();
        assert!(matches!(e, ArchiveError::Refused { .. }), "{e:?}");
        assert!(
            e.to_string()
                .ends_with("an archive's name ends in .tar.zst"),
            "{e}"
        );
        let out = h.path().join("s.tar.zst");
        write(&out, &src).unwrap();
        // A folder of the user's is never removed.
        let mine = h.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(mine.join("notes.txt"), "keep").unwrap();
        let e = unpack(&out, &mine).unwrap_err();
        assert!(matches!(&e, ArchiveError::Occupied { folder, .. } if *folder == mine));
        assert!(e.to_string().contains("not an unpacked archive"), "{e}");
        assert_eq!(
            std::fs::read_to_string(mine.join("notes.txt")).unwrap(),
            "keep"
        );
        // A file where the folder would go (the binary carried beside its archive).
        std::fs::write(h.path().join("s"), "binary").unwrap();
        let e = unpack(&out, &default_folder(&out).unwrap()).unwrap_err();
        assert!(matches!(e, ArchiveError::Occupied { .. }), "{e:?}");
        assert!(
            e.to_string().contains("a file is there, not a folder"),
            "{e}"
        );
        // Not zstd.
        let e = read_manifest(&h.path().join("cases/basic/a.yaml")).unwrap_err();
        assert!(matches!(e, ArchiveError::NotSuite { .. }), "{e:?}");
        assert!(e.to_string().contains("not a zstd file"), "{e}");
    }
}
