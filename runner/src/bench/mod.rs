//! `vkcopy-suite bench`: copy times over a sweep of sizes for every path,
//! written as JSON in the shape `bench/cuda_reference.py` writes, and compared
//! side by side with such a CUDA file.
//!
//! | module | what |
//! |---|---|
//! | `args` | the command line |
//! | `sizes` | `4KiB`-style sizes, read and written |
//! | [`doc`] | the JSON document, read and written (one set of serde structs) |
//! | `vkcopy_engine::stamp` | host name and UTC time of a run |
//! | `host` | the kinds of host memory a copy reads or writes |
//! | `paths` | the copy paths and one copy of each |
//! | `sweep` | running the sweep on a context |
//! | `compare` | matching vkcopy's results with CUDA's; the Markdown table |
//! | `chart` | the comparison as SVG |
//! | `overlap` | copies at the same time as each other and as kernels |
//! | `breakdown` | where the time of one copy goes, step by step |

pub(crate) mod args;
pub(crate) mod breakdown;
pub(crate) mod chart;
pub(crate) mod compare;
pub mod doc;
pub(crate) mod halide;
pub(crate) mod host;
pub(crate) mod overlap;
pub(crate) mod paths;
pub(crate) mod sizes;
pub(crate) mod sweep;

use std::path::{Path, PathBuf};

use crate::report::device_slug;
pub use args::Args;
use doc::BenchDoc;
use vkcopy_engine::rt::{Context, ContextOptions, MappedCalibration};

/// Why `bench` stopped: bad input or no device (exit code 2), or validation
/// messages during the sweep (exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Bad input or no device: exit code 2.
    #[error("{0}")]
    Usage(String),
    /// Validation messages during the sweep: exit code 1.
    #[error("{0}")]
    Validation(String),
}

/// Runs the sweep (unless `--against` gives vkcopy's results), writes its JSON,
/// and with `--compare` prints the table and draws the chart next to the JSON.
/// Progress and the table go to `print`.
pub fn main(args: &Args, mut print: impl FnMut(&str)) -> Result<(), Failure> {
    let usage = Failure::Usage;
    if let Some(bytes) = args.overlap {
        return run_overlap(args, bytes, &mut print);
    }
    if let Some(runtime) = &args.runtime {
        return run_halide(args, runtime, &mut print);
    }
    if args.breakdown {
        return run_breakdown(args, &mut print);
    }
    let cuda = match &args.compare {
        Some(p) => Some(BenchDoc::read(p).map_err(usage)?),
        None => None,
    };
    let (vk, json) = match &args.against {
        Some(p) => (BenchDoc::read(p).map_err(usage)?, p.clone()),
        None => {
            let (doc, out) = run_sweep(args, &mut print)?;
            (doc, out)
        }
    };
    if let Some(cuda) = cuda {
        let rows = compare::rows(&vk, &cuda);
        print(&compare::markdown(&vk, &cuda, &rows));
        let svg = next_to(&json, "bench_vs_cuda.svg");
        let title = format!("vkcopy on {} vs CUDA on {}", vk.device, cuda.device);
        let (files, missing) = chart::draw(&rows, &title, &svg).map_err(usage)?;
        for f in files {
            print(&format!("wrote {}", f.display()));
        }
        for why in missing {
            eprintln!("warning: no PNG: {why}");
        }
    }
    Ok(())
}

