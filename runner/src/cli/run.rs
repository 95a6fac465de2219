//! `run`: the cases of a selection over worker processes, the report, and
//! optionally the expectations written from the run.

use std::path::PathBuf;
use std::process::ExitCode;

use vkcopy_engine::discover::check_pattern;
use vkcopy_engine::rt::Policy;
use vkcopy_engine::runtime::Choice;
use vkcopy_suite::report::{journal, read, CaseRecord, Report};
use vkcopy_suite::schedule::{self, Schedule};
use vkcopy_suite::suite::{parse_shard, Config, Selection, Suite};
use vkcopy_suite::worker::{Overrides, Spawn};

use super::{fail, options, CasesArg};

/// `vkcopy-suite run`'s options.
#[derive(clap::Args)]
pub struct Args {
    /// Only cases whose name matches this glob, e.g. `halide::*` or `*crop*`.
    #[arg(long)]
    filter: Option<String>,
    /// Only cases with any of these tags (comma-separated; `tags:` in a case).
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    /// Only the K-th of N shards (1-based), e.g. 2/3: the union of 1/N..N/N is the
    /// whole selection, each case in exactly one, by a hash of its name (adding
    /// a case moves no other); cases with `every_shard: true` are in every shard.
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    /// Only a sample of one case in N, by a hash of its name (a pre-merge run),
    /// and the `every_shard` cases.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    fraction: Option<u32>,
    /// Only the cases that failed (expected or not) or were flaky in this results.json.
    #[arg(long, value_name = "REPORT")]
    rerun_failed: Option<PathBuf>,
    /// Cases at once, each in its own worker process and Vulkan context.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    jobs: u16,
    /// The time limit of a case without its own `timeout:`, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = schedule::DEFAULT_TIMEOUT.as_secs_f64())]
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
    /// Fail at the start unless the device opened is of this type (gpu,
    /// discrete-gpu, integrated-gpu, cpu...) or has this in its name; as
    /// VKCOPY_EXPECT_DEVICE.
    #[arg(long, value_name = "NAME|TYPE", env = "VKCOPY_EXPECT_DEVICE")]
    expect_device: Option<String>,
    /// Stop after N failing cases; the cases not started are reported as
    /// skipped, with why.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_fails: Option<u32>,
    /// Stop after the first case whose device was lost (a GPU hang), as above.
    #[arg(long)]
    stop_on_device_lost: bool,
    /// Whether a speed threshold fails a case: on a GPU and not on a CPU
    /// device such as lavapipe (auto), everywhere (hold), or nowhere, the
    /// figures only reported (report); as VKCOPY_SPEED. `cargo test` reports
    /// unless told otherwise.
    #[arg(long, value_enum, env = "VKCOPY_SPEED", default_value = "auto")]
    speed: Speed,
    #[command(flatten)]
    cases: CasesArg,
    /// Where reports go: <DIR>/<device>/results.json and summary.md (default:
    /// the checkout's reports/out wherever in it the run starts, else
    /// reports/out under the current folder).
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// Present this recorded memory table to the allocator (cases/devices/X.yaml).
    #[arg(long)]
    simulate_memory: Option<PathBuf>,
    /// Expectation files (known failures and flakes), repeatable; default: the
    /// layers of reports/expectations/ that exist (device/, model/, driver/,
    /// all.yaml) and, under another policy than vkcopy, policy-<policy>.yaml.
    #[arg(long)]
    expectations: Vec<PathBuf>,
    /// Write the expectations from this run: failures listed, passes removed (into
    /// the one --expectations file, else the policy's file, else the device layer).
    #[arg(long)]
    update_expectations: bool,
    /// Run the cases in this process: no crash isolation, no time limit (for a debugger).
    #[arg(long)]
    in_process: bool,
    /// Finish the interrupted run whose report folder is DIR (a GPU hang, a
    /// kill, a reboot): run the cases its journal.jsonl lacks, with the options
    /// that run was given, and write the report there. Takes no other option.
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// Run the suite of this archive (`vkcopy-suite archive`): unpack it (into
    /// --extract-to, else beside it) and run its binary, its cases and its
    /// expectations with the other options given.
    #[arg(long, value_name = "FILE")]
    archive: Option<PathBuf>,
    /// Where --archive unpacks; default: beside the archive, named as it.
    #[arg(long, value_name = "DIR", requires = "archive")]
    extract_to: Option<PathBuf>,
}

/// `run`'s options alone, to read them back from a journal.
#[derive(clap::Parser)]
#[command(name = "vkcopy-suite run")]
struct Again {
    #[command(flatten)]
    args: Args,
}

