//! `vkcopy-suite`: runs the YAML cases on the default Vulkan device, answers
//! memory-type selection questions on recorded tables, and lists devices.

use std::path::PathBuf;

/// `println!` that ignores a closed stdout (`vkcopy-suite list | head` must not panic).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use vkcopy_suite::discover::{case_files, cases_root, check_pattern};
use vkcopy_suite::plan;
use vkcopy_suite::rt::{Context, ContextOptions, MemoryRequest, MemoryTable, Policy, Role};
use vkcopy_suite::suite::{Config, Suite};

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
    #[command(after_help = env_help())]
    Run(Box<RunArgs>),
    /// Runs case files named on stdin, one result line each (what `run` starts).
    #[command(hide = true)]
    Worker {
        #[arg(long)]
        cases: PathBuf,
        #[arg(long)]
        policy: Option<Policy>,
        #[arg(long)]
        simulate_memory: Option<PathBuf>,
        #[arg(long)]
        validation: bool,
    },
    /// Prints the memory type a policy picks for a request on a recorded table.
    Select {
        /// A recorded table, e.g. cases/devices/nvidia-h200.yaml.
        #[arg(long)]
        table: PathBuf,
        /// readback, upload, device, or a VISIBILITY/CACHING pair such as device_to_host/cached_coherent.
        #[arg(long)]
        request: String,
        #[arg(long, default_value = "vkcopy")]
        policy: Policy,
    },
    /// Prints every Vulkan device and its memory table in the recorded-table form.
    Devices,
    /// Draws the measured throughput of one or more results.json reports into one SVG
    /// (e.g. the same device under several policies).
    Plot {
        /// Reports as LABEL=PATH (or PATH), in the order to draw them.
        reports: Vec<String>,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "vkcopy-suite throughput")]
        title: String,
    },
    /// Compares run B with run A (a baseline): regressions, fixes, other verdict
    /// changes, new and missing cases, copies whose best GB/s moved beyond the
    /// noise threshold. Prints Markdown; exits 1 on a regression.
    Diff {
        /// A results.json, or a folder of them (the shards of one run).
        a: PathBuf,
        b: PathBuf,
        /// Relative change of best GB/s taken as noise.
        #[arg(long, default_value_t = 0.1)]
        threshold: f64,
        /// Also write the diff as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Exit 1 on copies slower beyond the threshold too.
        #[arg(long)]
        fail_on_slower: bool,
    },
    /// Merges reports (results.json files or folders of them: a fleet's GPUs,
    /// shards, policies) into one device x case table: merged.md and merged.json.
    Merge {
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        #[arg(long)]
        out: PathBuf,
    },
    /// Measures every copy path over a sweep of sizes and writes bench.json (the
    /// shape of bench/cuda_reference.py); --compare sets it beside CUDA's.
    Bench(vkcopy_suite::bench::Args),
    /// Lists the cases.
    List {
        #[arg(long)]
        cases: Option<PathBuf>,
    },
    /// Loads and plans cases, recorded tables and expectation files without a
    /// device; prints every problem as file:line:col and exits 1 on any.
    Check {
        /// Case files or folders; default: the cases folder.
        paths: Vec<PathBuf>,
    },
    /// Prints the JSON Schema of the case format (or, with --markdown, the case
    /// reference); --write writes both into the cases folder, and the schema of
    /// results.json into reports/results.schema.json.
    Schema {
        #[arg(long)]
        markdown: bool,
        /// Write case.schema.json and REFERENCE.md into the cases folder.
        #[arg(long, conflicts_with = "markdown")]
        write: bool,
        #[arg(long)]
        cases: Option<PathBuf>,
    },
    /// Writes a new case skeleton: NAME `basic/my_case` is cases/basic/my_case.yaml.
    New {
        name: String,
        /// The Halide test the case mirrors, e.g. test/correctness/device_crop.cpp.
        #[arg(long)]
        mirrors: Option<String>,
        #[arg(long)]
        cases: Option<PathBuf>,
    },
    /// Prints what a case would do without running it: steps, shapes, bytes,
    /// copies and the memory types its allocations would get.
    Explain {
        /// A case file, or a case name such as basic::round_trip_2d.
        case: String,
        /// A recorded table (a name in cases/devices/) when the case simulates none.
        #[arg(long)]
        table: Option<String>,
        /// The policy, when the case pins none; default vkcopy.
        #[arg(long)]
        policy: Option<Policy>,
        #[arg(long)]
        cases: Option<PathBuf>,
    },
}

