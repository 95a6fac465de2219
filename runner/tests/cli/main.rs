//! The `vkcopy-suite` binary as a user runs it, one module per concern; the
//! helpers they share are here.

mod bench;
mod expectations;
mod fleet;
mod runs;
mod tables;
mod workers;

use std::path::Path;
use std::process::Command;

/// The runner, with speed thresholds reported rather than held: a busy
/// machine must not decide these tests (the perf run of scripts/test.sh holds them).
fn suite() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"));
    c.env("VKCOPY_SPEED", "report");
    c
}

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The one folder below `dir`.
fn only_folder(dir: &Path) -> std::path::PathBuf {
    let folders: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    folders.into_iter().next().unwrap()
}

/// The newest run folder below `dir/<device>/` (each run writes a new one).
fn latest_report(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(only_folder(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap())
        .unwrap()
}

/// The one run folder a run wrote its reports to: `dir/<device>/<start time>`.
fn only_report(dir: &Path) -> std::path::PathBuf {
    only_folder(&only_folder(dir))
}

/// Every XML element name and text of `xml`, as quick-xml reads them; panics
/// on malformed XML.
fn xml_parts(xml: &str) -> (Vec<String>, Vec<String>) {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut elements, mut texts) = (Vec::new(), Vec::new());
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) | Event::Empty(e) => {
                elements.push(String::from_utf8_lossy(e.name().as_ref()).into_owned())
            }
            Event::Text(t) => {
                let t = String::from_utf8_lossy(&t).trim().to_owned();
                if !t.is_empty() {
                    texts.push(t);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    (elements, texts)
}

/// The runner's fixtures (one case per status) in a folder of their own, with
/// the recorded table `exhausts_memory` simulates.
fn fleet_cases() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    std::fs::create_dir_all(cases.join("devices")).unwrap();
    std::fs::copy(
        repo().join("cases/devices/nvidia-rtx4070-no-rebar.yaml"),
        cases.join("devices/nvidia-rtx4070-no-rebar.yaml"),
    )
    .unwrap();
    for e in std::fs::read_dir(repo().join("runner/tests/fixtures/fleet")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "yaml") {
            std::fs::copy(&path, cases.join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// `vkcopy-suite run --cases DIR/cases --report-dir DIR/out` and more arguments.
fn fleet_run(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = suite();
    cmd.arg("run")
        .arg("--cases")
        .arg(dir.join("cases"))
        .arg("--report-dir")
        .arg(dir.join("out"))
        .args(args)
        .env_remove("VKCOPY_SUITE_TEST_HOOK");
    cmd
}

const HOOKS: &str = "panic:panics,abort:aborts,hang:hangs,flake:flaky";

/// Whether the binary under test reads `VKCOPY_SUITE_TEST_HOOK` (built with the
/// same profile and features as this test); says so when it does not.
fn hook_built(test: &str) -> bool {
    let built = cfg!(any(debug_assertions, feature = "test-hook"));
    if !built {
        eprintln!("{test}: skipped: this build has no test hook (a release build without --features vkcopy-suite/test-hook)");
    }
    built
}

/// Case name -> (status, verdict, attempts, message) of the newest report below `dir/out`.
fn fleet_results(dir: &Path) -> std::collections::BTreeMap<String, (String, String, u64, String)> {
    let json =
        std::fs::read_to_string(latest_report(&dir.join("out")).join("results.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (
                s("name"),
                (
                    s("status"),
                    s("verdict"),
                    c["attempts"].as_u64().unwrap(),
                    s("message"),
                ),
            )
        })
        .collect()
}

fn no_device(stdout: &str) -> bool {
    stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none()
}

/// The journal of the one run folder below `out`, its case names in the order
/// they ended (line 1 is the header).
fn journal_names(out: &Path) -> Vec<String> {
    let Ok(dirs) = glob::glob(&format!("{}/*/*/journal.jsonl", out.display())) else {
        return Vec::new();
    };
    let Some(Ok(file)) = dirs.into_iter().next() else {
        return Vec::new();
    };
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The processes of the process group `group` that are alive (not zombies).
fn live_in_group(group: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, pgrp.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[0] != "Z" && f[2].parse() == Ok(group) {
            out.push(pid);
        }
    }
    out
}
