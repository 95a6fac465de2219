//! `plot`, `diff`, `merge`, `flakes` and `junit`: commands over finished
//! reports, read through the one `results.json` reader,
//! `vkcopy_suite::report::read` (`junit` needs this version's `Report`).

use std::path::PathBuf;
use std::process::ExitCode;

use vkcopy_suite::compare::{diff, merge};
use vkcopy_suite::report::read;

use super::{fail, print};

/// `vkcopy-suite plot`'s options.
#[derive(clap::Args)]
pub struct PlotArgs {
    /// Reports as LABEL=PATH (or PATH), in the order to draw them; a PATH is
    /// a results.json or a run's folder.
    reports: Vec<String>,
    /// The SVG to write; its PNG is written beside it (chart.svg, chart.png).
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value = "vkcopy-suite throughput")]
    title: String,
}

/// Draws the measured copies of the reports into one SVG and its PNG.
pub fn plot(args: &PlotArgs) -> ExitCode {
    let mut bars = Vec::new();
    let paths: Vec<&str> = args
        .reports
        .iter()
        .map(|r| r.split_once('=').map_or(r.as_str(), |(_, p)| p))
        .collect();
    let short = short_labels(&paths);
    for (r, short) in args.reports.iter().zip(short) {
        // A lone report needs no legend entry of its own; several are told
        // apart by what their paths do not share.
        let (label, path) = match r.split_once('=') {
            Some((l, p)) => (l.to_owned(), p),
            None if args.reports.len() == 1 => (String::new(), r.as_str()),
            None => (short, r.as_str()),
        };
        // A results.json or a run's folder (of shards), as diff takes them.
        match read::load_one(path.as_ref()) {
            Ok(report) => {
                let some = vkcopy_suite::plot::bars_from_report(&report, &label);
                if some.is_empty() {
                    // Left out of the chart, but never without a word.
                    eprintln!("warning: {path}: no measured copies to draw (no perf case ran)");
                }
                bars.extend(some);
            }
            Err(e) => return fail(e),
        }
    }
    match vkcopy_suite::plot::throughput_svg(&bars, &args.title, &args.out) {
        Ok((files, missing)) => {
            for f in files {
                out!("wrote {}", f.display());
            }
            if let Some(why) = missing {
                eprintln!("warning: no PNG: {why}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// The legend's names of reports given as paths: each path without the
/// folders that every path starts with, and without a closing
/// `results.json`, so that `reports/out/<device>/<time>-<runtime>/` is named
/// by its last folder.
fn short_labels(paths: &[&str]) -> Vec<String> {
    let parts: Vec<Vec<&str>> = paths
        .iter()
        .map(|p| {
            let mut v: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
            if v.len() > 1 && v.last() == Some(&"results.json") {
                v.pop();
            }
            v
        })
        .collect();
    let shortest = parts.iter().map(Vec::len).min().unwrap_or(0);
    let common = (0..shortest.saturating_sub(1))
        .take_while(|&i| parts.iter().all(|p| p[i] == parts[0][i]))
        .count();
    parts.iter().map(|p| p[common..].join("/")).collect()
}

/// `vkcopy-suite diff`'s options.
#[derive(clap::Args)]
pub struct DiffArgs {
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
}

/// Prints what changed from run A to run B; exit code 1 on a regression.
pub fn diff(args: &DiffArgs) -> ExitCode {
    let threshold = args.threshold;
    if !(threshold >= 0.0 && threshold.is_finite()) {
        return fail(format!(
            "--threshold {threshold}: expected a relative change >= 0, e.g. 0.1"
        ));
    }
    let (a, b) = match (read::load_one(&args.a), read::load_one(&args.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return fail(e),
    };
    let d = diff::diff(&a, &b, threshold);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&d).unwrap_or_default() + "\n";
        if let Err(e) = std::fs::write(path, text) {
            return fail(format!("{}: {e}", path.display()));
        }
    }
    print(&d.markdown());
    if d.has_regressions() || (args.fail_on_slower && !d.slower.is_empty()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `vkcopy-suite merge`'s options.
#[derive(clap::Args)]
pub struct MergeArgs {
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    #[arg(long)]
    out: PathBuf,
}

/// Writes merged.md and merged.json: one device x case table of the reports.
pub fn merge(args: &MergeArgs) -> ExitCode {
    let loaded = match read::load_all(&args.reports) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    // A lab's loop over hosts may lose one: say which shards no report covers.
    for l in &loaded {
        let missing = l.missing_shards();
        if !missing.is_empty() {
            eprintln!(
                "warning: {}: no report of shard {} (its cases are missing from the table)",
                l.label(),
                missing.join(", ")
            );
        }
    }
    let merged = merge::merge(&loaded);
    let out = &args.out;
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
        Err(e) => fail(format!("{}: {e}", out.display())),
    }
}

/// `vkcopy-suite flakes`' options.
#[derive(clap::Args)]
pub struct FlakesArgs {
    /// results.json files, or folders of them (every run below is read).
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    /// Also write the flaky cases as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Prints each flaky case's history across the runs as Markdown.
pub fn flakes(args: &FlakesArgs) -> ExitCode {
    let mut runs = Vec::new();
    for p in &args.reports {
        let files = match read::report_files(p) {
            Ok(f) => f,
            Err(e) => return fail(e),
        };
        for f in files {
            match read::load_file(&f) {
                Ok(r) => runs.push(r),
                Err(e) => return fail(e),
            }
        }
    }
    let found = vkcopy_suite::compare::flakes::flakes(&runs);
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&found).unwrap_or_default();
        if let Err(e) = std::fs::write(path, json + "\n") {
            return fail(format!("{}: {e}", path.display()));
        }
    }
    print(&vkcopy_suite::compare::flakes::markdown(&found, runs.len()));
    ExitCode::SUCCESS
}

/// `vkcopy-suite junit`'s options.
#[derive(clap::Args)]
pub struct JunitArgs {
    /// A results.json written by this version, or a folder: every
    /// results.json below it (as `merge` reads them), one test suite each.
    report: PathBuf,
    /// At most N failing cases; the rest are counted in one more test case.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// A link added to each failure; {name} is the case, {device} the device's
    /// folder name, e.g. https://lab.example/logs/{device}/{name}.txt.
    #[arg(long, value_name = "TEMPLATE")]
    link: Option<String>,
    /// Where to write the XML.
    #[arg(long, short)]
    out: PathBuf,
}

/// Writes a run's JUnit XML with a failure limit and links.
pub fn junit(args: &JunitArgs) -> ExitCode {
    let files = match read::report_files(&args.report) {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    let mut reports = Vec::new();
    for path in &files {
        match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(r) => reports.push(r),
            Err(e) => return fail(format!("{}: {e}", path.display())),
        }
    }
    let options = vkcopy_suite::report::junit::Options {
        limit: args.limit,
        link: args.link.clone(),
    };
    let xml = vkcopy_suite::report::junit::xml_of_all(&reports, &options);
    match std::fs::write(&args.out, xml) {
        Ok(()) => {
            out!("wrote {}", args.out.display());
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("{}: {e}", args.out.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::short_labels;

    #[test]
    fn reports_are_named_by_what_their_paths_do_not_share() {
        let out = "reports/out/llvmpipe-llvm-15-0-6-256-bits";
        assert_eq!(
            short_labels(&[
                &format!("{out}/20261206T050504Z"),
                &format!("{out}/20261206T052551Z-halide-legacy/results.json"),
            ]),
            ["20261206T050504Z", "20261206T052551Z-halide-legacy"]
        );
        // Two devices' runs keep the device's folder.
        assert_eq!(
            short_labels(&["out/a/t1/results.json", "out/b/t1/"]),
            ["a/t1", "b/t1"]
        );
        // The same path twice stays whole at its last part.
        assert_eq!(
            short_labels(&["x/r.json", "x/r.json"]),
            ["r.json", "r.json"]
        );
    }
}
