//! The `vkcopy-suite` binary as a user runs it.

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

#[test]
fn select_answers_for_the_lab_h200() {
    let table = repo().join("cases/devices/nvidia-h200.yaml");
    for (policy, want) in [
        (
            "halide-legacy",
            "type 4: DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT (heap 0)",
        ),
        (
            "halide",
            "type 3: HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1)",
        ),
        (
            "vkcopy",
            "type 3: HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1)",
        ),
    ] {
        let out = suite()
            .args(["select", "--table"])
            .arg(&table)
            .args(["--request", "readback", "--policy", policy])
            .output()
            .unwrap();
        assert!(out.status.success(), "{policy}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "{policy}"
        );
    }
}

#[test]
fn select_answers_for_every_recorded_table() {
    for entry in std::fs::read_dir(repo().join("cases/devices")).unwrap() {
        let path = entry.unwrap().path();
        for role in ["readback", "upload", "device"] {
            let out = suite()
                .args(["select", "--table"])
                .arg(&path)
                .args(["--request", role])
                .output()
                .unwrap();
            assert!(out.status.success(), "{} {role}: {out:?}", path.display());
            assert!(String::from_utf8_lossy(&out.stdout).starts_with("type "));
        }
    }
}

#[test]
fn select_rejects_bad_input_with_exit_code_2() {
    let table = repo().join("cases/devices/nvidia-h200.yaml");
    let out = suite()
        .args(["select", "--table"])
        .arg(&table)
        .args(["--request", "sideways"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sideways"));

    let out = suite()
        .args([
            "select",
            "--table",
            "no/such/table.yaml",
            "--request",
            "readback",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/table.yaml"));
}

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

#[test]
fn plot_draws_the_measured_copies_of_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.svg");
    let folder = repo().join("reports/baselines/nvidia-h200/2026-12-03");
    let legacy = repo().join("reports/baselines/nvidia-h200/results-halide-legacy.json");
    // A run's folder and a results.json alike, as diff takes them.
    let run = suite()
        .arg("plot")
        .arg(format!("vkcopy={}", folder.display()))
        .arg(format!("legacy={}", legacy.display()))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains(&format!("wrote {}", out.display())),
        "{stdout}"
    );
    let (elements, texts) = xml_parts(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(elements[0], "svg");
    // Grouped by copy: the label once, a bar per report, the reports in the legend.
    let label = "perf::readback_64mib: copy_to_host g";
    assert_eq!(texts.iter().filter(|t| *t == label).count(), 1, "{texts:?}");
    for want in [
        "vkcopy",
        "legacy",
        "bar and figure: best run; dot: median run",
    ] {
        assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
    }
    let png = std::fs::read(dir.path().join("t.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // A run that measured nothing is named, not dropped without a word.
    let mut none: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("results.json")).unwrap()).unwrap();
    for case in none["cases"].as_array_mut().unwrap() {
        case["measurements"] = serde_json::json!([]);
    }
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, none.to_string()).unwrap();
    let run = suite()
        .arg("plot")
        .arg(&empty)
        .arg(folder.join("results.json"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains(&format!(
            "warning: {}: no measured copies to draw",
            empty.display()
        )),
        "{stderr}"
    );
    let bad = suite()
        .args(["plot", "no/such.json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn bench_writes_json_in_the_cuda_reference_shape() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = suite()
        .args(["bench", "--sizes", "4KiB,1MiB", "--repeat", "2", "--out"])
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("cannot create a Vulkan context") && std::env::var_os("CI").is_none() {
        return;
    }
    assert!(out.status.success(), "{out:?}");
    let doc = vkcopy_suite::bench::doc::BenchDoc::read(&json).unwrap();
    assert_eq!(
        (doc.tool.as_str(), doc.tool_version.as_str()),
        ("vkcopy", env!("CARGO_PKG_VERSION"))
    );
    assert!(!doc.device.is_empty() && doc.time.ends_with('Z'), "{doc:?}");
    let got: Vec<(&str, &str, u64)> = doc
        .results
        .iter()
        .map(|r| (r.path.as_str(), r.host_memory.as_str(), r.bytes))
        .collect();
    let (k, m) = (4096, 1 << 20);
    assert_eq!(
        got,
        [
            ("readback", "aligned", k),
            ("readback", "aligned", m),
            ("readback", "unaligned", k),
            ("readback", "unaligned", m),
            ("upload", "aligned", k),
            ("upload", "aligned", m),
            ("upload", "unaligned", k),
            ("upload", "unaligned", m),
            ("device_to_device", "device", k),
            ("device_to_device", "device", m),
            ("round_trip", "aligned", k),
            ("round_trip", "unaligned", k),
        ]
    );
    for r in &doc.results {
        assert_eq!(r.repeat, 2, "{r:?}");
        assert!(
            0.0 < r.best_seconds && r.best_seconds <= r.median_seconds,
            "{r:?}"
        );
        let gbps = r.bytes as f64 / r.best_seconds / 1e9;
        assert!((r.best_gbps - gbps).abs() <= 1e-9 * gbps, "{r:?}");
        // The driver's floor under each copy but round trips, on every family,
        // the same for both kinds of host memory (timed once per path and size).
        if r.path == "round_trip" {
            assert!(r.floor.is_empty(), "{r:?}");
            continue;
        }
        assert!(!r.floor.is_empty(), "{r:?}");
        for f in &r.floor {
            assert!(
                0.0 < f.best_seconds && f.best_seconds <= f.median_seconds,
                "{f:?}"
            );
        }
        let over = r.best_seconds / r.best_floor().unwrap().best_seconds;
        assert_eq!(r.over_floor(), Some(over));
        let twin = doc
            .results
            .iter()
            .find(|o| o.path == r.path && o.bytes == r.bytes && o.host_memory != r.host_memory);
        if let Some(twin) = twin {
            assert_eq!(twin.floor, r.floor);
        }
    }
    // The raw JSON has every field of the CUDA reference's results, nulls
    // included, and vkcopy's floor beside them.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["results"][0].as_object().unwrap().len(), 11);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("floor us") && stdout.contains("/floor"),
        "{stdout}"
    );
}

#[test]
fn bench_compare_prints_the_side_by_side_table() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = repo().join("runner/tests/fixtures");
    let against = dir.path().join("vkcopy.json");
    std::fs::copy(fixtures.join("vkcopy.json"), &against).unwrap();
    let out = suite()
        .args(["bench", "--compare"])
        .arg(fixtures.join("cuda.json"))
        .arg("--against")
        .arg(&against)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.contains(
            &"| path | host memory | size | vkcopy | CUDA | CUDA pageable | ratio | floor | /floor |"
        ),
        "{stdout}"
    );
    // The fixtures' best times: ratio = CUDA's time over vkcopy's.
    for row in [
        "| readback | aligned | 4 KiB | 0.10 GB/s | 0.23 GB/s | - | 0.45 | - | - |",
        "| readback | aligned | 1 MiB | 13.11 GB/s | 26.21 GB/s | 10.49 GB/s | 0.50 | - | - |",
        "| upload | aligned | 4 KiB | 0.14 GB/s | - | - | - | - | - |",
        "| upload | aligned | 1 MiB | 26.21 GB/s | 20.97 GB/s | 5.24 GB/s | 1.25 | - | - |",
        // The fastest family's floor, and vkcopy's time over it.
        "| device_to_device | device | 1 MiB | 52.43 GB/s | 104.86 GB/s | - | 0.50 | 10.0 us (family 3) | 2.00 |",
        "| round_trip | aligned | 4 KiB | 45.0 us | 30.0 us | - | 0.67 | - | - |",
    ] {
        assert!(lines.contains(&row), "missing {row}:\n{stdout}");
    }
    assert!(!stdout.contains("bidirectional"), "{stdout}");
    let svg = std::fs::read_to_string(dir.path().join("bench_vs_cuda.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
    for text in [
        "vkcopy",
        "CUDA pageable",
        "GB/s (1e9 bytes/s)",
        "microseconds per round trip",
    ] {
        assert!(svg.contains(text), "the chart lacks '{text}'");
    }
    // The ratios: a line per path, the sizes as ticks, parity and the target.
    let (_, texts) =
        xml_parts(&std::fs::read_to_string(dir.path().join("bench_vs_cuda_ratio.svg")).unwrap());
    for want in [
        "readback (aligned)",
        "device_to_device (device)",
        "4 KiB",
        "1 MiB",
        "1.0: as fast as CUDA",
        "target 0.9x",
        "0.9",
    ] {
        assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
    }
    for png in ["bench_vs_cuda.png", "bench_vs_cuda_ratio.png"] {
        assert!(stdout.contains(png), "{stdout}");
    }
    let bad = suite()
        .args(["bench", "--compare", "no/such/cuda.json", "--against"])
        .arg(&against)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no/such/cuda.json"));
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

/// `bench --overlap` measures both experiments and writes them as JSON.
#[test]
fn bench_overlap_writes_both_experiments() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("overlap.json");
    let run = suite()
        .args(["bench", "--overlap", "1MiB", "--repeat", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    if stderr.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        return;
    }
    assert!(run.status.success(), "{stdout}{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let what: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["what"].as_str().unwrap())
        .collect();
    assert_eq!(what, ["duplex", "copy_and_kernel"]);
    for r in v.as_array().unwrap() {
        assert_eq!(r["bytes"], 1 << 20);
        assert!(r["together_seconds"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["ratio"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(stdout.contains("duplex"), "{stdout}");
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

/// A run stops after --max-fails failing cases, and with
/// --stop-on-device-lost after a lost device: the cases not started are
/// skipped, saying why, and the run says it stopped.
#[test]
fn a_run_stops_early_after_its_failures_or_a_lost_device() {
    if !hook_built("a_run_stops_early_after_its_failures_or_a_lost_device") {
        return;
    }
    let dir = fleet_cases();
    let out = fleet_run(dir.path(), &["--max-fails", "1"])
        .env("VKCOPY_SUITE_TEST_HOOK", HOOKS)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if no_device(&stdout) {
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let got = fleet_results(dir.path());
    // Path order: `aborts` first, a crash, then nothing more runs.
    assert_eq!(got["aborts"].0, "crash", "{stdout}");
    for (name, (status, _, attempts, message)) in got.iter().filter(|(n, _)| *n != "aborts") {
        assert_eq!(status, "skip", "{name}: {message}");
        assert_eq!(*attempts, 1);
        assert_eq!(message, "not run: 1 failing cases, --max-fails 1", "{name}");
    }
    assert!(
        stdout.contains("stopped early: 1 failing cases, --max-fails 1"),
        "{stdout}"
    );

    let dir = fleet_cases();
    let out = fleet_run(dir.path(), &["--stop-on-device-lost"])
        .env("VKCOPY_SUITE_TEST_HOOK", "lose_device:loses_device")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let got = fleet_results(dir.path());
    if got["loses_device"].0 != "device_lost" {
        eprintln!("skipped: this build cannot lose a device (the feature fault-injection)");
        return;
    }
    assert_eq!(got["panics"].2, 1, "{stdout}");
    for name in ["panics", "passes", "skips"] {
        assert_eq!(
            got[name].3, "not run: the device was lost in loses_device",
            "{name}: {stdout}"
        );
    }
    assert_ne!(
        got["fails"].3,
        "not run: the device was lost in loses_device"
    );
}

/// Every status through the real binary, two workers at once, one re-run: a
/// panic and an abort are crashes and the run goes on in a new worker, a hang is
/// killed at the case's own limit, a full heap is a resource error, a failure
/// that passes on its re-run is a flake.
#[test]
fn every_status_through_the_real_runner() {
    if !hook_built("every_status_through_the_real_runner") {
        return;
    }
    let dir = fleet_cases();
    let out = fleet_run(dir.path(), &["--jobs", "2", "--retries", "1"])
        .env("VKCOPY_SUITE_TEST_HOOK", HOOKS)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if no_device(&stdout) {
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let got = fleet_results(dir.path());
    let brief: Vec<(&str, &str, &str, u64)> = got
        .iter()
        .map(|(n, (s, v, a, _))| (n.as_str(), s.as_str(), v.as_str(), *a))
        .collect();
    assert_eq!(
        brief,
        [
            ("aborts", "crash", "fail", 2),
            ("exhausts_memory", "resource_error", "fail", 2),
            ("fails", "fail", "fail", 2),
            ("flaky", "fail", "flake", 2),
            ("hangs", "timeout", "fail", 2),
            ("loses_device", "pass", "pass", 1),
            ("panics", "crash", "fail", 2),
            ("passes", "pass", "pass", 1),
            ("skips", "skip", "skip", 1),
        ],
        "{stdout}"
    );
    let message = |n: &str| got[n].3.clone();
    assert!(
        message("panics").contains("exited with code 101 (a panic)"),
        "{}",
        message("panics")
    );
    assert!(
        message("panics").contains("a panic in panics"),
        "{}",
        message("panics")
    );
    assert!(
        message("aborts").contains("signal 6 (SIGABRT)"),
        "{}",
        message("aborts")
    );
    assert!(
        message("hangs").contains("killed after 3.0 s"),
        "{}",
        message("hangs")
    );
    assert!(
        message("exhausts_memory").contains("device_malloc_failed"),
        "{}",
        message("exhausts_memory")
    );
    assert!(
        message("flaky").contains("then passed on attempt 2"),
        "{}",
        message("flaky")
    );
    assert!(stdout.contains("FAIL  panics (crash)"), "{stdout}");
    assert!(
        stdout.contains("2 passed, 5 failed, 1 skipped, 1 flaky"),
        "{stdout}"
    );
}

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

/// The shards 1/3, 2/3 and 3/3 together run every case exactly once, but for
/// the `every_shard` case (`passes`), which each of them runs; adding a case
/// moves no other between shards; `--fraction` samples; tags select.
#[test]
fn shards_partition_the_suite_and_tags_select() {
    let dir = fleet_cases();
    let names = |args: &[&str]| {
        let out = fleet_run(dir.path(), args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.code().is_some_and(|c| c <= 1), "{stdout}");
        (
            fleet_results(dir.path()).into_keys().collect::<Vec<_>>(),
            stdout,
        )
    };
    let (all, stdout) = names(&[]);
    if no_device(&stdout) {
        return;
    }
    assert_eq!(all.len(), 9, "{stdout}");
    let shards = |n: usize| -> Vec<Vec<String>> {
        (1..=n)
            .map(|k| names(&["--shard", &format!("{k}/{n}")]).0)
            .collect()
    };
    let three = shards(3);
    let mut union = Vec::new();
    for shard in &three {
        assert!(shard.iter().any(|c| c == "passes"), "{shard:?}");
        union.extend(shard.iter().filter(|c| *c != "passes").cloned());
    }
    union.push("passes".into());
    union.sort();
    assert_eq!(union, all, "{three:?}");
    // A new case lands in one shard and moves none of the others.
    std::fs::write(
        dir.path().join("cases/added_later.yaml"),
        std::fs::read_to_string(dir.path().join("cases/skips.yaml")).unwrap(),
    )
    .unwrap();
    let after = shards(3);
    for (before, after) in three.iter().zip(&after) {
        let kept: Vec<&String> = after.iter().filter(|c| *c != "added_later").collect();
        assert_eq!(
            kept,
            before.iter().collect::<Vec<_>>(),
            "{three:?} then {after:?}"
        );
    }
    assert_eq!(
        after
            .iter()
            .flatten()
            .filter(|c| *c == "added_later")
            .count(),
        1
    );
    std::fs::remove_file(dir.path().join("cases/added_later.yaml")).unwrap();
    // One in 1 is all; one in 1000 is the every_shard case alone.
    assert_eq!(names(&["--fraction", "1"]).0, all);
    assert_eq!(names(&["--fraction", "1000"]).0, ["passes"]);
    assert_eq!(names(&["--tags", "smoke"]).0, ["passes"]);
    assert_eq!(names(&["--tags", "fast,smoke"]).0, ["fails", "passes"]);
    let out = fleet_run(dir.path(), &["--shard", "4/3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shard '4/3': expected K/N"));
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

/// Through the runtime's fault hook every vkQueueSubmit of one case returns
/// VK_ERROR_DEVICE_LOST: that case is `device_lost`, and the cases after it pass
/// on a fresh device in a new worker.
#[cfg(feature = "fault-injection")]
#[test]
fn a_lost_device_is_device_lost_and_the_next_case_gets_a_fresh_one() {
    if !hook_built("a_lost_device_is_device_lost_and_the_next_case_gets_a_fresh_one") {
        return;
    }
    let dir = fleet_cases();
    let out = fleet_run(dir.path(), &[])
        .env("VKCOPY_SUITE_TEST_HOOK", "lose_device:loses_device")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if no_device(&stdout) {
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let got = fleet_results(dir.path());
    let (status, verdict, _, message) = &got["loses_device"];
    assert_eq!(
        (status.as_str(), verdict.as_str()),
        ("device_lost", "fail"),
        "{stdout}"
    );
    assert!(message.contains("device_lost"), "{message}");
    for later in ["panics", "passes"] {
        assert_eq!(got[later].0, "pass", "{later}: {stdout}");
    }
}

#[test]
fn devices_prints_one_yaml_document_per_device() {
    let out = suite().arg("devices").output().unwrap();
    if !out.status.success() {
        return; // no Vulkan driver here
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<&str> = text
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .collect();
    assert!(!docs.is_empty(), "{text}");
    assert!(text.starts_with("---\n"), "{text}");
    for doc in docs {
        let table = vkcopy::MemoryTable::from_yaml_str(doc, "devices").unwrap();
        assert!(!table.types.is_empty(), "{doc}");
    }
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

/// A run killed in the middle (its worker hung on `passes`, the runner and its
/// workers killed) resumes with `run --resume DIR` to the report an
/// uninterrupted run gives: the same cases, statuses, verdicts and attempts,
/// the cases done before the kill not run again.
#[test]
fn a_killed_run_resumes_to_the_same_report() {
    use std::os::unix::process::CommandExt;
    if !hook_built("a_killed_run_resumes_to_the_same_report") {
        return;
    }
    let dir = fleet_cases();
    let out = fleet_run(dir.path(), &[]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if no_device(&stdout) {
        return;
    }
    let whole = fleet_results(dir.path());
    std::fs::remove_dir_all(dir.path().join("out")).unwrap();
    let mut child = fleet_run(dir.path(), &["--timeout", "300"])
        .env("VKCOPY_SUITE_TEST_HOOK", "hang:passes")
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let before: Vec<&String> = whole.keys().take_while(|n| *n != "passes").collect();
    let clock = std::time::Instant::now();
    while journal_names(&dir.path().join("out")).len() < before.len() {
        assert!(
            clock.elapsed() < std::time::Duration::from_secs(240),
            "the journal never reached {before:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The runner is in `passes`, hung: kill the runner alone, as a
    // scheduler does; its worker must go with it, not hold the device.
    let group = child.id() as i32;
    child.kill().unwrap();
    child.wait().unwrap();
    let clock = std::time::Instant::now();
    while !live_in_group(group).is_empty() && clock.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left = live_in_group(group);
    // SAFETY: kill(2) on the process group this test made; no memory is shared.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    assert!(left.is_empty(), "workers outlived their runner: {left:?}");
    let done = journal_names(&dir.path().join("out"));
    assert_eq!(done.iter().collect::<Vec<_>>(), before);
    let folder = only_report(&dir.path().join("out"));
    assert!(!folder.join("results.json").exists());
    let out = suite()
        .arg("run")
        .arg("--resume")
        .arg(&folder)
        .env_remove("VKCOPY_SUITE_TEST_HOOK")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("{} cases done, 2 to run", before.len())),
        "{stdout}"
    );
    assert_eq!(fleet_results(dir.path()), whole, "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(json["resumed"], before.len());
    let summary = std::fs::read_to_string(folder.join("summary.md")).unwrap();
    let said = format!(
        "Resumed with `run --resume`: {} of the {} cases were run before the interruption.",
        before.len(),
        whole.len()
    );
    assert!(summary.contains(&said), "{summary}");
    // The journal has each case once: the resumed run ran only the rest.
    let mut names = journal_names(&dir.path().join("out"));
    names.sort();
    assert_eq!(names, whole.keys().cloned().collect::<Vec<_>>());
    // A finished run is not resumed again, and --resume takes no other option.
    let again = suite()
        .arg("run")
        .arg("--resume")
        .arg(&folder)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("the run is complete"));
    let mixed = suite()
        .args(["run", "--jobs", "2", "--resume"])
        .arg(&folder)
        .output()
        .unwrap();
    assert_eq!(mixed.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("--resume takes no other option"));
}

/// Perf cases run alone, after the others, whatever `--jobs` says: in the
/// journal, every other case ends before the first of them. A case is one by
/// its tag, or by a `measure` step without the tag.
#[test]
fn perf_cases_run_alone_after_the_others() {
    let dir = fleet_cases();
    let passes = std::fs::read_to_string(dir.path().join("cases/passes.yaml")).unwrap();
    // Named to come first in path order, so that only the perf group puts them last.
    let tagged = passes
        .replace("tags: [fast, smoke]", "tags: [perf]")
        .replace("every_shard: true\n", "");
    let measuring = passes
        .replace("tags: [fast, smoke]\n", "")
        .replace("every_shard: true\n", "")
        + "  - measure: { copy_to_host: g, repeat: 1 }\n";
    for (name, text) in [("a_perf_1", tagged), ("a_perf_2", measuring)] {
        std::fs::write(dir.path().join(format!("cases/{name}.yaml")), text).unwrap();
    }
    let out = fleet_run(dir.path(), &["--jobs", "3", "--filter", "*a*"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if no_device(&stdout) {
        return;
    }
    let order = journal_names(&dir.path().join("out"));
    assert!(order.len() > 4, "{order:?}\n{stdout}");
    let tail: Vec<&str> = order[order.len() - 2..]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(tail, ["a_perf_1", "a_perf_2"], "{order:?}");
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

/// The suite built once and run from its archive where there is no Rust: a
/// PATH of /usr/bin:/bin alone, a working folder outside the repository, the
/// cases and expectations the archive carries.
#[test]
fn an_archive_runs_the_suite_where_there_is_no_rust() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vks.tar.zst");
    let out = suite().arg("archive").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with(&format!("wrote {}", file.display())),
        "{stdout}"
    );
    let m = vkcopy_fleet::archive::read_manifest(&file).unwrap();
    let has = |p: &str| m.files.iter().any(|f| f.path == p);
    for p in [
        vkcopy_fleet::archive::BINARY,
        "cases/basic/copy_to_host_48mb.yaml",
        "cases/devices/lavapipe.yaml",
        "cases/case.schema.json",
        "reports/expectations/all.yaml",
        "reports/expectations/driver/mesa-llvmpipe.yaml",
        "reports/results.schema.json",
    ] {
        assert!(has(p), "{p} not in {:?}", m.files);
    }
    let cases = vkcopy_engine::discover::case_files(&repo().join("cases")).unwrap();
    let carried = m
        .files
        .iter()
        .filter(|f| f.path.starts_with("cases/") && f.path.ends_with(".yaml"));
    assert!(carried.count() >= cases.len());
    assert_eq!(
        m.profile.as_deref(),
        Some(if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        })
    );

    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let run = || {
        let mut cmd = suite();
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("CARGO") || k.starts_with("RUST") || k.starts_with("VKCOPY_CASES") {
                cmd.env_remove(&*k);
            }
        }
        let out = cmd
            .current_dir(&work)
            .env("PATH", "/usr/bin:/bin")
            .args([
                "run",
                "--archive",
                "../vks.tar.zst",
                "--filter",
                "basic::copy_to_host_48mb*",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            out.status.code(),
            text + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, stdout) = run();
    if no_device(&stdout) {
        return;
    }
    assert_eq!(code, Some(0), "{stdout}");
    let unpacked = dir.path().canonicalize().unwrap().join("vks");
    assert!(
        stdout.contains(&format!("in {}", unpacked.display())),
        "{stdout}"
    );
    let layers = unpacked.join("reports/expectations");
    assert!(
        stdout.contains(&format!("expectation layers in {}", layers.display())),
        "{stdout}"
    );
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
    assert!(latest_report(&work.join("reports/out"))
        .join("results.json")
        .is_file());
    // Again: the unpacked folder is kept, and a case added there runs.
    std::fs::copy(
        unpacked.join("cases/basic/copy_to_host_48mb.yaml"),
        unpacked.join("cases/basic/copy_to_host_48mb_again.yaml"),
    )
    .unwrap();
    let (code, stdout) = run();
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
    // `new` there hints with the archived binary, not cargo.
    let bin = unpacked.join(vkcopy_fleet::archive::BINARY);
    let out = Command::new(&bin)
        .current_dir(&work)
        .args(["new", "basic/hint_probe"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("check it: {} check ", bin.display())),
        "{stdout}"
    );
    assert!(unpacked.join("cases/basic/hint_probe.yaml").is_file());
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
