//! `list`, `check`, `schema`, `new` and `explain`: the commands of a case
//! author, none of which runs a case.

use std::path::PathBuf;
use std::process::ExitCode;

use vkcopy_engine::rt::Policy;

use super::{fail, print, CasesArg};

/// `vkcopy-suite list`'s options.
#[derive(clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    cases: CasesArg,
}

/// Prints the name of every case, as `run --filter` takes it.
pub fn list(args: &ListArgs) -> ExitCode {
    let root = args.cases.root();
    match vkcopy_engine::discover::case_files(&root) {
        Ok(files) => {
            for f in files {
                out!("{}", vkcopy_engine::discover::case_name(&root, &f));
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `vkcopy-suite check`'s options.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// Case files or folders; default: the cases folder.
    paths: Vec<PathBuf>,
}

/// Checks cases, tables and expectation files; exit code 1 on any problem.
pub fn check(args: &CheckArgs) -> ExitCode {
    let checked = vkcopy_suite::check::check(&args.paths);
    for e in &checked.errors {
        eprintln!("{e}");
    }
    out!("{}", checked.summary());
    if checked.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `vkcopy-suite schema`'s options.
#[derive(clap::Args)]
pub struct SchemaArgs {
    /// Print the case reference (Markdown, cases/REFERENCE.md) instead of the schema.
    #[arg(long)]
    markdown: bool,
    /// Write case.schema.json, REFERENCE.md and RUNTIMES.md into the cases folder.
    #[arg(long, conflicts_with = "markdown")]
    write: bool,
    #[command(flatten)]
    cases: CasesArg,
}

/// Prints the case schema or reference, or writes them with the results schema.
pub fn schema(args: &SchemaArgs) -> ExitCode {
    use vkcopy_engine::reference;
    use vkcopy_engine::schema;
    use vkcopy_suite::report;
    if !args.write {
        print(&if args.markdown {
            reference::text()
        } else {
            schema::case_schema_text()
        });
        return ExitCode::SUCCESS;
    }
    let root = args.cases.root();
    let table = match vkcopy_engine::step_table::text(&root, vkcopy_suite::target::RUNTIMES) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    for (file, text) in [
        (vkcopy_engine::step_table::RUNTIMES_FILE, table),
        (schema::SCHEMA_FILE, schema::case_schema_text()),
        (reference::REFERENCE_FILE, reference::text()),
        (
            report::schema::SCHEMA_FILE,
            report::schema::results_schema_text(),
        ),
    ] {
        let path = root.join(file);
        if let Err(e) = std::fs::write(&path, text) {
            return fail(format!("{}: {e}", path.display()));
        }
        // `cases/../reports/x` is said as `reports/x`.
        let shown = std::fs::canonicalize(&path).unwrap_or(path);
        out!("wrote {}", shown.display());
    }
    ExitCode::SUCCESS
}

/// `vkcopy-suite new`'s options.
#[derive(clap::Args)]
pub struct NewArgs {
    name: String,
    /// The Halide test the case mirrors, e.g. test/correctness/device_crop.cpp.
    #[arg(long)]
    mirrors: Option<String>,
    #[command(flatten)]
    cases: CasesArg,
}

/// Writes a case skeleton and says how to check and run it.
pub fn new_case(args: &NewArgs) -> ExitCode {
    let cases_arg = args
        .cases
        .cases
        .as_ref()
        .map(|c| format!(" --cases {}", c.display()))
        .unwrap_or_default();
    let root = args.cases.root();
    match vkcopy_suite::scaffold::write(&root, &args.name, args.mirrors.as_deref()) {
        Ok(path) => {
            // Hints that run as typed from here, as the README's commands do.
            let here = std::env::current_dir().ok();
            let shown = here
                .as_deref()
                .and_then(|h| path.strip_prefix(h).ok())
                .unwrap_or(&path);
            // From an unpacked archive there is no cargo: this binary runs them.
            let home = vkcopy_engine::discover::home();
            let me = match std::env::current_exe() {
                Ok(exe) if vkcopy_fleet::archive::is_unpacked(&home) => exe.display().to_string(),
                _ => "cargo run -q -p vkcopy-suite --".to_owned(),
            };
            out!("wrote {}", shown.display());
            out!("check it: {me} check{cases_arg} {}", shown.display());
            out!(
                "run it:   {me} run{cases_arg} --filter '{}'",
                vkcopy_engine::discover::case_name(&root, &path)
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `vkcopy-suite explain`'s options.
#[derive(clap::Args)]
pub struct ExplainArgs {
    /// A case file, or a case name such as basic::round_trip_2d.
    case: String,
    /// The recorded table, when the case simulates none: the name of a file of
    /// the cases' devices/ folder (lavapipe), or a path to a table file.
    #[arg(long, value_name = "NAME|PATH")]
    table: Option<String>,
    /// The policy, when the case pins none; default vkcopy.
    #[arg(long)]
    policy: Option<Policy>,
    #[command(flatten)]
    cases: CasesArg,
}

/// Prints what a case would do, from its plan alone.
pub fn explain(args: &ExplainArgs) -> ExitCode {
    let root = args.cases.root();
    match vkcopy_engine::explain::explain(&root, &args.case, args.table.as_deref(), args.policy) {
        Ok(text) => {
            print(&text);
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
