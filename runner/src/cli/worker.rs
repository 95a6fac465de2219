//! `worker` (hidden): what `run` starts, one process per worker, to run the
//! case files named on stdin.

use std::path::PathBuf;
use std::process::ExitCode;

use vkcopy_engine::rt::Policy;

use super::{fail, options};

/// `vkcopy-suite worker`'s options: those of `run` that a worker needs.
#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    cases: PathBuf,
    #[arg(long)]
    policy: Option<Policy>,
    #[arg(long)]
    simulate_memory: Option<PathBuf>,
    #[arg(long)]
    validation: bool,
    /// `vkcopy` or `halide:PATH`, as the run resolved it.
    #[arg(long, default_value = "vkcopy")]
    runtime: String,
}

/// Serves case files from stdin until it closes.
pub fn worker(args: &Args) -> ExitCode {
    let served = options(
        args.policy,
        args.simulate_memory.as_deref(),
        args.validation,
    )
    .and_then(|o| {
        let runtime =
            vkcopy_suite::target::resolve(&args.runtime, &args.cases).map_err(|e| e.to_string())?;
        vkcopy_suite::worker::serve(&args.cases, &o, &runtime, std::io::stdin().lock())
            .map_err(|e| e.to_string())
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}