/// `vkcopy-suite run`'s options.
#[derive(clap::Args)]
struct RunArgs {
    /// Only cases whose name matches this glob, e.g. `halide::*` or `*crop*`.
    #[arg(long)]
    filter: Option<String>,
    /// Only cases with any of these tags (comma-separated; `tags:` in a case).
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    /// Only the K-th of N shards (1-based), e.g. 2/3: the union of 1/N..N/N is the
    /// whole selection, each case in exactly one.
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    /// Only the cases that failed (expected or not) or were flaky in this results.json.
    #[arg(long, value_name = "REPORT")]
    rerun_failed: Option<PathBuf>,
    /// Cases at once, each in its own worker process and Vulkan context.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    jobs: u16,
    /// The time limit of a case without its own `timeout:`, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = vkcopy_suite::schedule::DEFAULT_TIMEOUT.as_secs_f64())]
    timeout: f64,
    /// Re-run a failing case up to N times; a pass on a re-run is a flake.
    #[arg(long, default_value_t = 0, value_name = "N")]
    retries: u32,
    /// Flakes fail the run (they are reported either way).
    #[arg(long)]
    strict: bool,
    /// The Khronos validation layer with synchronization validation; any message
    /// fails the case (as VKCOPY_VALIDATION=1).
    #[arg(long)]
    validation: bool,
    /// Memory-type selection policy: vkcopy, halide or halide-legacy.
    #[arg(long)]
    policy: Option<Policy>,
    /// The runtime under test: vkcopy (default), halide:VERSION (a Halide
    /// release's runtime built by scripts/halide-runtime.sh VERSION) or
    /// halide:PATH (a Halide runtime library); as VKCOPY_RUNTIME.
    #[arg(long, value_name = "RUNTIME")]
    runtime: Option<String>,
    /// The cases folder.
    #[arg(long)]
    cases: Option<PathBuf>,
    /// Where reports go: <DIR>/<device>/results.json and summary.md.
    #[arg(long, default_value = "reports/out")]
    report_dir: PathBuf,
    /// Present this recorded memory table to the allocator (cases/devices/X.yaml).
    #[arg(long)]
    simulate_memory: Option<PathBuf>,
    /// Expectation files (known failures and flakes), repeatable; default:
    /// reports/expectations/<device>.yaml and, under another policy than vkcopy,
    /// policy-<policy>.yaml, those that exist.
    #[arg(long)]
    expectations: Vec<PathBuf>,
    /// Write the expectations from this run: failures listed, passes removed (into
    /// the one --expectations file, else the policy's or the device's file).
    #[arg(long)]
    update_expectations: bool,
    /// Run the cases in this process: no crash isolation, no time limit (for a debugger).
    #[arg(long)]
    in_process: bool,
}

/// The environment variables of a run, for `run --help`.
fn env_help() -> String {
    let mut vars: Vec<(&str, &str)> = vkcopy_suite::rt::ENVIRONMENT.to_vec();
    vars.push(("VKCOPY_CASES", "another cases folder (as --cases)"));
    vars.push((
        vkcopy_suite::halide::VAR,
        "the runtime under test: vkcopy, or halide:PATH (as --runtime)",
    ));
    vars.push((
        "CI",
        "when set, `cargo test` fails the device cases without a Vulkan device",
    ));
    vars.push((
        vkcopy_suite::hook::VAR,
        "debug builds or feature test-hook, for the runner's tests: ACTION:GLOB,... with ACTION panic, abort, hang or flake",
    ));
    let mut text = "Environment (workers inherit it):\n".to_owned();
    for (name, what) in vars {
        text.push_str(&format!("  {name:<24} {what}\n"));
    }
    text
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(*args),
        Command::Worker {
            cases,
            policy,
            simulate_memory,
            validation,
        } => worker(&cases, policy, simulate_memory, validation),
        Command::Select {
            table,
            request,
            policy,
        } => select(&table, &request, policy),
        Command::Devices => devices(),
        Command::List { cases } => list(cases),
        Command::Check { paths } => check(&paths),
        Command::Schema {
            markdown,
            write,
            cases,
        } => schema(markdown, write, cases),
        Command::New {
            name,
            mirrors,
            cases,
        } => new_case(&name, mirrors.as_deref(), cases),
        Command::Explain {
            case,
            table,
            policy,
            cases,
        } => explain(&case, table.as_deref(), policy, cases),
        Command::Bench(args) => bench(&args),
        Command::Diff {
            a,
            b,
            threshold,
            json,
            fail_on_slower,
        } => diff(&a, &b, threshold, json.as_deref(), fail_on_slower),
        Command::Merge { reports, out } => merge(&reports, &out),
        Command::Plot {
            reports,
            out,
            title,
        } => plot(&reports, &out, &title),
    }
}

