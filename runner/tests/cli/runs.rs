//! `run`: its checks, its options and the reports it writes.

use std::path::Path;

use super::*;

#[test]
fn a_malformed_case_fails_alone_with_one_located_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("devices")).unwrap();
    std::fs::copy(
        repo().join("cases/devices/lavapipe.yaml"),
        root.join("devices/lavapipe.yaml"),
    )
    .unwrap();
    std::fs::write(
        root.join("good.yaml"),
        "about: ok\nselection:\n  table: lavapipe\n  expect:\n    - { request: readback, vkcopy: 0 }\n",
    )
    .unwrap();
    std::fs::write(
        root.join("bad.yaml"),
        "about: broken\nselection:\n  table: lavapipe\n  expect:\n    - { request: readback, vkcopi: 0 }\n",
    )
    .unwrap();
    let out = suite()
        .arg("run")
        .arg("--cases")
        .arg(root)
        .arg("--report-dir")
        .arg(root.join("out"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let located: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("bad.yaml:5:"))
        .collect();
    assert_eq!(located.len(), 1, "{stdout}");
    assert!(located[0].contains("unknown field `vkcopi`"), "{stdout}");
    assert!(stdout.contains("pass  good"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l == "1 passed, 1 failed, 0 skipped"),
        "{stdout}"
    );
    // The report names both cases.
    let json =
        std::fs::read_to_string(only_report(&root.join("out")).join("results.json")).unwrap();
    assert!(
        json.contains("\"name\": \"bad\"") && json.contains("\"name\": \"good\""),
        "{json}"
    );
}

#[test]
fn the_old_policy_fails_only_its_known_failures() {
    let dir = tempfile::tempdir().unwrap();
    // The old policy's upload measured 0.49-0.73x a memcpy on two busy cores
    // (at least 0.5x): speed is reported here, not held (`suite()`).
    let out = suite()
        .args(["run", "--retries", "2", "--policy", "halide-legacy"])
        .arg("--expectations")
        .arg(repo().join("reports/expectations/policy-halide-legacy.yaml"))
        .arg("--report-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        return;
    }
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains(" expected failures"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("xfail regressions::seed_readback::h200:")),
        "{stdout}"
    );
    // JUnit and Markdown reports are written next to the JSON.
    let device = only_report(dir.path());
    let junit = std::fs::read_to_string(device.join("junit.xml")).unwrap();
    assert!(
        junit.contains("<testcase name=\"regressions::seed_readback::h200\""),
        "{junit}"
    );
    assert!(std::fs::read_to_string(device.join("summary.md"))
        .unwrap()
        .contains("| regressions::seed_readback::h200 | expected_fail | fail |"));
}

/// A run asked for a device it did not get fails at its start, before any
/// case, naming what it got; the device's own type or name passes.
#[test]
fn a_run_on_another_device_than_expected_fails_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = |want: &str, by_env: bool| {
        let mut c = suite();
        c.args(["run", "--filter", "basic::errors", "--report-dir"])
            .arg(dir.path())
            .env_remove("VKCOPY_EXPECT_DEVICE");
        if by_env {
            c.env("VKCOPY_EXPECT_DEVICE", want);
        } else {
            c.args(["--expect-device", want]);
        }
        c.output().unwrap()
    };
    let probe = run("any", false);
    let stdout = String::from_utf8_lossy(&probe.stdout).into_owned();
    if stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        return;
    }
    assert!(probe.status.success(), "{stdout}");
    // "device: NAME (Type, driver), policy ..."
    let line = stdout.lines().find(|l| l.starts_with("device: ")).unwrap();
    let name = line["device: ".len()..]
        .split(" (")
        .next()
        .unwrap()
        .to_owned();
    let is_cpu = line.contains("(Cpu,");
    let (other, own_type) = if is_cpu {
        ("gpu", "cpu")
    } else {
        ("cpu", "gpu")
    };
    for by_env in [false, true] {
        let out = run(other, by_env);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "--expect-device: expected device '{other}', but the device opened is {name}"
            )),
            "{stderr}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("passed"));
        assert!(run(own_type, by_env).status.success());
        assert!(run(&name.to_uppercase(), by_env).status.success());
    }
}

#[test]
fn simulate_memory_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let out = suite()
        .args(["run", "--filter", "basic::round_trip_2d", "--report-dir"])
        .arg(dir.path())
        .env(
            "VKCOPY_SIMULATE_MEMORY",
            repo().join("cases/devices/nvidia-h200.yaml"),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        return;
    }
    assert!(out.status.success(), "{stdout}");
    let device = only_report(dir.path());
    let json = std::fs::read_to_string(device.join("results.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let placements = v["cases"][0]["placements"].as_array().unwrap();
    let readback = placements.iter().find(|p| p["role"] == "readback").unwrap();
    assert_eq!(readback["memory_type"], 3, "{readback}");
    assert_eq!(readback["flags"], "HOST_VISIBLE|HOST_COHERENT|HOST_CACHED");

    let out = suite()
        .args(["run", "--filter", "basic::round_trip_2d"])
        .env("VKCOPY_SIMULATE_MEMORY", "no/such/table.yaml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/table.yaml"));
}

