//! The manifest at the top of an unpacked archive of the suite: what makes a
//! folder a home of the suite ([`crate::discover::home`]), written and read by
//! the fleet's archive.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The manifest's file name, at the top of an unpacked archive.
pub const MANIFEST: &str = "manifest.json";

/// The binary's place in an unpacked archive.
pub const BINARY: &str = "bin/vkcopy-suite";

/// The archive's layout version; an unpacker refuses another.
pub const FORMAT: u32 = 1;

/// What an archive holds, and what built it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`] of the archive's writer.
    pub format: u32,
    /// `vkcopy-suite`'s version.
    pub suite_version: String,
    /// The commit of the repository archived, when it is a git checkout.
    pub commit: Option<String>,
    /// Whether the checkout had changes not committed.
    pub dirty: bool,
    /// When the archive was written, UTC.
    pub created: String,
    /// The binary's architecture and OS, as Rust names them.
    pub target: String,
    /// `release` or `debug`, when the binary is the one that wrote the archive.
    pub profile: Option<String>,
    /// The Halide runtimes carried: `halide:NAME` runs each.
    pub halide_runtimes: Vec<String>,
    /// Every file but the manifest, in archive order.
    pub files: Vec<FileEntry>,
}

/// One file of an archive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Below the archive's top folder, `/`-separated.
    pub path: String,
    /// Its size.
    pub bytes: u64,
}

/// Whether `dir` is an unpacked archive: its manifest reads, of this format.
pub fn is_unpacked(dir: &Path) -> bool {
    std::fs::read(dir.join(MANIFEST))
        .ok()
        .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
        .is_some_and(|m| m.format == FORMAT)
}