fn select(table: &std::path::Path, request: &str, policy: Policy) -> ExitCode {
    let t = match MemoryTable::from_yaml_file(table) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let req = match request.parse::<Role>() {
        Ok(role) => policy.request(role),
        Err(_) => match request.parse::<MemoryRequest>() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: request '{request}': expected readback, upload, device or VISIBILITY/CACHING: {e}");
                return ExitCode::from(2);
            }
        },
    };
    match policy.select(&t, &req, u32::MAX) {
        Ok(ty) => {
            out!("{}", t.describe_type(ty));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "error: {request} ({req}) under {policy} on {}: {e}",
                table.display()
            );
            ExitCode::from(2)
        }
    }
}

fn plot(reports: &[String], out: &std::path::Path, title: &str) -> ExitCode {
    let mut bars = Vec::new();
    for r in reports {
        // A lone report needs no legend entry of its own; several are told apart.
        let (label, path) = match r.split_once('=') {
            Some((l, p)) => (l.to_owned(), p),
            None if reports.len() == 1 => (String::new(), r.as_str()),
            None => (r.clone(), r.as_str()),
        };
        let json = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()));
        match json {
            Ok(v) => bars.extend(vkcopy_suite::plot::bars_from_report(&v, &label)),
            Err(e) => {
                eprintln!("error: {path}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    match vkcopy_suite::plot::throughput_svg(&bars, title, out) {
        Ok(()) => {
            out!("wrote {}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn diff(
    a: &std::path::Path,
    b: &std::path::Path,
    threshold: f64,
    json: Option<&std::path::Path>,
    fail_on_slower: bool,
) -> ExitCode {
    use vkcopy_suite::compare::{diff, load};
    if !(threshold >= 0.0 && threshold.is_finite()) {
        eprintln!("error: --threshold {threshold}: expected a relative change >= 0, e.g. 0.1");
        return ExitCode::from(2);
    }
    let (a, b) = match (load::load_one(a), load::load_one(b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let d = diff::diff(&a, &b, threshold);
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&d).unwrap_or_default() + "\n";
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("error: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    use std::io::Write;
    let _ = std::io::stdout().write_all(d.markdown().as_bytes());
    if d.has_regressions() || (fail_on_slower && !d.slower.is_empty()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn merge(reports: &[PathBuf], out: &std::path::Path) -> ExitCode {
    use vkcopy_suite::compare::{load, merge};
    let loaded = match load::load_all(reports) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let merged = merge::merge(&loaded);
    let json = serde_json::to_string_pretty(&merged).unwrap_or_default() + "\n";
    let written = std::fs::create_dir_all(out)
        .and_then(|()| std::fs::write(out.join("merged.md"), merged.markdown()))
        .and_then(|()| std::fs::write(out.join("merged.json"), json));
    match written {
        Ok(()) => {
            out!(
                "merged {} configurations, {} cases into {}",
                merged.columns.len(),
                merged.rows.len(),
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: {e}", out.display());
            ExitCode::from(2)
        }
    }
}

fn bench(args: &vkcopy_suite::bench::Args) -> ExitCode {
    use vkcopy_suite::bench::Failure;
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

fn devices() -> ExitCode {
    match Context::list_devices() {
        Ok(list) => {
            // One YAML document per device.
            for d in list {
                out!("---");
                out!("# device {}: {} ({:?})", d.index, d.name, d.device_type);
                out!("{}", d.memory.to_yaml());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn check(paths: &[PathBuf]) -> ExitCode {
    let checked = vkcopy_suite::check::check(paths);
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

fn schema(markdown: bool, write: bool, cases: Option<PathBuf>) -> ExitCode {
    use vkcopy_suite::{reference, schema};
    if !write {
        let text = if markdown {
            reference::text()
        } else {
            schema::case_schema_text()
        };
        use std::io::Write;
        let _ = std::io::stdout().write_all(text.as_bytes());
        return ExitCode::SUCCESS;
    }
    let root = cases.unwrap_or_else(cases_root);
    for (file, text) in [
        (schema::SCHEMA_FILE, schema::case_schema_text()),
        (reference::REFERENCE_FILE, reference::text()),
        (
            vkcopy_suite::report::schema::SCHEMA_FILE,
            vkcopy_suite::report::schema::results_schema_text(),
        ),
    ] {
        let path = root.join(file);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("error: {}: {e}", path.display());
            return ExitCode::from(2);
        }
        out!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

fn new_case(name: &str, mirrors: Option<&str>, cases: Option<PathBuf>) -> ExitCode {
    let cases_arg = cases
        .as_ref()
        .map(|c| format!(" --cases {}", c.display()))
        .unwrap_or_default();
    let root = cases.unwrap_or_else(cases_root);
    match vkcopy_suite::scaffold::write(&root, name, mirrors) {
        Ok(path) => {
            out!("wrote {}", path.display());
            out!("check it: vkcopy-suite check {}", path.display());
            out!(
                "run it:   vkcopy-suite run{cases_arg} --filter '{}'",
                plan::case_name(&root, &path)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn explain(
    case: &str,
    table: Option<&str>,
    policy: Option<Policy>,
    cases: Option<PathBuf>,
) -> ExitCode {
    let root = cases.unwrap_or_else(cases_root);
    match vkcopy_suite::explain::explain(&root, case, table, policy) {
        Ok(text) => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn list(cases: Option<PathBuf>) -> ExitCode {
    let root = cases.unwrap_or_else(cases_root);
    match case_files(&root) {
        Ok(files) => {
            for f in files {
                out!("{}", plan::case_name(&root, &f));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The environment's options with the command line's on top.
fn options(
    policy: Option<Policy>,
    simulate_memory: Option<&std::path::Path>,
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

fn worker(
    cases: &std::path::Path,
    policy: Option<Policy>,
    simulate_memory: Option<PathBuf>,
    validation: bool,
) -> ExitCode {
    let served = options(policy, simulate_memory.as_deref(), validation)
        .and_then(|o| vkcopy_suite::worker::serve(cases, &o, std::io::stdin().lock()));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The names of the cases of a results.json whose status was a failure (expected
/// or not) or whose verdict failed the run (an unexpected pass, a flake).
fn failed_names(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let report: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let cases = report["cases"]
        .as_array()
        .ok_or_else(|| format!("{}: no `cases` list: not a results.json", path.display()))?;
    Ok(cases
        .iter()
        .filter(|c| {
            let status = c["status"].as_str().unwrap_or("");
            let verdict = c["verdict"].as_str().unwrap_or("");
            !matches!(status, "pass" | "skip" | "")
                || matches!(verdict, "fail" | "unexpected_pass" | "flake")
        })
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect())
}

fn run(args: RunArgs) -> ExitCode {
    use vkcopy_suite::schedule::{self, Schedule};
    use vkcopy_suite::suite::{parse_shard, Selection};
    use vkcopy_suite::worker::{Overrides, Spawn};
    let fail = |e: String| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    if let Some(f) = &args.filter {
        if let Err(e) = check_pattern(f) {
            return fail(format!("--filter {e}"));
        }
    }
    let shard = match args.shard.as_deref().map(parse_shard).transpose() {
        Ok(s) => s,
        Err(e) => return fail(format!("--shard {e}")),
    };
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return fail(format!(
            "--timeout {}: a number of seconds above 0",
            args.timeout
        ));
    }
    let names = match args.rerun_failed.as_deref().map(failed_names).transpose() {
        Ok(n) => n,
        Err(e) => return fail(format!("--rerun-failed {e}")),
    };
    if names.as_ref().is_some_and(|n| n.is_empty()) {
        out!("nothing to re-run: no case failed in the report");
        return ExitCode::SUCCESS;
    }
    let options = match options(
        args.policy,
        args.simulate_memory.as_deref(),
        args.validation,
    ) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let root = args.cases.clone().unwrap_or_else(cases_root);
    if let Some(r) = &args.runtime {
        match vkcopy_suite::halide::resolve(r, &root.join("..")) {
            // The workers and the suite read the choice from the environment.
            Ok(Some(lib)) => std::env::set_var(
                vkcopy_suite::halide::VAR,
                format!("halide:{}", lib.display()),
            ),
            Ok(None) => std::env::remove_var(vkcopy_suite::halide::VAR),
            Err(e) => return fail(format!("--runtime {e}")),
        }
    }
    match vkcopy_suite::halide::selected() {
        Ok(Some(lib)) => out!(
            "runtime: Halide {} ({})",
            vkcopy_suite::halide::label(&lib),
            lib.display()
        ),
        Ok(None) => {}
        Err(e) => return fail(e),
    }
    for f in vkcopy_suite::discover::misnamed_files(&root) {
        eprintln!(
            "warning: {}: not run: the suite reads only *.yaml files; rename it to .yaml",
            f.display()
        );
    }
    let config = Config {
        cases: root.clone(),
        options,
        // The file --update-expectations is to write may not exist yet.
        expectations: args
            .expectations
            .iter()
            .filter(|p| !args.update_expectations || p.exists())
            .cloned()
            .collect(),
    };
    let suite = match Suite::open(config) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match &suite.device {
        Ok(d) => out!(
            "device: {} ({}, {}), policy {}",
            d.record.name,
            d.record.device_type,
            d.record.driver,
            suite.options.policy
        ),
        Err(e) => out!("no Vulkan device: {e}"),
    }
    for path in &suite.expectations_files {
        out!("expectations: {}", path.display());
    }
    if let Some(t) = &suite.options.simulate_memory {
        out!("simulating the memory table of {}", t.name);
    }
    let selection = Selection {
        filter: args.filter.clone(),
        tags: args.tags.clone(),
        names,
        shard,
    };
    let entries = match suite.select(&selection) {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    let spawn = match std::env::current_exe() {
        Ok(exe) if !args.in_process => {
            let overrides = Overrides {
                policy: args.policy.map(|p| p.to_string()),
                simulate_memory: args.simulate_memory.clone(),
                validation: args.validation,
            };
            Some(Spawn::new(&exe, &root, &overrides))
        }
        Ok(_) => None,
        Err(e) => return fail(format!("cannot find this program to start workers: {e}")),
    };
    let plan = Schedule {
        jobs: args.jobs as usize,
        retries: args.retries,
        timeout: std::time::Duration::from_secs_f64(args.timeout),
        spawn,
    };
    let mut progress = vkcopy_suite::progress::Progress::new(entries.len());
    let clock = std::time::Instant::now();
    let mut report = suite.report();
    report.cases = schedule::run(&suite, &entries, &plan, |c, _, _| progress.case(c));
    report.seconds = clock.elapsed().as_secs_f64();
    progress.finish();
    match report.write(&args.report_dir) {
        Ok(dir) => out!("report: {}", dir.display()),
        Err(e) => eprintln!(
            "warning: cannot write the report to {}: {e}",
            args.report_dir.display()
        ),
    }
    let whole = selection.filter.is_none()
        && selection.tags.is_empty()
        && selection.names.is_none()
        && selection.shard.is_none();
    if whole {
        for stale in suite.stale_expectations(&report) {
            eprintln!("warning: the expectations entry '{stale}' matches no case");
        }
    }
    if args.update_expectations {
        match update_expectations(&suite, &args, &report) {
            Ok(path) => out!("wrote {}", path.display()),
            Err(e) => return fail(e),
        }
    }
    let summary = report.summary();
    if summary.expected_failures > 0 {
        out!("{} expected failures", summary.expected_failures);
    }
    out!("{summary}");
    if report
        .cases
        .iter()
        .any(|c| c.verdict.fails_run(args.strict))
    {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes the expectations of `report` into the file `--update-expectations` names.
fn update_expectations(
    suite: &Suite,
    args: &RunArgs,
    report: &vkcopy_suite::report::Report,
) -> Result<PathBuf, String> {
    let path = match (args.expectations.as_slice(), &suite.device) {
        ([one], _) => one.clone(),
        ([], Ok(d)) => vkcopy_suite::suite::default_expectations(
            &suite.root,
            &d.record.name,
            suite.options.policy,
        )
        .pop()
        .unwrap_or_default(),
        ([], Err(e)) => return Err(format!("--update-expectations: no device: {e}")),
        _ => return Err("--update-expectations: name one --expectations file to write".into()),
    };
    let old = std::fs::read_to_string(&path).ok();
    let text = vkcopy_suite::expectations::updated(old.as_deref(), report)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}
