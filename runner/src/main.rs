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
use vkcopy::memory::policy::MemoryRequest;
use vkcopy::{Context, ContextOptions, MemoryTable, Policy, Role};
use vkcopy_suite::discover::{case_files, cases_root, check_pattern, name_matches};
use vkcopy_suite::exec::{self, Outcome, Status};
use vkcopy_suite::expectations::Expectations;
use vkcopy_suite::plan;
use vkcopy_suite::report::{CaseRecord, DeviceRecord, Report};

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
    /// Runs the cases on the default device (VKCOPY_DEVICE / VKCOPY_DEVICE_TYPE pick another).
    Run {
        /// Only cases whose name matches this glob, e.g. `halide::*` or `*crop*`.
        #[arg(long)]
        filter: Option<String>,
        /// Memory-type selection policy: vkcopy, halide or halide-legacy.
        #[arg(long)]
        policy: Option<Policy>,
        /// The cases folder.
        #[arg(long)]
        cases: Option<PathBuf>,
        /// Where reports go: <DIR>/<device>/results.json and summary.md.
        #[arg(long, default_value = "reports/out")]
        report_dir: PathBuf,
        /// Present this recorded memory table to the allocator (cases/devices/X.yaml).
        #[arg(long)]
        simulate_memory: Option<PathBuf>,
        /// Known failures (reports/expectations/*.yaml); default: the file named after
        /// the device in reports/expectations/, if there is one.
        #[arg(long)]
        expectations: Option<PathBuf>,
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
    /// Lists the cases.
    List {
        #[arg(long)]
        cases: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            filter,
            policy,
            cases,
            report_dir,
            simulate_memory,
            expectations,
        } => run(
            filter,
            policy,
            cases,
            report_dir,
            simulate_memory,
            expectations,
        ),
        Command::Select {
            table,
            request,
            policy,
        } => select(&table, &request, policy),
        Command::Devices => devices(),
        Command::List { cases } => list(cases),
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
        let (label, path) = match r.split_once('=') {
            Some((l, p)) => (format!("{l} "), p),
            None => (String::new(), r.as_str()),
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

fn devices() -> ExitCode {
    match Context::list_devices() {
        Ok(list) => {
            for d in list {
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

fn run(
    filter: Option<String>,
    policy: Option<Policy>,
    cases: Option<PathBuf>,
    report_dir: PathBuf,
    simulate_memory: Option<PathBuf>,
    expectations: Option<PathBuf>,
) -> ExitCode {
    let root = cases.unwrap_or_else(cases_root);
    if let Some(f) = &filter {
        if let Err(e) = check_pattern(f) {
            eprintln!("error: --filter {e}");
            return ExitCode::from(2);
        }
    }
    let mut options = match ContextOptions::from_env() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(p) = policy {
        options.policy = p;
    }
    if let Some(path) = simulate_memory {
        match MemoryTable::from_yaml_file(&path) {
            Ok(t) => options.simulate_memory = Some(t),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let files = match case_files(&root) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // One context up front: names the device in the report, and says early when there is none.
    let mut device_type = None;
    let (device, device_error) = match Context::new(options.clone()) {
        Ok(ctx) => {
            device_type = Some(ctx.info().device_type);
            let i = ctx.info();
            (
                DeviceRecord {
                    name: i.name.clone(),
                    device_type: format!("{:?}", i.device_type),
                    driver: i.driver.clone(),
                    api_version: i.api_version.clone(),
                },
                None,
            )
        }
        // No loader or no device: the device cases fail, the others still run.
        Err(e @ (vkcopy::Error::LoaderMissing(_) | vkcopy::Error::NoDevice)) => {
            (DeviceRecord::default(), Some(e.to_string()))
        }
        // Anything else is a setting to fix (VKCOPY_DEVICE, VKCOPY_ALLOC_CONFIG, ...).
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match &device_error {
        None => out!(
            "device: {} ({}, {}), policy {}",
            device.name,
            device.device_type,
            device.driver,
            options.policy
        ),
        Some(e) => out!("no Vulkan device: {e}"),
    }
    let probe = Report {
        device: device.clone(),
        policy: String::new(),
        simulated_memory: None,
        cases: Vec::new(),
    };
    let default_file = root
        .join("..")
        .join("reports/expectations")
        .join(format!("{}.yaml", probe.device_slug()));
    let expectations = match expectations.or_else(|| default_file.is_file().then_some(default_file))
    {
        None => Expectations::default(),
        Some(path) => match Expectations::load(&path) {
            Ok(e) => {
                out!("expectations: {}", path.display());
                match &device_type {
                    Some(t) => e.for_device(*t),
                    None => e,
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let simulated_memory = options.simulate_memory.as_ref().map(|t| t.name.clone());
    if let Some(t) = &simulated_memory {
        out!("simulating the memory table of {t}");
    }
    let mut report = Report {
        device,
        policy: options.policy.to_string(),
        simulated_memory,
        cases: Vec::new(),
    };
    for path in files {
        let name = plan::case_name(&root, &path);
        if let Some(f) = &filter {
            if !name_matches(f, &name) {
                continue;
            }
        }
        let outcome = match plan::load(&root, &path) {
            Err(e) => Outcome::failed(e.to_string()),
            Ok(p) if p.needs_device() && device_error.is_some() => Outcome::failed(format!(
                "needs a Vulkan device: {}",
                device_error.as_deref().unwrap_or("")
            )),
            Ok(p) => exec::run(&p, &options),
        };
        let outcome = expectations.apply(&name, outcome);
        match outcome.status {
            Status::Pass => out!("pass  {name} ({:.2} s)", outcome.seconds),
            Status::Skip => out!("skip  {name}: {}", outcome.message),
            Status::ExpectedFail => out!(
                "xfail {name}: {}",
                outcome.message.lines().next().unwrap_or("")
            ),
            Status::Fail | Status::UnexpectedPass => out!(
                "FAIL  {name}\n      {}",
                outcome.message.replace('\n', "\n      ")
            ),
        }
        report.cases.push(CaseRecord {
            name,
            path: path.display().to_string(),
            outcome,
        });
    }
    if report.cases.is_empty() {
        eprintln!(
            "error: no case{} in {}",
            filter
                .as_deref()
                .map(|f| format!(" matches '{f}'"))
                .unwrap_or_default(),
            root.display()
        );
        return ExitCode::from(2);
    }
    match report.write(&report_dir) {
        Ok(dir) => out!("report: {}", dir.display()),
        Err(e) => eprintln!(
            "warning: cannot write the report to {}: {e}",
            report_dir.display()
        ),
    }
    if filter.is_none() {
        let names: Vec<String> = report.cases.iter().map(|c| c.name.clone()).collect();
        for stale in expectations.unmatched(&names) {
            eprintln!("warning: the expectations entry '{stale}' matches no case");
        }
    }
    let summary = report.summary();
    if summary.expected_failures > 0 {
        out!("{} expected failures", summary.expected_failures);
    }
    out!("{summary}");
    if summary.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