/// The sweep on Halide's runtime, as a table.
fn run_halide(args: &Args, runtime: &str, print: &mut impl FnMut(&str)) -> Result<(), Failure> {
    let root = vkcopy_engine::discover::cases_root();
    let choice = vkcopy_engine::runtime::Choice::resolve(runtime, &root.join(".."));
    let lib = match choice.clone() {
        Ok(vkcopy_engine::runtime::Choice::Halide(lib)) => lib,
        Ok(vkcopy_engine::runtime::Choice::Vkcopy) => {
            return Err(Failure::Usage(
                "--runtime vkcopy: leave --runtime out".into(),
            ))
        }
        Err(e) => return Err(Failure::Usage(format!("--runtime {e}"))),
    };
    let halide = halide_harness::ffi::library(&lib).map_err(|e| Failure::Usage(e.to_string()))?;
    let plan = args.plan(vkcopy_engine::rt::DeviceType::DiscreteGpu);
    print(&format!(
        "Halide {} ({}), best of {} timed runs (at most {} from {}) after {} warm-up copies, host clock",
        choice.ok().and_then(|c| c.halide_name()).unwrap_or_default(),
        lib.display(),
        args.repeat.map_or(
            format!(
                "{} ({} up to {})",
                sweep::DEFAULT_REPEAT,
                sweep::SMALL_REPEAT,
                sizes::format(sweep::SMALL)
            ),
            |n| n.to_string()
        ),
        sweep::BIG_REPEAT,
        sizes::format(sweep::BIG),
        sweep::WARMUP
    ));
    print(halide::HEADING);
    halide::run(halide, &plan.sizes, args.repeat, |r| print(&r.line())).map_err(Failure::Usage)
}

fn run_sweep(args: &Args, print: &mut impl FnMut(&str)) -> Result<(BenchDoc, PathBuf), Failure> {
    let options = ContextOptions::from_env().map_err(|e| Failure::Usage(e.to_string()))?;
    let ctx = Context::new(options)
        .map_err(|e| Failure::Usage(format!("cannot create a Vulkan context: {e}")))?;
    let info = ctx.info();
    let plan = args.plan(info.device_type);
    print(&format!(
        "{} ({}), driver {}, vkcopy {}",
        info.name,
        info.device_type,
        info.driver,
        env!("CARGO_PKG_VERSION")
    ));
    for note in &plan.notes {
        print(&format!("note: {note}"));
    }
    let mut doc = BenchDoc::new(&info.name, &info.driver);
    print(&sweep::heading());
    sweep::run(&ctx, &plan, |r| {
        print(&sweep::row(r));
        doc.results.push(r.clone());
    })
    .map_err(Failure::Usage)?;
    measured_choices(&ctx).iter().for_each(|l| print(l));
    let queues = ctx.copy_queue_calibrations();
    doc.queues = queues.iter().map(doc::QueueChoice::new).collect();
    let messages = ctx.take_validation_messages();
    if !messages.is_empty() {
        return Err(Failure::Validation(format!(
            "{} validation message(s):\n  {}",
            messages.len(),
            messages.join("\n  ")
        )));
    }
    let out = args.out.clone().unwrap_or_else(|| {
        Path::new("reports/out")
            .join(device_slug(&info.name))
            .join("bench.json")
    });
    doc.write(&out).map_err(Failure::Usage)?;
    print(&format!(
        "wrote {} ({} results)",
        out.display(),
        doc.results.len()
    ));
    Ok((doc, out))
}

/// Copies per measurement where every size gets the same count.
fn repeat(args: &Args) -> u32 {
    args.repeat.unwrap_or(sweep::DEFAULT_REPEAT)
}

fn run_overlap(args: &Args, bytes: u64, print: &mut impl FnMut(&str)) -> Result<(), Failure> {
    let options = ContextOptions::from_env().map_err(|e| Failure::Usage(e.to_string()))?;
    let ctx = Context::new(options)
        .map_err(|e| Failure::Usage(format!("cannot create a Vulkan context: {e}")))?;
    let info = ctx.info();
    print(&format!(
        "{} ({}), driver {}",
        info.name, info.device_type, info.driver
    ));
    let results = overlap::run(&ctx, bytes, repeat(args)).map_err(Failure::Usage)?;
    for line in overlap::rows(&results) {
        print(&line);
    }
    finish(&ctx, args, "overlap.json", &results, print)
}

