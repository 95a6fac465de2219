//! `bench` and `plot`.

use super::*;

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
