//! `archive`: the suite in one file for machines without Rust; and `run
//! --archive`, which unpacks one and runs its binary.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vkcopy_fleet::archive::{self, Manifest, Sources};

use super::fail;

/// `vkcopy-suite archive`'s options.
#[derive(clap::Args)]
pub struct Args {
    /// The archive to write, named `<name>.tar.zst`; it unpacks into `<name>/`.
    #[arg(value_name = "OUT")]
    out: PathBuf,
    /// The binary to carry; default: this one. Build it with `cargo build
    /// --release -p vkcopy-suite` first: a debug build is several times slower.
    #[arg(long, value_name = "FILE")]
    binary: Option<PathBuf>,
}

/// Writes the archive and prints what it holds.
pub fn archive(args: &Args) -> ExitCode {
    let (binary, profile) = match &args.binary {
        Some(b) => (b.clone(), None),
        None => match std::env::current_exe() {
            Ok(b) => (
                b,
                Some(if cfg!(debug_assertions) {
                    "debug"
                } else {
                    "release"
                }),
            ),
            Err(e) => return fail(format!("this binary's path: {e}")),
        },
    };
    if profile == Some("debug") {
        eprintln!(
            "warning: carrying a debug build; `cargo run --release -p vkcopy-suite -- archive ...` carries a release one"
        );
    }
    let home = vkcopy_engine::discover::home();
    let src = Sources {
        home: &home,
        binary: &binary,
        profile,
    };
    match archive::write(&args.out, &src) {
        Ok(m) => {
            let bytes = std::fs::metadata(&args.out).map_or(0, |m| m.len());
            out!(
                "wrote {} ({:.1} MB): {} files of {}{}",
                args.out.display(),
                bytes as f64 / 1e6,
                m.files.len(),
                home.display(),
                describe(&m)
            );
            out!(
                "run it where there is no Rust: vkcopy-suite run --archive {} [options], or unpack it with `tar --zstd -xf` and run <name>/bin/vkcopy-suite run",
                args.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `run --archive FILE`: unpacks and runs the archived binary with the other
/// options of this command line, as this process (exec).
pub fn run_archived(file: &Path, extract_to: Option<&Path>) -> ExitCode {
    let into = match extract_to {
        Some(d) => d.to_owned(),
        None => match archive::default_folder(file) {
            Ok(d) => d,
            Err(e) => return fail(format!("--archive {e}")),
        },
    };
    let manifest = match archive::unpack(file, &into) {
        Ok(m) => m,
        Err(e) => return fail(format!("--archive {e}")),
    };
    let into = into.canonicalize().unwrap_or(into);
    let binary = into.join(archive::BINARY);
    out!(
        "archive: {}{}, in {}",
        file.canonicalize().unwrap_or(file.to_owned()).display(),
        describe(&manifest),
        into.display()
    );
    let mut cmd = std::process::Command::new(&binary);
    cmd.arg("run").args(other_options(std::env::args_os()));
    use std::os::unix::process::CommandExt;
    let e = cmd.exec();
    fail(format!("{}: {e}", binary.display()))
}

/// `run`'s options on a command line, without `--archive` and `--extract-to`.
fn other_options(argv: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut given = argv.skip_while(|a| a != "run").skip(1);
    let mut kept = Vec::new();
    while let Some(a) = given.next() {
        let text = a.to_string_lossy();
        if text == "--archive" || text == "--extract-to" {
            given.next();
        } else if !(text.starts_with("--archive=") || text.starts_with("--extract-to=")) {
            kept.push(a);
        }
    }
    kept
}

/// ` (vkcopy-suite 0.1.0, commit abc1234, release, Halide runtimes 21.0.0)`.
fn describe(m: &Manifest) -> String {
    let mut parts = vec![format!("vkcopy-suite {}", m.suite_version)];
    if let Some(c) = &m.commit {
        let short: String = c.chars().take(12).collect();
        parts.push(format!(
            "commit {short}{}",
            if m.dirty { " with changes" } else { "" }
        ));
    }
    if let Some(p) = &m.profile {
        parts.push(p.clone());
    }
    if !m.halide_runtimes.is_empty() {
        parts.push(format!("Halide runtimes {}", m.halide_runtimes.join(", ")));
    }
    format!(" ({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_options_are_taken_off_the_command_line() {
        let argv = [
            "vkcopy-suite",
            "run",
            "--archive",
            "a.tar.zst",
            "--jobs",
            "2",
            "--extract-to=/tmp/x",
            "--filter",
            "basic::*",
        ]
        .map(OsString::from);
        let kept = other_options(argv.into_iter());
        assert_eq!(
            kept,
            ["--jobs", "2", "--filter", "basic::*"].map(OsString::from)
        );
    }
}
