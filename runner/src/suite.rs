//! One suite run, for the CLI and the test harness alike: probe the device
//! once, discover and plan the cases, say which cannot run here, run the rest
//! and collect a report.

use crate::error::SuiteError;
use std::path::{Path, PathBuf};

use crate::outcome::{Outcome, Status};
use crate::report::driver_version_name;
use crate::report::{CaseRecord, DeviceRecord, MemoryRecord, Report, ToolRecord};
use vkcopy_engine::discover::{case_files, name_matches};
use vkcopy_engine::exec;
use vkcopy_engine::expectations::Expectations;
use vkcopy_engine::layers::DeviceKeys;
use vkcopy_engine::plan::{self, CasePlan};
use vkcopy_engine::rt::{Context, ContextOptions, DeviceType, ElemType, Error, Kernels, Policy};
use vkcopy_engine::runtime::Target;

/// The device the suite runs on, as found by opening it once.
#[derive(Clone, Debug)]
pub struct Device {
    /// What reports say of the device.
    pub record: DeviceRecord,
    /// The device's own memory table.
    pub memory: MemoryRecord,
    /// Its type, which `requires:` is held to.
    pub device_type: DeviceType,
    /// What names its layers of expectation files.
    pub keys: DeviceKeys,
    /// Why kernels cannot run on an element type, per type that cannot.
    unsupported: Vec<(ElemType, String)>,
}

/// The variable that `run --expect-device` reads when the flag is not given.
pub const EXPECT_DEVICE_VAR: &str = "VKCOPY_EXPECT_DEVICE";

/// Whether `device` is the one a run asks for: `want` is a device type as
/// cases name them (`discrete-gpu`, `gpu`, `cpu`...) or part of the device's
/// name, in any case. A GPU job that lands on lavapipe (a missing ICD, a
/// container without the driver) fails here, before any case runs.
pub fn check_device(want: &str, device: &Result<Device, String>) -> Result<(), SuiteError> {
    let want = want.trim();
    let wrong = |found| SuiteError::WrongDevice {
        want: want.to_owned(),
        found,
    };
    let d = device
        .as_ref()
        .map_err(|e| wrong(format!("there is no Vulkan device: {e}")))?;
    let name = &d.record.name;
    let ok = match vkcopy_engine::requires::DeviceReq::parse(want) {
        Some(t) => t.accepts(d.device_type),
        None => name.to_lowercase().contains(&want.to_lowercase()),
    };
    if ok {
        return Ok(());
    }
    Err(wrong(format!(
        "the device opened is {name} ({}, {}); is its Vulkan driver installed and found \
         (VK_DRIVER_FILES, VKCOPY_DEVICE)?",
        d.record.device_type, d.record.driver
    )))
}

/// Opens the device `options` name once. `Ok(Err(why))` when there is no Vulkan
/// loader or device: device cases then cannot run. `Err` for any other error,
/// a setting to fix (`VKCOPY_DEVICE`, `VKCOPY_ALLOC_CONFIG`, ...).
pub fn probe(options: &ContextOptions) -> Result<Result<Device, String>, Error> {
    let ctx = match Context::new(options.clone()) {
        Ok(ctx) => ctx,
        Err(e @ (Error::LoaderMissing(_) | Error::NoDevice)) => return Ok(Err(e.to_string())),
        Err(e) => return Err(e),
    };
    let i = ctx.info();
    let unsupported = ElemType::ALL
        .iter()
        .filter_map(|&e| {
            Kernels::kernel_supports(&ctx, e)
                .err()
                .map(|why| (e, why.to_string()))
        })
        .collect();
    Ok(Ok(Device {
        record: DeviceRecord {
            name: i.name.clone(),
            device_type: format!("{:?}", i.device_type),
            driver: i.driver.clone(),
            driver_version: driver_version_name(i.vendor_id, i.driver_version),
            api_version: i.api_version.clone(),
            vendor_id: i.vendor_id,
            device_id: i.device_id,
            extensions: i.features.iter().map(|f| f.to_string()).collect(),
        },
        memory: MemoryRecord::from(ctx.device_memory()),
        device_type: i.device_type,
        keys: DeviceKeys::new(&i.name, i.vendor_id, &i.driver_name),
        unsupported,
    }))
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The cases folder.
    pub cases: PathBuf,
    /// The options of every context the cases run on.
    pub options: ContextOptions,
    /// Expectation files (known failures and flakes); default: those of
    /// [`default_expectations`] that exist.
    pub expectations: Vec<PathBuf>,
    /// The runtime under test.
    pub runtime: Target,
}