/// An interrupted run to finish: its folder, journal header and cases done.
struct Resume {
    dir: PathBuf,
    header: journal::Header,
    done: Vec<CaseRecord>,
}

/// The options and the cases done of the interrupted run in `dir`; moves into
/// the folder that run was started from.
fn resume(dir: &std::path::Path) -> Result<(Args, Resume), String> {
    let shown = dir.display();
    // Options come from the environment too, so clap's `exclusive` would refuse
    // VKCOPY_SPEED; only the command line is checked.
    let mut given = std::env::args().skip_while(|a| a != "run").skip(1);
    let mut others = Vec::new();
    while let Some(a) = given.next() {
        match a.as_str() {
            "--resume" => {
                given.next();
            }
            a if a.starts_with("--resume=") => {}
            _ => others.push(a),
        }
    }
    if !others.is_empty() {
        return Err(format!(
            "--resume takes no other option (the run's own are in its journal); given: {}",
            others.join(" ")
        ));
    }
    if dir.join("results.json").exists() {
        return Err(format!(
            "--resume {shown}: the run is complete (results.json is there); nothing to resume"
        ));
    }
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("--resume {shown}: {e}"))?;
    let (header, done) = journal::read(&dir).map_err(|e| format!("--resume {e}"))?;
    std::env::set_current_dir(&header.cwd).map_err(|e| {
        format!(
            "--resume {shown}: cannot go back to {}, where the run was started: {e}",
            header.cwd.display()
        )
    })?;
    let argv = std::iter::once("run".to_owned()).chain(header.argv.iter().cloned());
    let again = <Again as clap::Parser>::try_parse_from(argv)
        .map_err(|e| format!("--resume {shown}: the run's options no longer parse: {e}"))?;
    Ok((again.args, Resume { dir, header, done }))
}