fn run_breakdown(args: &Args, print: &mut impl FnMut(&str)) -> Result<(), Failure> {
    let options = ContextOptions::from_env().map_err(|e| Failure::Usage(e.to_string()))?;
    let ctx = Context::new(options)
        .map_err(|e| Failure::Usage(format!("cannot create a Vulkan context: {e}")))?;
    let info = ctx.info();
    print(&format!(
        "{} ({}), driver {}; medians of {} copies, microseconds",
        info.name,
        info.device_type,
        info.driver,
        repeat(args)
    ));
    let sizes = args
        .sizes
        .clone()
        .unwrap_or(breakdown::DEFAULT_SIZES.to_vec());
    let paths = args.paths.clone().unwrap_or(paths::BenchPath::ALL.to_vec());
    print(&breakdown::heading());
    let rows = breakdown::run(&ctx, &paths, &sizes, repeat(args)).map_err(Failure::Usage)?;
    for r in &rows {
        print(&breakdown::row(r));
    }
    measured_choices(&ctx).iter().for_each(|l| print(l));
    finish(&ctx, args, "breakdown.json", &rows, print)
}

/// What the context measured to choose its routes: per size class, the CPU's
/// write against the GPU's copy for uploads into device memory, the CPU's
/// streaming read against the GPU's copy for readbacks from it,
/// `vkCmdCopyBuffer` against the copy shader for device-to-device copies, and
/// per path and size class each queue's time for a copy by the GPU, with the
/// family chosen.
fn measured_choices(ctx: &Context) -> Vec<String> {
    let us = |s: f64| format!("{:.1} us", s * 1e6);
    let mapped = |what: &'static str, cpu: &'static str, list: Vec<MappedCalibration>| {
        list.into_iter().map(move |c| {
            format!(
                "{what} class {}: CPU {cpu} {}, GPU copy {}: {}",
                sizes::format(c.min_bytes),
                us(c.mapped_seconds),
                us(c.copy_seconds),
                if c.mapped { "mapped" } else { "copy" }
            )
        })
    };
    let uploads = mapped("upload", "write", ctx.upload_calibrations());
    let readbacks = mapped("readback", "streaming read", ctx.readback_calibrations());
    let copies = ctx.device_copy_calibrations().into_iter().map(|c| {
        format!(
            "device copy class {}{}: transfer {}, shader {}: {}",
            sizes::format(c.min_bytes),
            if c.contiguous { "" } else { " (strided)" },
            us(c.transfer_seconds),
            us(c.shader_seconds),
            c.chosen.name()
        )
    });
    let queues = ctx.copy_queue_calibrations().into_iter().map(|c| {
        let times: Vec<String> = c
            .times
            .iter()
            .map(|t| format!("family {} {}", t.family, us(t.seconds)))
            .collect();
        format!(
            "{} class {} queue (measured on {}): {}: family {}",
            c.path.name(),
            sizes::format(c.min_bytes),
            sizes::format(c.bytes),
            times.join(", "),
            c.family()
        )
    });
    uploads
        .chain(readbacks)
        .chain(copies)
        .chain(queues)
        .collect()
}

/// Fails on validation messages; else writes `value` to `--out` (default
/// `reports/out/<device>/<name>`).
fn finish(
    ctx: &Context,
    args: &Args,
    name: &str,
    value: &impl serde::Serialize,
    print: &mut impl FnMut(&str),
) -> Result<(), Failure> {
    let messages = ctx.take_validation_messages();
    if !messages.is_empty() {
        return Err(Failure::Validation(messages.join("\n  ")));
    }
    let out = args.out.clone().unwrap_or_else(|| {
        Path::new("reports/out")
            .join(device_slug(&ctx.info().name))
            .join(name)
    });
    write_json(&out, value)?;
    print(&format!("wrote {}", out.display()));
    Ok(())
}

/// Writes `value` as pretty JSON, making the folder.
fn write_json(out: &Path, value: &impl serde::Serialize) -> Result<(), Failure> {
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Failure::Usage(e.to_string()))?;
    }
    let json = serde_json::to_string_pretty(value).map_err(|e| Failure::Usage(e.to_string()))?;
    std::fs::write(out, json + "\n").map_err(|e| Failure::Usage(format!("{}: {e}", out.display())))
}

/// `name` in the folder of `file`.
fn next_to(file: &Path, name: &str) -> PathBuf {
    file.parent().unwrap_or(Path::new(".")).join(name)
}
