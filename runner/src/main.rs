//! `vkcopy-suite`: runs the YAML cases on the default Vulkan device, answers
//! memory-type selection questions on recorded tables, and lists devices. This
//! file is the command line and its dispatch; each subcommand is in `cli/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[macro_use]
mod cli;

use cli::{archive, authoring, bench, reports, run, tables, worker};

#[derive(Parser)]
#[command(
    name = "vkcopy-suite",
    version,
    about = "Conformance suite for the vkcopy Vulkan copy runtime"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the cases on the default device (VKCOPY_DEVICE / VKCOPY_DEVICE_TYPE pick
    /// another), each in a worker process.
    #[command(after_help = run::env_help())]
    Run(Box<run::Args>),
    /// Runs case files named on stdin, one result line each (what `run` starts).
    #[command(hide = true)]
    Worker(worker::Args),
    /// Prints the memory type a policy picks for a request on a recorded table.
    Select(tables::SelectArgs),
    /// Prints every Vulkan device and its memory table in the recorded-table form.
    Devices,
    /// Draws the measured throughput of one or more reports (results.json files
    /// or run folders) into one SVG and a PNG beside it (e.g. the same device
    /// under several policies).
    Plot(reports::PlotArgs),
    /// Compares run B with run A (a baseline): regressions, fixes, other verdict
    /// changes, new and missing cases, copies whose best GB/s moved beyond the
    /// noise threshold. Prints Markdown; exits 1 on a regression.
    Diff(reports::DiffArgs),
    /// Merges reports (results.json files or folders of them: a fleet's GPUs,
    /// shards, policies) into one device x case table: merged.md and merged.json.
    Merge(reports::MergeArgs),
    /// Each flaky case's pass and fail history across runs (results.json files or
    /// folders of them), per device and policy, with its flake rate: Markdown,
    /// and JSON with --json.
    Flakes(reports::FlakesArgs),
    /// Writes a run's JUnit XML again, with at most --limit failures and a
    /// --link to each failure's logs.
    Junit(reports::JunitArgs),
    /// Measures every copy path over a sweep of sizes and writes bench.json (the
    /// shape of bench/cuda_reference.py); --compare sets it beside CUDA's.
    Bench(vkcopy_suite::bench::Args),
    /// Writes the suite into one .tar.zst for machines without Rust: this binary,
    /// the cases and tables, the expectations, the results schema and the Halide
    /// runtimes built, with a manifest; `run --archive FILE` runs it.
    Archive(archive::Args),
    /// Lists the cases.
    List(authoring::ListArgs),
    /// Loads and plans cases, recorded tables and expectation files without a
    /// device; prints every problem as file:line:col and exits 1 on any.
    Check(authoring::CheckArgs),
    /// Prints the JSON Schema of the case format (or, with --markdown, the case
    /// reference); --write writes both into the cases folder, and the schema of
    /// results.json into reports/results.schema.json.
    Schema(authoring::SchemaArgs),
    /// Writes a new case skeleton: NAME `basic/my_case` is cases/basic/my_case.yaml.
    New(authoring::NewArgs),
    /// Prints what a case would do without running it: steps, shapes, bytes,
    /// copies and the memory types its allocations would get.
    Explain(authoring::ExplainArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run::run(*args),
        Command::Worker(args) => worker::worker(&args),
        Command::Select(args) => tables::select(&args),
        Command::Devices => tables::devices(),
        Command::Plot(args) => reports::plot(&args),
        Command::Diff(args) => reports::diff(&args),
        Command::Merge(args) => reports::merge(&args),
        Command::Flakes(args) => reports::flakes(&args),
        Command::Junit(args) => reports::junit(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Archive(args) => archive::archive(&args),
        Command::List(args) => authoring::list(&args),
        Command::Check(args) => authoring::check(&args),
        Command::Schema(args) => authoring::schema(&args),
        Command::New(args) => authoring::new_case(&args),
        Command::Explain(args) => authoring::explain(&args),
    }
}
