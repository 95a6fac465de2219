//! One suite run, for the CLI and the test harness alike: probe the device
//! once, discover and plan the cases, say which cannot run here, run the rest
//! and collect a report.

use std::path::{Path, PathBuf};

use crate::discover::{case_files, name_matches};
use crate::exec;
use crate::expectations::Expectations;
use crate::outcome::{Outcome, Status};
use crate::plan::{self, CasePlan};
use crate::report::meta::driver_version_name;
use crate::report::{device_slug, CaseRecord, DeviceRecord, MemoryRecord, Report, ToolRecord};
use crate::rt::{Context, ContextOptions, DeviceType, ElemType, Error};
use crate::steps::compute;

/// The device the suite runs on, as found by opening it once.
#[derive(Clone, Debug)]
pub struct Device {
    pub record: DeviceRecord,
    /// The device's own memory table.
    pub memory: MemoryRecord,
    pub device_type: DeviceType,
    /// Why kernels cannot run on an element type, per type that cannot.
    unsupported: Vec<(ElemType, String)>,
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
        .filter_map(|&e| compute::unsupported(&ctx, &[e]).map(|why| (e, why)))
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
        unsupported,
    }))
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The cases folder.
    pub cases: PathBuf,
    pub options: ContextOptions,
    /// Known failures; default: `reports/expectations/<device>.yaml` next to the
    /// cases folder, if there is one.
    pub expectations: Option<PathBuf>,
}

/// What the suite decided about a case before running it.
#[derive(Clone, Debug)]
pub enum Verdict {
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
    pub name: String,
    pub path: PathBuf,
    pub verdict: Verdict,
}

/// A suite ready to run: device probed, expectations loaded.
#[derive(Clone, Debug)]
pub struct Suite {
    pub root: PathBuf,
    pub options: ContextOptions,
    pub device: Result<Device, String>,
    pub expectations: Expectations,
    /// The file the expectations came from, if any.
    pub expectations_file: Option<PathBuf>,
}

impl Suite {
    /// Probes the device and loads the expectations; errors are settings to fix.
    pub fn open(config: Config) -> Result<Suite, String> {
        let device = probe(&config.options).map_err(|e| e.to_string())?;
        let default = device.as_ref().ok().map(|d| {
            config
                .cases
                .join("../reports/expectations")
                .join(format!("{}.yaml", device_slug(&d.record.name)))
        });
        let file = config
            .expectations
            .or_else(|| default.filter(|p| p.is_file()));
        let mut expectations = match &file {
            Some(path) => Expectations::load(path)?,
            None => Expectations::default(),
        };
        if let Ok(d) = &device {
            expectations = expectations.for_device(d.device_type);
        }
        Ok(Suite {
            root: config.cases,
            options: config.options,
            device,
            expectations,
            expectations_file: file,
        })
    }

    /// The cases whose name matches `filter` (all without one), planned.
    pub fn entries(&self, filter: Option<&str>) -> Result<Vec<Entry>, String> {
        let mut out = Vec::new();
        for path in case_files(&self.root)? {
            let name = plan::case_name(&self.root, &path);
            if filter.is_some_and(|f| !name_matches(f, &name)) {
                continue;
            }
            let verdict = self.verdict(&path);
            out.push(Entry {
                name,
                path,
                verdict,
            });
        }
        Ok(out)
    }

    fn verdict(&self, path: &Path) -> Verdict {
        let plan = match plan::load(&self.root, path) {
            Ok(p) => p,
            Err(e) => return Verdict::Broken(e.to_string()),
        };
        if !plan.needs_device() {
            return Verdict::Run(Box::new(plan));
        }
        let device = match &self.device {
            Ok(d) => d,
            Err(e) => return Verdict::NoDevice(e.clone()),
        };
        let unsupported = plan.kernel_elem_types().into_iter().find_map(|t| {
            device
                .unsupported
                .iter()
                .find(|(e, _)| *e == t)
                .map(|(_, why)| why.clone())
        });
        match plan.unmet(device.device_type).or(unsupported) {
            Some(why) => Verdict::Skip(why),
            None => Verdict::Run(Box::new(plan)),
        }
    }

    /// Runs one case (or gives its verdict), with the expectations applied.
    pub fn run(&self, entry: &Entry) -> Outcome {
        let out = match &entry.verdict {
            Verdict::Run(plan) => exec::run(plan, &self.options),
            Verdict::Skip(why) => Outcome::new(Status::Skip, why.clone(), Default::default()),
            Verdict::Broken(e) => Outcome::failed(e.clone()),
            Verdict::NoDevice(e) => Outcome::failed(format!("needs a Vulkan device: {e}")),
        };
        self.expectations.apply(&entry.name, out)
    }

    /// Runs every case matching `filter`, calling `each` after each one; an
    /// error when none matches.
    pub fn run_all(
        &self,
        filter: Option<&str>,
        mut each: impl FnMut(&CaseRecord),
    ) -> Result<Report, String> {
        let started = crate::stamp::utc_now();
        let clock = std::time::Instant::now();
        let mut report = Report {
            schema_version: crate::report::SCHEMA_VERSION,
            tool: ToolRecord::this(),
            memory: self.device.as_ref().ok().map(|d| d.memory.clone()),
            validation: self.options.validation,
            host: crate::stamp::host_name(),
            started,
            seconds: 0.0,
            device: self
                .device
                .as_ref()
                .map(|d| d.record.clone())
                .unwrap_or_default(),
            policy: self.options.policy.to_string(),
            simulated_memory: self
                .options
                .simulate_memory
                .as_ref()
                .map(|t| t.name.clone()),
            cases: Vec::new(),
        };
        for entry in self.entries(filter)? {
            let record = CaseRecord {
                outcome: self.run(&entry),
                name: entry.name,
                path: entry.path.display().to_string(),
            };
            each(&record);
            report.cases.push(record);
        }
        report.seconds = clock.elapsed().as_secs_f64();
        if report.cases.is_empty() {
            let matching = filter
                .map(|f| format!(" matches '{f}'"))
                .unwrap_or_default();
            return Err(format!("no case{matching} in {}", self.root.display()));
        }
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
