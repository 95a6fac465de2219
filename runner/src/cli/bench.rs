//! `bench`: copy times over a sweep of sizes (the work is in the library's
//! `bench` module); exit code 2 for a usage error, 1 for a failed validation.

use std::process::ExitCode;

use vkcopy_suite::bench::{Args, Failure};

/// Runs the bench as `args` ask, printing its lines.
pub fn bench(args: &Args) -> ExitCode {
    match vkcopy_suite::bench::main(args, |line| out!("{line}")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            match e {
                Failure::Usage(_) => ExitCode::from(2),
                Failure::Validation(_) => ExitCode::FAILURE,
            }
        }
    }
}
