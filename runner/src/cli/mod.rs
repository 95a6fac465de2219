//! The subcommands of `vkcopy-suite`, one module per subcommand or close group,
//! and what they share: printing, the exit code of an error, the `--cases`
//! option and the context options of a run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vkcopy_engine::rt::{ContextOptions, MemoryTable, Policy};

/// `println!` that ignores a closed stdout (`vkcopy-suite list | head` must not panic).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

pub mod archive;
pub mod authoring;
pub mod bench;
pub mod reports;
pub mod run;
pub mod tables;
pub mod worker;

/// Prints `error: {e}` and gives exit code 2, that of a usage or input error.
pub fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

/// Writes `text` to stdout as it is, ignoring a closed stdout.
pub fn print(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

/// The `--cases` option of every subcommand that reads a cases folder.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CasesArg {
    /// The cases folder; default: VKCOPY_CASES, else this repository's cases/.
    #[arg(long, value_name = "DIR")]
    pub cases: Option<PathBuf>,
}

impl CasesArg {
    /// The folder: `--cases`, else the default.
    pub fn root(&self) -> PathBuf {
        self.cases
            .clone()
            .unwrap_or_else(vkcopy_engine::discover::cases_root)
    }
}

/// The environment's options with the command line's on top.
pub fn options(
    policy: Option<Policy>,
    simulate_memory: Option<&Path>,
    validation: bool,
) -> Result<ContextOptions, String> {
    let mut options = ContextOptions::from_env().map_err(|e| e.to_string())?;
    if let Some(p) = policy {
        options.policy = p;
    }
    if let Some(path) = simulate_memory {
        options.simulate_memory =
            Some(MemoryTable::from_yaml_file(path).map_err(|e| e.to_string())?);
    }
    options.validation |= validation;
    Ok(options)
}