/// `reports/expectations/` beside the cases folder `cases`.
pub fn expectations_dir(cases: &Path) -> PathBuf {
    match cases.file_name().and(cases.parent()) {
        Some(up) => up.join("reports/expectations"),
        None => cases.join("../reports/expectations"),
    }
}

/// The expectation files a run reads by itself, in the order an entry is
/// looked for: the device's layers of `reports/expectations/` next to the cases
/// folder, the most specific first ([`vkcopy_engine::layers`]), then `policy-<policy>.yaml`
/// under a policy other than the default. Another runtime than vkcopy reads its
/// own `runtime-<name>.yaml` alone: its failures are its own.
pub fn default_expectations(
    cases: &Path,
    keys: &DeviceKeys,
    policy: Policy,
    runtime: &Target,
) -> Vec<PathBuf> {
    let dir = expectations_dir(cases);
    if let Some(own) = runtime.own_expectations() {
        return vec![dir.join(own)];
    }
    let mut files: Vec<PathBuf> = keys.files(&dir).into_iter().map(|(_, p)| p).collect();
    if policy != Policy::default() {
        files.push(dir.join(format!("policy-{policy}.yaml")));
    }
    files
}

/// The file `run --update-expectations` writes by itself: the policy's under
/// another policy or runtime, else the exact device's layer (the narrowest;
/// move entries to the model or driver layer where they hold more widely).
pub fn expectations_to_update(
    cases: &Path,
    keys: &DeviceKeys,
    policy: Policy,
    runtime: &Target,
) -> PathBuf {
    let files = default_expectations(cases, keys, policy, runtime);
    if !runtime.takes_policy() || policy != Policy::default() {
        files.last().cloned().unwrap_or_default()
    } else {
        files.first().cloned().unwrap_or_default()
    }
}

/// Which cases to run, besides what the device can run.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// A glob of names.
    pub filter: Option<String>,
    /// Cases with any of these tags.
    pub tags: Vec<String>,
    /// Only these names (a re-run of failures).
    pub names: Option<Vec<String>>,
    /// `(k, n)`: the k-th of n shards (1-based), by a hash of each case's name
    /// ([`vkcopy_fleet::shard`]), with the cases marked `every_shard` in every shard.
    pub shard: Option<(usize, usize)>,
    /// One case in `n`, by another hash of the name (`--fraction`, a sample for
    /// pre-merge runs), with the `every_shard` cases.
    pub fraction: Option<usize>,
}

impl Selection {
    /// Whether the shard and the sample take a case (`every_shard`: its file's
    /// `every_shard:`).
    pub fn samples(&self, name: &str, every_shard: bool) -> bool {
        every_shard
            || (self
                .shard
                .is_none_or(|(k, n)| vkcopy_fleet::shard::in_shard(name, k, n))
                && self
                    .fraction
                    .is_none_or(|n| vkcopy_fleet::shard::in_fraction(name, n)))
    }

    /// Whether a case of `name` and `tags` is selected (before sharding).
    pub fn admits(&self, name: &str, tags: &[String]) -> bool {
        self.filter.as_ref().is_none_or(|f| name_matches(f, name))
            && (self.tags.is_empty() || self.tags.iter().any(|t| tags.contains(t)))
            && self
                .names
                .as_ref()
                .is_none_or(|n| n.iter().any(|x| x == name))
    }

    /// What the selection is, for an error saying that no case matches.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(f) = &self.filter {
            parts.push(format!("matches '{f}'"));
        }
        if !self.tags.is_empty() {
            parts.push(format!("has a tag of {}", self.tags.join(",")));
        }
        if self.names.is_some() {
            parts.push("failed in the report".to_owned());
        }
        if let Some((k, n)) = self.shard {
            parts.push(format!("is in shard {k}/{n}"));
        }
        if let Some(n) = self.fraction {
            parts.push(format!("is in the sample of 1 in {n}"));
        }
        parts.join(" and ")
    }
}

/// Parses `K/N` (1 <= K <= N).
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("'{s}': expected K/N with 1 <= K <= N, e.g. 2/3");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