/// The environment variables of a run, for `run --help`.
pub fn env_help() -> String {
    let mut vars: Vec<(&str, &str)> = vkcopy_engine::rt::ENVIRONMENT.to_vec();
    vars.push(("VKCOPY_CASES", "another cases folder (as --cases)"));
    vars.push((
        vkcopy_suite::suite::EXPECT_DEVICE_VAR,
        "the device a run must open, by type or name (as --expect-device)",
    ));
    vars.push((
        vkcopy_engine::runtime::choice::VAR,
        "the runtime under test: vkcopy, halide:VERSION or halide:PATH (as --runtime)",
    ));
    vars.push((
        vkcopy_engine::SPEED_VAR,
        "auto (the default of `run`: held on a GPU, reported on a CPU device), hold or report: whether speed thresholds fail a case (as --speed; `cargo test` reports unless set)",
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

/// The names of the cases of a results.json that `--rerun-failed` runs again.
fn failed_names(path: &std::path::Path) -> Result<Vec<String>, String> {
    let report = read::load_file(path).map_err(|e| e.to_string())?;
    Ok(report
        .cases
        .into_iter()
        .filter(read::CaseResult::needs_rerun)
        .map(|c| c.name)
        .collect())
}

/// Runs the selection: checks the options, opens the suite, runs the cases,
/// writes the report (and the expectations when asked), prints the summary.
pub fn run(args: Args) -> ExitCode {
    if let Some(file) = &args.archive {
        return super::archive::run_archived(file, args.extract_to.as_deref());
    }
    match &args.resume {
        Some(dir) => match resume(dir) {
            Ok((args, from)) => run_from(args, Some(from)),
            Err(e) => fail(e),
        },
        None => run_from(args, None),
    }
}

/// [`run`], going on from the cases an interrupted run finished, if any.
fn run_from(args: Args, from: Option<Resume>) -> ExitCode {
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
    let root = args.cases.root();
    let suite = match open(&args, &root) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let selection = Selection {
        filter: args.filter.clone(),
        tags: args.tags.clone(),
        names,
        shard,
        fraction: args.fraction.map(|n| n as usize),
    };
    let entries = match suite.select(&selection) {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    // Workers read it from their environment, which they inherit.
    std::env::set_var(vkcopy_engine::SPEED_VAR, args.speed.name());
    let spawn = match std::env::current_exe() {
        Ok(exe) if !args.in_process => {
            let overrides = Overrides {
                policy: args.policy.map(|p| p.to_string()),
                simulate_memory: args.simulate_memory.clone(),
                validation: args.validation,
                runtime: suite.runtime.clone(),
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
        stop: vkcopy_suite::schedule::Stop {
            max_fails: args.max_fails.map(|n| n as usize),
            on_device_lost: args.stop_on_device_lost,
        },
    };
    let mut report = suite.report();
    report.selection = selection.describe();
    let (dir, mut journal, done) = match open_journal(&args, &report, from) {
        Ok(j) => j,
        Err(e) => return fail(e),
    };
    if let Some(h) = &done {
        report.started = h.0.started.clone();
        out!(
            "resuming {}: {} cases done, {} to run",
            dir.display(),
            h.1.len(),
            entries
                .iter()
                .filter(|e| !h.1.iter().any(|d| d.name == e.name))
                .count()
        );
    }
    let carried: Vec<CaseRecord> = done.map(|d| d.1).unwrap_or_default();
    let todo: Vec<_> = entries
        .iter()
        .filter(|e| !carried.iter().any(|d| d.name == e.name))
        .cloned()
        .collect();
    let mut progress = vkcopy_suite::progress::Progress::new(todo.len());
    let clock = std::time::Instant::now();
    let mut unwritten = None;
    let ran = schedule::run(&suite, &todo, &plan, |c, _, _| {
        progress.case(c);
        if let Err(e) = journal.append(c) {
            unwritten.get_or_insert(e);
        }
    });
    progress.finish();
    if let Some(e) = unwritten {
        eprintln!("warning: cannot write {}: {e}", journal.path().display());
    }
    report.resumed = carried.len();
    report.seconds =
        clock.elapsed().as_secs_f64() + carried.iter().map(|c| c.outcome.seconds).sum::<f64>();
    // In the selection's order, whichever part of the run ran each case.
    let (mut carried, mut ran) = (carried, ran);
    report.cases = entries
        .iter()
        .filter_map(|e| {
            let take = |from: &mut Vec<CaseRecord>| {
                let i = from.iter().position(|c| c.name == e.name)?;
                Some(from.swap_remove(i))
            };
            take(&mut carried).or_else(|| take(&mut ran))
        })
        .collect();
    let chart = match vkcopy_suite::plot::report_chart(&report) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match report.write_into(&dir, chart) {
        Ok(()) => out!("report: {}", vkcopy_engine::files::shown(&dir)),
        Err(e) => eprintln!(
            "warning: cannot write the report to {}: {e}; its cases are in {}",
            dir.display(),
            journal.path().display()
        ),
    }
    let whole = selection.filter.is_none()
        && selection.tags.is_empty()
        && selection.names.is_none()
        && selection.shard.is_none()
        && selection.fraction.is_none();
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
    if let Some(c) = report
        .cases
        .iter()
        .find(|c| c.outcome.message.starts_with("not run: "))
    {
        out!("stopped early: {}", &c.outcome.message["not run: ".len()..]);
    }
    // One closing line, the expected failures on it: a reader of a passing log
    // sees that the failures above it were expected.
    let summary = report.summary();
    match summary.expected_failures {
        0 => out!("{summary}"),
        n => out!("{summary}, {n} expected failures (listed in the expectation files; their messages above are expected)"),
    }
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

/// The run's report folder and journal: new ones, or those of the interrupted
/// run `from`, with its header and the cases it finished.
#[allow(clippy::type_complexity)]
fn open_journal(
    args: &Args,
    report: &Report,
    from: Option<Resume>,
) -> Result<
    (
        PathBuf,
        journal::Journal,
        Option<(journal::Header, Vec<CaseRecord>)>,
    ),
    String,
> {
    if let Some(r) = from {
        if r.header.device != report.device.name {
            return Err(format!(
                "--resume {}: the run was on {}, this device is {}",
                r.dir.display(),
                r.header.device,
                report.device.name
            ));
        }
        let j = journal::Journal::reopen(&r.dir)
            .map_err(|e| format!("--resume {}: {e}", r.dir.display()))?;
        return Ok((r.dir, j, Some((r.header, r.done))));
    }
    let report_dir = args.report_dir.clone().unwrap_or_else(default_report_dir);
    let dir = report.create_folder(&report_dir).map_err(|e| {
        format!(
            "cannot create the report folder in {}: {e}",
            vkcopy_engine::files::shown(&report_dir)
        )
    })?;
    let header = journal::Header {
        argv: std::env::args()
            .skip_while(|a| a != "run")
            .skip(1)
            .collect(),
        cwd: std::env::current_dir().unwrap_or_default(),
        started: report.started.clone(),
        device: report.device.name.clone(),
    };
    let j = journal::Journal::create(&dir, &header)
        .map_err(|e| format!("cannot start the journal in {}: {e}", dir.display()))?;
    Ok((dir, j, None))
}

/// The suite of the cases folder `root` under the run's options, with what it
/// runs on printed: the runtime, the device, the expectation files, the table.
fn open(args: &Args, root: &std::path::Path) -> Result<Suite, String> {
    let options = options(
        args.policy,
        args.simulate_memory.as_deref(),
        args.validation,
    )?;
    // Chosen once, here; the suite and the workers take it as a value.
    let runtime = match &args.runtime {
        Some(r) => Choice::resolve(r, &root.join("..")).map_err(|e| format!("--runtime {e}"))?,
        None => Choice::from_env()?,
    };
    if let Choice::Halide(lib) = &runtime {
        if let Err(why) = halide_harness::refused_by(lib, &options) {
            return Err(format!("--runtime {}: {why}", lib.display()));
        }
        out!(
            "runtime: Halide {} ({})",
            runtime.halide_name().unwrap_or_default(),
            lib.display()
        );
    }
    for f in vkcopy_engine::discover::misnamed_files(root) {
        eprintln!(
            "warning: {}: not run: the suite reads only *.yaml files; rename it to .yaml",
            f.display()
        );
    }
    let config = Config {
        cases: root.to_owned(),
        options,
        // The file --update-expectations is to write may not exist yet.
        expectations: args
            .expectations
            .iter()
            .filter(|p| !args.update_expectations || p.exists())
            .cloned()
            .collect(),
        runtime: vkcopy_suite::target::target(runtime),
    };
    let suite = Suite::open(config).map_err(|e| e.to_string())?;
    if let Some(want) = &args.expect_device {
        vkcopy_suite::suite::check_device(want, &suite.device)
            .map_err(|e| format!("--expect-device: {e}"))?;
    }
    match &suite.device {
        // Halide's runtime picks its memory types itself: no policy of ours.
        Ok(d) if !suite.runtime.takes_policy() => out!(
            "device: {} ({}, {})",
            d.record.name,
            d.record.device_type,
            d.record.driver
        ),
        Ok(d) => out!(
            "device: {} ({}, {}), policy {}",
            d.record.name,
            d.record.device_type,
            d.record.driver,
            suite.options.policy
        ),
        Err(e) => out!("no Vulkan device: {e}"),
    }
    if let (Ok(d), [], false) = (
        &suite.device,
        args.expectations.as_slice(),
        !suite.runtime.takes_policy(),
    ) {
        // Names the files a user may add for this device, the read ones below.
        let dir = vkcopy_suite::suite::expectations_dir(root);
        let layers: Vec<String> = d
            .keys
            .files(&dir)
            .iter()
            .map(|(_, p)| {
                let name = p.strip_prefix(&dir).unwrap_or(p).display();
                match p.is_file() {
                    true => name.to_string(),
                    false => format!("{name} (none)"),
                }
            })
            .collect();
        out!(
            "expectation layers in {}, the first match wins: {}",
            dir.display(),
            layers.join(", ")
        );
    }
    for path in &suite.expectations_files {
        out!("expectations: {}", path.display());
    }
    if let Some(t) = &suite.options.simulate_memory {
        out!("simulating the memory table of {}", t.name);
    }
    Ok(suite)
}

/// Writes the expectations of `report` into the file `--update-expectations` names.
fn update_expectations(suite: &Suite, args: &Args, report: &Report) -> Result<PathBuf, String> {
    let path = match (args.expectations.as_slice(), &suite.device) {
        ([one], _) => one.clone(),
        ([], Ok(d)) => vkcopy_suite::suite::expectations_to_update(
            &suite.root,
            &d.keys,
            suite.options.policy,
            &suite.runtime,
        ),
        ([], Err(e)) => return Err(format!("--update-expectations: no device: {e}")),
        _ => return Err("--update-expectations: name one --expectations file to write".into()),
    };
    let old = std::fs::read_to_string(&path).ok();
    let text = vkcopy_engine::expectations::updated(old.as_deref(), report, &path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// `--speed`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Speed {
    /// A threshold missed fails the case on a GPU; on a CPU device (lavapipe),
    /// whose speed is the machine's load as much as the code's, it is reported.
    Auto,
    /// A speed threshold missed fails the case, on any device.
    Hold,
    /// Misses are reported with the figures and do not fail.
    Report,
}

impl Speed {
    fn name(self) -> &'static str {
        match self {
            Speed::Auto => "auto",
            Speed::Hold => "hold",
            Speed::Report => "report",
        }
    }
}

/// `reports/out` of the checkout when the run starts inside it (from `cases/`
/// or `runner/` too), so that reports never land in a stray `reports/` of a
/// subfolder; `reports/out` under the current folder elsewhere (an unpacked
/// archive run from a lab's folder).
fn default_report_dir() -> PathBuf {
    let out = PathBuf::from("reports/out");
    let home = vkcopy_engine::discover::home();
    match std::env::current_dir() {
        Ok(cwd) if cwd.starts_with(&home) && home.join(".git").exists() => home.join(out),
        _ => out,
    }
}
