//! Expectations written and read in layers, flakes over runs, JUnit.

use std::path::Path;

use super::*;

/// A flake is reported and fails the run only under --strict.
#[test]
fn a_flake_fails_the_run_only_under_strict() {
    if !hook_built("a_flake_fails_the_run_only_under_strict") {
        return;
    }
    let dir = fleet_cases();
    for (strict, code) in [(false, 0), (true, 1)] {
        let mut cmd = fleet_run(dir.path(), &["--filter", "flaky", "--retries", "2"]);
        if strict {
            cmd.arg("--strict");
        }
        let out = cmd.env("VKCOPY_SUITE_TEST_HOOK", HOOKS).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if no_device(&stdout) {
            return;
        }
        assert_eq!(out.status.code(), Some(code), "strict {strict}: {stdout}");
        assert!(
            stdout.contains("flake flaky: flake: fail, then passed on attempt 2"),
            "{stdout}"
        );
    }
}

/// --update-expectations writes every failure with its status; the next run
/// against that file passes with expected failures, the flake a known flake;
/// --rerun-failed runs only what failed.
#[test]
fn expectations_written_from_a_run_then_rerun_failed() {
    if !hook_built("expectations_written_from_a_run_then_rerun_failed") {
        return;
    }
    let dir = fleet_cases();
    let file = dir.path().join("expectations.yaml");
    let run = |args: &[&str]| {
        let mut cmd = fleet_run(dir.path(), args);
        cmd.arg("--expectations").arg(&file);
        cmd.env("VKCOPY_SUITE_TEST_HOOK", HOOKS).output().unwrap()
    };
    let out = run(&["--update-expectations", "--timeout", "60"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if no_device(&stdout) {
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let text = std::fs::read_to_string(&file).unwrap();
    for (case, status) in [
        ("aborts", "crash"),
        ("exhausts_memory", "resource_error"),
        ("fails", "fail"),
        ("flaky", "fail"),
        ("hangs", "timeout"),
        ("panics", "crash"),
    ] {
        assert!(
            text.contains(&format!("  - case: \"{case}\"\n    reason: \"{status} on ")),
            "{case}: {text}"
        );
        assert!(text.contains(&format!("    status: [{status}]")), "{text}");
    }
    assert!(
        !text.contains("\"passes\"") && !text.contains("known_flakes:\n"),
        "{text}"
    );
    let out = run(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // The run ends on one line, the expected failures on it.
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.contains(" passed, 0 failed, ") && last.contains(", 6 expected failures"),
        "{stdout}"
    );
    let report = latest_report(&dir.path().join("out")).join("results.json");
    let out = fleet_run(dir.path(), &["--rerun-failed"])
        .arg(&report)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Without the hook, only `fails` and `exhausts_memory` fail; the rest pass.
    let got = fleet_results(dir.path());
    let names: Vec<&str> = got.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "aborts",
            "exhausts_memory",
            "fails",
            "flaky",
            "hangs",
            "panics"
        ],
        "{stdout}"
    );
    assert!(stdout.contains("4 passed, 2 failed, 0 skipped"), "{stdout}");
}

/// `flakes` reads runs' history: a case that flaked in one run and passed in
/// another is flaky; one that always fails is not. `junit` writes a run again
/// with the flake's failed attempt as `<flakyFailure>`, a failure limit and
/// links.
#[test]
fn flakes_and_junit_read_a_history_of_runs() {
    if !hook_built("flakes_and_junit_read_a_history_of_runs") {
        return;
    }
    let dir = fleet_cases();
    let first = fleet_run(dir.path(), &["--filter", "f*", "--retries", "1"])
        .env("VKCOPY_SUITE_TEST_HOOK", "flake:flaky")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&first.stdout).into_owned();
    if no_device(&stdout) {
        return;
    }
    assert!(stdout.contains("1 flaky"), "{stdout}");
    let run_1 = only_report(&dir.path().join("out"));
    fleet_run(dir.path(), &["--filter", "f*"]).output().unwrap();
    let json = dir.path().join("flakes.json");
    let out = suite()
        .arg("flakes")
        .arg(dir.path().join("out"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{md}");
    assert!(md.contains("Results read: 2 (each shard's counts as one); cases that both passed and failed, or flaked: 1."), "{md}");
    let found: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found[0]["case"], "flaky");
    assert_eq!(found[0]["history"], "fp");
    assert_eq!(found[0]["rate"], 0.5);
    let xml = dir.path().join("j.xml");
    // `junit` on `from` with `args`: its status, stderr and the XML it wrote.
    let junit = |from: &Path, args: &[&str]| {
        let out = suite()
            .arg("junit")
            .arg(from)
            .args(args)
            .arg("--out")
            .arg(&xml)
            .output()
            .unwrap();
        let text = std::fs::read_to_string(&xml).unwrap_or_default();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            text,
        )
    };
    let (code, stderr, text) = junit(
        &run_1,
        &["--limit", "0", "--link", "https://lab/{device}/{name}"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(text.matches("<flakyFailure").count(), 1, "{text}");
    // `fails` is over the limit of 0: counted, not written.
    assert!(!text.contains("<testcase name=\"fails\""), "{text}");
    assert!(
        text.contains("failing cases over the limit of 0: 1 more"),
        "{text}"
    );
    // A folder gives every run below it, one test suite each, as `merge`
    // reads folders; a folder without one is refused.
    let (code, stderr, text) = junit(&dir.path().join("out"), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(text.matches("<testsuite ").count(), 2, "{text}");
    assert_eq!(text.matches("<flakyFailure").count(), 1, "{text}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, stderr, _) = junit(&empty, &[]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no results.json in this folder"));
}

/// Expectations in layers: the run names the files it looks for (device, model,
/// driver, all), the most specific entry that matches wins and the report names
/// its file; --update-expectations writes the device's layer and leaves a case
/// another layer lists to that layer.
#[test]
fn expectations_come_in_layers_and_the_report_names_the_winner() {
    let dir = fleet_cases();
    for e in std::fs::read_dir(dir.path().join("cases")).unwrap() {
        let path = e.unwrap().path();
        let keep = ["fails", "exhausts_memory", "passes"];
        if path.is_file() && !keep.iter().any(|k| path.ends_with(format!("{k}.yaml"))) {
            std::fs::remove_file(path).unwrap();
        }
    }
    let run = |args: &[&str]| {
        let out = fleet_run(dir.path(), args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        (out.status.code(), stdout + &stderr)
    };
    let (_, stdout) = run(&["--filter", "passes"]);
    if no_device(&stdout) {
        return;
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("expectation layers in "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let files: Vec<&str> = line
        .rsplit(": ")
        .next()
        .unwrap()
        .split(", ")
        .map(|f| f.trim_end_matches(" (none)"))
        .collect();
    assert_eq!(files.len(), 4, "{line}");
    assert!(files[0].starts_with("device/") && files[1].starts_with("model/"));
    assert!(
        files[2].starts_with("driver/") && files[3] == "all.yaml",
        "{line}"
    );
    let expectations = dir.path().join("reports/expectations");
    let write = |file: &str, cases: &[(&str, &str)]| {
        let path = expectations.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut text = String::from("expected_failures:\n");
        for (case, reason) in cases {
            text += &format!("  - {{ case: \"{case}\", reason: \"{reason}\" }}\n");
        }
        std::fs::write(path, text).unwrap();
    };
    write(files[3], &[("fails", "all"), ("exhausts_memory", "all")]);
    write(files[2], &[("fails", "driver")]);
    write(files[0], &[("exhausts_memory", "device")]);
    let verdicts = || {
        let json = latest_report(&dir.path().join("out")).join("results.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        let mut got = std::collections::BTreeMap::new();
        for c in v["cases"].as_array().unwrap() {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            got.insert(
                s("name"),
                (s("verdict"), s("expectation"), s("expected_by")),
            );
        }
        got
    };
    let (code, stdout) = run(&[]);
    assert_eq!(code, Some(0), "{stdout}");
    let got = verdicts();
    let (verdict, reason, by) = &got["fails"];
    assert_eq!(
        (verdict.as_str(), reason.as_str()),
        ("expected_fail", "driver")
    );
    assert!(by.ends_with(files[2]), "{by}");
    let (verdict, reason, by) = &got["exhausts_memory"];
    assert_eq!(
        (verdict.as_str(), reason.as_str()),
        ("expected_fail", "device")
    );
    assert!(by.ends_with(files[0]), "{by}");
    assert_eq!(got["passes"].2, "");
    let summary =
        std::fs::read_to_string(latest_report(&dir.path().join("out")).join("summary.md")).unwrap();
    assert!(summary.contains(&format!("| {} |", files[2])), "{summary}");
    // Without the device's layer, the case falls through to every device's.
    std::fs::remove_file(expectations.join(files[0])).unwrap();
    let (code, stdout) = run(&[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(verdicts()["exhausts_memory"].1, "all");
    // Unlisted there, a failure is written into the device's layer, alone.
    write(files[3], &[]);
    let (code, stdout) = run(&["--update-expectations"]);
    assert_eq!(code, Some(1), "{stdout}");
    let text = std::fs::read_to_string(expectations.join(files[0])).unwrap();
    assert!(text.contains("case: \"exhausts_memory\""), "{text}");
    assert!(!text.contains("\"fails\""), "{text}");
    let (code, stdout) = run(&[]);
    assert_eq!(code, Some(0), "{stdout}");
}