/// What the suite decided about a case before running it.
#[derive(Clone, Debug)]
pub enum Decision {
    /// Run it: its plan.
    Run(Box<CasePlan>),
    /// The device cannot run it (its type, or kernels on an element type).
    Skip(String),
    /// It does not load: the located error.
    Broken(String),
    /// It needs a device and there is none.
    NoDevice(String),
}

/// A case found by the suite.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The case's name.
    pub name: String,
    /// The case file.
    pub path: PathBuf,
    /// The case's `tags:` (none when it does not load).
    pub tags: Vec<String>,
    /// Whether every shard runs it (`every_shard:`).
    pub every_shard: bool,
    /// Whether and how it runs.
    pub decision: Decision,
}

/// A suite ready to run: device probed, expectations loaded.
#[derive(Clone, Debug)]
pub struct Suite {
    /// The cases folder.
    pub root: PathBuf,
    /// The options of every context the cases run on.
    pub options: ContextOptions,
    /// The runtime under test.
    pub runtime: Target,
    /// The device, or why there is none.
    pub device: Result<Device, String>,
    /// Known failures and flakes, from `expectations_files`.
    pub expectations: Expectations,
    /// The files the expectations came from.
    pub expectations_files: Vec<PathBuf>,
}

impl Suite {
    /// Probes the device and loads the expectations; errors are settings to fix.
    pub fn open(config: Config) -> Result<Suite, SuiteError> {
        let device = probe(&config.options)?;
        let files = match (config.expectations.is_empty(), &device) {
            (false, _) => config.expectations,
            (true, Ok(d)) => default_expectations(
                &config.cases,
                &d.keys,
                config.options.policy,
                &config.runtime,
            )
            .into_iter()
            .filter(|p| p.is_file())
            .collect(),
            (true, Err(_)) => Vec::new(),
        };
        let mut expectations = Expectations::default();
        for path in &files {
            let loaded = Expectations::load(path).map_err(SuiteError::Input)?;
            expectations = expectations.merged(loaded);
        }
        if let Ok(d) = &device {
            expectations = expectations.for_device(d.device_type);
        }
        Ok(Suite {
            root: config.cases,
            options: config.options,
            runtime: config.runtime,
            device,
            expectations,
            expectations_files: files,
        })
    }

    /// The cases whose name matches `filter` (all without one), planned.
    pub fn entries(&self, filter: Option<&str>) -> Result<Vec<Entry>, SuiteError> {
        let selection = Selection {
            filter: filter.map(str::to_owned),
            ..Selection::default()
        };
        self.select(&selection)
    }

    /// The cases of `selection`, planned, in path order; an error when no case
    /// matches (a shard or a sample may hold none: a small suite split wide).
    pub fn select(&self, selection: &Selection) -> Result<Vec<Entry>, SuiteError> {
        let mut out = Vec::new();
        let mut admitted = 0;
        for path in case_files(&self.root).map_err(SuiteError::Input)? {
            let name = vkcopy_engine::discover::case_name(&self.root, &path);
            // By name first: a case left out is not even loaded.
            let by_name = Selection {
                tags: Vec::new(),
                ..selection.clone()
            };
            if !by_name.admits(&name, &[]) {
                continue;
            }
            let (decision, tags, every_shard) = self.decide(&path);
            if !selection.admits(&name, &tags) {
                continue;
            }
            admitted += 1;
            if !selection.samples(&name, every_shard) {
                continue;
            }
            out.push(Entry {
                name,
                path,
                tags,
                every_shard,
                decision,
            });
        }
        if admitted == 0 {
            let what = selection.describe();
            let what = if what.is_empty() {
                String::new()
            } else {
                format!(" that {what}")
            };
            let none = format!("no case{what} in {}", self.root.display());
            return Err(SuiteError::NoCase(none));
        }
        Ok(out)
    }

    fn decide(&self, path: &Path) -> (Decision, Vec<String>, bool) {
        let plan = match plan::load(&self.root, path) {
            Ok(p) => p,
            Err(e) => return (Decision::Broken(e.to_string()), Vec::new(), false),
        };
        let (tags, every) = (plan.tags.clone(), plan.every_shard);
        (self.decide_plan(plan), tags, every)
    }

