//! Which runtime a run tests: chosen once (`--runtime`, or `VKCOPY_RUNTIME`
//! for `cargo test`), then passed by value to the suite and to every worker
//! on its command line.

use std::path::{Path, PathBuf};

/// The variable that picks the runtime under `cargo test` (and the CLI's default).
pub const VAR: &str = "VKCOPY_RUNTIME";

/// The runtime under test.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    /// vkcopy's own API.
    #[default]
    Vkcopy,
    /// A library with Halide's Vulkan runtime ABI, loaded from this path.
    Halide(PathBuf),
}

impl Choice {
    /// The choice of [`VAR`]: vkcopy when unset, empty or `vkcopy`, else
    /// `halide:PATH` (or `halide:VERSION` built under `target/halide/`).
    pub fn from_env() -> Result<Choice, String> {
        let v = std::env::var(VAR).unwrap_or_default();
        match v.trim() {
            "" => Ok(Choice::Vkcopy),
            s => Choice::resolve(s, Path::new(".")).map_err(|e| format!("{VAR}={s}: {e}")),
        }
    }

    /// The runtime `arg` names: `vkcopy`, `halide:VERSION` (built by
    /// `scripts/halide-runtime.sh VERSION` under `target/halide/`, in `repo`
    /// or in the suite's home: the repository this binary was built in, or
    /// the archive it came from), or `halide:PATH`.
    pub fn resolve(arg: &str, repo: &Path) -> Result<Choice, String> {
        let arg = arg.trim();
        if arg == "vkcopy" {
            return Ok(Choice::Vkcopy);
        }
        let Some(what) = arg.strip_prefix("halide:").filter(|w| !w.is_empty()) else {
            return Err(format!(
                "{arg}: expected vkcopy, halide:VERSION or halide:PATH"
            ));
        };
        let path = PathBuf::from(what);
        if path.is_file() {
            return Ok(Choice::Halide(std::fs::canonicalize(&path).unwrap_or(path)));
        }
        let under = |root: &Path| {
            root.join("target/halide")
                .join(what)
                .join("libhalide_runtime_vulkan.so")
        };
        let own = crate::discover::home();
        if let Some(built) = [under(repo), under(&own)].into_iter().find(|p| p.is_file()) {
            return Ok(Choice::Halide(
                std::fs::canonicalize(&built).unwrap_or(built),
            ));
        }
        if crate::manifest::is_unpacked(&own) {
            let carried: Vec<String> = std::fs::read_dir(own.join("target/halide"))
                .into_iter()
                .flatten()
                .flatten()
                .filter(|d| d.path().join("libhalide_runtime_vulkan.so").is_file())
                .map(|d| d.file_name().to_string_lossy().into_owned())
                .collect();
            return Err(format!(
                "{arg}: no such file, and the archive in {} carries no Halide runtime {what} (it carries {}); build it with scripts/halide-runtime.sh {what} where the archive is written, then write the archive again",
                own.display(),
                if carried.is_empty() { "none".to_owned() } else { carried.join(", ") }
            ));
        }
        let repo = repo.canonicalize().unwrap_or(repo.to_owned());
        Err(format!(
            "{arg}: no such file, and no {} (build it with scripts/halide-runtime.sh {what})",
            under(&repo).display()
        ))
    }

    /// How a worker's command line says it: `vkcopy` or `halide:PATH`.
    pub fn arg(&self) -> String {
        match self {
            Choice::Vkcopy => "vkcopy".into(),
            Choice::Halide(p) => format!("halide:{}", p.display()),
        }
    }

    /// A short name: `vkcopy`, or `halide-` and [`Choice::halide_name`].
    pub fn label(&self) -> String {
        match self.halide_name() {
            Some(name) => format!("halide-{name}"),
            None => "vkcopy".into(),
        }
    }

    /// A Halide library's release for one that `scripts/halide-runtime.sh
    /// VERSION` built (`21.0.0`), else its file stem; `None` for vkcopy.
    pub fn halide_name(&self) -> Option<String> {
        let Choice::Halide(path) = self else {
            return None;
        };
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        Some(match stem.as_deref() {
            Some("libhalide_runtime_vulkan") => path
                .parent()
                .and_then(|p| p.file_name())
                .map_or("custom".into(), |v| v.to_string_lossy().into_owned()),
            Some(s) => s.to_owned(),
            None => "custom".into(),
        })
    }

    /// Whether this is a library of Halide's ABI.
    pub fn is_halide(&self) -> bool {
        matches!(self, Choice::Halide(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_round_trips_through_a_workers_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libmine.so");
        std::fs::write(&lib, b"").unwrap();
        let c = Choice::resolve(&format!("halide:{}", lib.display()), dir.path()).unwrap();
        assert_eq!(Choice::resolve(&c.arg(), dir.path()).unwrap(), c);
        assert_eq!(c.label(), "halide-libmine");
        assert_eq!(
            Choice::resolve("vkcopy", dir.path()).unwrap(),
            Choice::Vkcopy
        );
        let e = Choice::resolve("halide:", dir.path()).unwrap_err();
        assert!(e.contains("expected vkcopy"), "{e}");
        let e = Choice::resolve("halide:99.0.0", dir.path()).unwrap_err();
        assert!(e.contains("scripts/halide-runtime.sh 99.0.0"), "{e}");
    }
}