/// A developer's own `VK_INSTANCE_LAYERS` makes the loader print a notice through
/// the messenger; that notice is not a validation finding and fails no case.
#[test]
fn a_users_instance_layers_fail_no_case() {
    if !Path::new("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = suite()
        .args(["run", "--filter", "basic::round_trip_2d", "--report-dir"])
        .arg(dir.path())
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation")
        .env("VKCOPY_VALIDATION", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        return;
    }
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// A case that ends with an async copy still in flight fails, naming the buffer;
/// waited for, the same case passes.
#[test]
fn an_async_copy_left_in_flight_fails_its_case() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let case = |wait: &str| {
        format!(
            "about: async\nbuffers:\n  g: {{ type: i32, extent: [64] }}\nsteps:\n  - fill_host: {{ buffer: g, value: \"x\" }}\n  - start_copy_to_device: g\n{wait}"
        )
    };
    std::fs::write(root.join("left.yaml"), case("")).unwrap();
    std::fs::write(root.join("waited.yaml"), case("  - wait: g\n")).unwrap();
    // Not read, and said so.
    std::fs::write(root.join("typo.yml"), case("  - wait: g\n")).unwrap();
    let out = suite()
        .arg("run")
        .arg("--cases")
        .arg(root)
        .arg("--report-dir")
        .arg(root.join("out"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        return;
    }
    assert!(
        stdout.contains("async copies never waited for (add `wait:` steps): g"),
        "{stdout}"
    );
    assert!(stdout.contains("1 passed, 1 failed"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("typo.yml: not run: the suite reads only *.yaml files; rename it to .yaml"),
        "{stderr}"
    );
}

#[test]
fn a_run_writes_every_report_file_and_each_parses() {
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        suite()
            .args(["run", "--filter", "perf::[rs]*", "--report-dir"])
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        return;
    }
    assert!(out.status.success(), "{stdout}");
    let folder = only_report(dir.path());
    let mut files: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "failures.csv",
            "journal.jsonl",
            "junit.xml",
            "results.csv",
            "results.json",
            "summary.md",
            "throughput.png",
            "throughput.svg"
        ]
    );
    // results.json against the committed schema.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("reports/results.schema.json")).unwrap(),
    )
    .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("results.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&json)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    // The journal has the header, then each case of results.json once.
    let mut journaled = journal_names(dir.path());
    journaled.sort();
    let mut reported: Vec<String> = json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    reported.sort();
    assert_eq!(journaled, reported);
    assert_eq!(json["schema_version"], 2);
    assert_eq!(json["tool"]["name"], "vkcopy-suite");
    assert!(json["started"].as_str().unwrap().ends_with('Z'));
    let names: Vec<&str> = json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "perf::readback_64mib",
            "perf::readback_vs_upload",
            "perf::small_copy_latency"
        ]
    );
    // CSV: deqp-runner's shape.
    let csv = std::fs::read_to_string(folder.join("results.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    assert_eq!(rows[2][..2], ["perf::small_copy_latency", "Pass"]);
    assert!(rows[2][2].parse::<f64>().unwrap() > 0.0);
    assert_eq!(
        std::fs::read_to_string(folder.join("failures.csv")).unwrap(),
        ""
    );
    // JUnit: one test case per case.
    let (elements, _) = xml_parts(&std::fs::read_to_string(folder.join("junit.xml")).unwrap());
    assert_eq!(elements.iter().filter(|e| *e == "testcase").count(), 3);
    // The chart: GB/s and latency each on an axis of its own, and a legend.
    let (elements, texts) =
        xml_parts(&std::fs::read_to_string(folder.join("throughput.svg")).unwrap());
    assert_eq!(elements[0], "svg");
    for want in [
        "GB/s (1e9 bytes/s), host clock: longer is faster",
        "microseconds per copy (host clock), copies of 64 KiB or less: shorter is faster",
        "bar and figure: best run; dot: median run",
        "perf::small_copy_latency: copy_to_host g",
    ] {
        assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
    }
    let summary = std::fs::read_to_string(folder.join("summary.md")).unwrap();
    assert!(
        summary.contains("**3 passed, 0 failed, 0 skipped, 0 expected failures, 0 flaky**"),
        "{summary}"
    );
    // What chose the cases is said, in the summary and in results.json.
    assert_eq!(json["selection"], "matches 'perf::[rs]*'");
    assert!(
        summary.contains("Cases: matches 'perf::[rs]*'. Expectations: "),
        "{summary}"
    );
    // So are the runtime and the memory table.
    let types = json["memory"]["types"].as_array().map_or(0, Vec::len);
    let heaps = json["memory"]["heaps"].as_array().map_or(0, Vec::len);
    assert!(types > 0, "{json}");
    assert!(
        summary.contains(&format!(
            "Runtime: vkcopy, policy `vkcopy`. Memory table: the device's own ({heaps} heaps, {types} types)."
        )),
        "{summary}"
    );
    for f in json["expectations"].as_array().into_iter().flatten() {
        let f = f.as_str().unwrap();
        assert!(!f.contains(".."), "{f}");
        assert!(summary.contains(&format!("`{f}`")), "{summary}");
    }
    // A second run gets a folder of its own.
    assert!(run().status.success());
    let runs = std::fs::read_dir(folder.parent().unwrap()).unwrap().count();
    assert_eq!(runs, 2);
}

/// `run --help` names every variable of the environment table of runner/README.md.
#[test]
fn run_help_lists_every_environment_variable() {
    let out = suite().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let readme = std::fs::read_to_string(repo().join("runner/README.md")).unwrap();
    let section = readme.split("## Environment").nth(1).unwrap();
    let table = section.split("\n## ").next().unwrap();
    let vars: Vec<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .collect();
    assert!(vars.len() >= 12, "{vars:?}");
    for v in vars {
        assert!(help.contains(v), "run --help lacks {v}:\n{help}");
    }
}