    fn decide_plan(&self, plan: CasePlan) -> Decision {
        if let Some(why) = vkcopy_engine::exec::unsupported(&plan, &self.runtime) {
            return Decision::Skip(why);
        }
        if !plan.needs_device() {
            return Decision::Run(Box::new(plan));
        }
        let device = match &self.device {
            Ok(d) => d,
            Err(e) => return Decision::NoDevice(e.clone()),
        };
        let unsupported = plan.kernel_elem_types().into_iter().find_map(|t| {
            device
                .unsupported
                .iter()
                .find(|(e, _)| *e == t)
                .map(|(_, why)| why.clone())
        });
        match plan.unmet(device.device_type).or(unsupported) {
            Some(why) => Decision::Skip(why),
            None => Decision::Run(Box::new(plan)),
        }
    }

    /// Runs one case in this process (or gives the status decided before running).
    pub fn run_once(&self, entry: &Entry) -> Outcome {
        match &entry.decision {
            Decision::Run(plan) => exec::run(plan, &self.options, &self.runtime),
            Decision::Skip(why) => Outcome::new(Status::Skip, why.clone(), Default::default()),
            Decision::Broken(e) => Outcome::failed(e.clone()),
            Decision::NoDevice(e) => Outcome::failed(format!("needs a Vulkan device: {e}")),
        }
    }

    /// Runs one case once in this process and judges it.
    pub fn run(&self, entry: &Entry) -> CaseRecord {
        self.judge(entry, vec![self.run_once(entry)])
    }

    /// The record of a case from its attempts (at least one): the verdict against
    /// the expectations, and the outcome of the first failing attempt (else the last).
    pub fn judge(&self, entry: &Entry, attempts: Vec<Outcome>) -> CaseRecord {
        let statuses: Vec<Status> = attempts.iter().map(|o| o.status).collect();
        let j = self.expectations.judge(&entry.name, &statuses);
        let count = attempts.len() as u32;
        let mut outcome = match attempts.iter().position(|o| o.status.is_failure()) {
            Some(i) => attempts.into_iter().nth(i),
            None => attempts.into_iter().last(),
        }
        .unwrap_or_else(|| Outcome::failed("the case never ran".into()));
        outcome.message = match (j.note.is_empty(), outcome.message.is_empty()) {
            (true, _) => outcome.message,
            (false, true) => j.note,
            (false, false) => format!("{}: {}", j.note, outcome.message),
        };
        CaseRecord {
            name: entry.name.clone(),
            path: entry.path.display().to_string(),
            verdict: j.verdict,
            attempts: count,
            expectation: j.reason,
            expected_by: j.from,
            tags: entry.tags.clone(),
            outcome,
        }
    }

    /// An empty report of a run on this suite's device and policy, starting now.
    pub fn report(&self) -> Report {
        Report {
            schema_version: crate::report::SCHEMA_VERSION,
            tool: ToolRecord {
                name: env!("CARGO_PKG_NAME").into(),
                version: env!("CARGO_PKG_VERSION").into(),
                commit: env!("VKCOPY_COMMIT").into(),
            },
            memory: self.device.as_ref().ok().map(|d| d.memory.clone()),
            validation: self.options.validation,
            selection: String::new(),
            expectations: self
                .expectations_files
                .iter()
                .map(|p| vkcopy_engine::files::shown(p))
                .collect(),
            host: vkcopy_engine::stamp::host_name(),
            started: vkcopy_engine::stamp::utc_now(),
            seconds: 0.0,
            resumed: 0,
            device: self
                .device
                .as_ref()
                .map(|d| d.record.clone())
                .unwrap_or_default(),
            policy: self.runtime.report_policy(self.options.policy),
            simulated_memory: self
                .options
                .simulate_memory
                .as_ref()
                .map(|t| t.name.clone()),
            cases: Vec::new(),
        }
    }

    /// Runs every case matching `filter` in this process, calling `each` after
    /// each one; an error when none matches.
    pub fn run_all(
        &self,
        filter: Option<&str>,
        mut each: impl FnMut(&CaseRecord),
    ) -> Result<Report, SuiteError> {
        let clock = std::time::Instant::now();
        let mut report = self.report();
        report.selection = filter.map(|f| format!("matches '{f}'")).unwrap_or_default();
        for entry in self.entries(filter)? {
            let record = self.run(&entry);
            each(&record);
            report.cases.push(record);
        }
        report.seconds = clock.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Expectation entries that match no case of the run (stale, or misspelt).
    pub fn stale_expectations(&self, report: &Report) -> Vec<String> {
        let names: Vec<String> = report.cases.iter().map(|c| c.name.clone()).collect();
        self.expectations
            .unmatched(&names)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }
}
