//! `vkcopy-suite diff` and `merge` on the committed baselines (reports of
//! version 1) and on edited copies of them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn suite() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"))
}

fn baseline(file: &str) -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../reports/baselines/nvidia-h200"
    ))
    .join(file)
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn case<'a>(report: &'a mut Value, name: &str) -> &'a mut Value {
    report["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[test]
fn a_baseline_against_itself_has_no_change() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("diff.json");
    // A folder stands for the latest report below it, on both sides.
    let out = suite()
        .arg("diff")
        .arg(baseline(""))
        .arg(baseline(""))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("**0 regressions, 0 fixes, 0 other changes, 0 new, 0 missing; 0 slower and 0 faster copies (beyond 10 %)**"),
        "{stdout}"
    );
    let d = read(&json);
    assert_eq!(d["regressions"].as_array().unwrap().len(), 0);
    assert_eq!(d["threshold"], 0.1);
}

#[test]
fn diff_finds_regressions_fixes_new_missing_and_speed() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = read(&baseline("results.json"));
    // A: one case failing, to be fixed in B.
    case(&mut a, "basic::errors")["status"] = "fail".into();
    let a_path = dir.path().join("a.json");
    std::fs::write(&a_path, a.to_string()).unwrap();

    let mut b = read(&baseline("results.json"));
    let lat = case(&mut b, "basic::dirty_bits");
    lat["status"] = "fail".into();
    lat["message"] = "cases/basic/dirty_bits.yaml:12: check_eq: g[3] = 1, expected 2".into();
    // Half the speed of one copy, 5 % less of another (noise).
    let m = &mut case(&mut b, "perf::readback_64mib")["measurements"][0];
    m["gbps"] = (m["gbps"].as_f64().unwrap() / 2.0).into();
    let m = &mut case(&mut b, "perf::upload_64mib")["measurements"][0];
    m["gbps"] = (m["gbps"].as_f64().unwrap() * 0.95).into();
    let cases = b["cases"].as_array_mut().unwrap();
    cases.retain(|c| c["name"] != "basic::host_add");
    let mut extra = cases[0].clone();
    extra["name"] = "basic::brand_new".into();
    cases.push(extra);
    // B in the current schema, with verdicts apart from statuses.
    b["schema_version"] = 2.into();
    for c in b["cases"].as_array_mut().unwrap() {
        let status = c["status"].clone();
        c["verdict"] = status;
    }
    let b_dir = dir.path().join("b/nvidia-h200/20261201T000000Z");
    std::fs::create_dir_all(&b_dir).unwrap();
    std::fs::write(b_dir.join("results.json"), b.to_string()).unwrap();

    let json = dir.path().join("diff.json");
    let out = suite()
        .arg("diff")
        .arg(&a_path)
        .arg(dir.path().join("b"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let d = read(&json);
    let names = |key: &str| -> Vec<String> {
        d[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                c["name"]
                    .as_str()
                    .or(c["case"].as_str())
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(names("regressions"), ["basic::dirty_bits"]);
    assert_eq!(d["regressions"][0]["was"], "pass");
    assert_eq!(d["regressions"][0]["now"], "fail");
    assert_eq!(
        d["regressions"][0]["message"],
        "cases/basic/dirty_bits.yaml:12: check_eq: g[3] = 1, expected 2"
    );
    assert_eq!(names("fixes"), ["basic::errors"]);
    assert_eq!(names("new"), ["basic::brand_new"]);
    assert_eq!(names("missing"), ["basic::host_add"]);
    assert_eq!(names("slower"), ["perf::readback_64mib"]);
    assert_eq!(d["slower"][0]["ratio"], 0.5);
    assert_eq!(names("faster"), Vec::<String>::new());
    assert!(
        stdout.contains("| basic::dirty_bits | pass | fail |"),
        "{stdout}"
    );

    // Slower copies fail the diff only when asked to.
    let mut only_slower = b.clone();
    case(&mut only_slower, "basic::dirty_bits")["verdict"] = "pass".into();
    std::fs::write(b_dir.join("results.json"), only_slower.to_string()).unwrap();
    let run = |extra: &[&str]| {
        suite()
            .arg("diff")
            .arg(baseline("results.json"))
            .arg(dir.path().join("b"))
            .args(extra)
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(run(&[]), Some(0));
    assert_eq!(run(&["--fail-on-slower"]), Some(1));
    assert_eq!(run(&["--fail-on-slower", "--threshold", "1.5"]), Some(0));
}

#[test]
fn diff_says_what_is_wrong_with_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("results.json");
    std::fs::write(&bad, "{\"cases\": [{\"status\": \"pass\"}]}").unwrap();
    for (b, want) in [
        (
            dir.path().join("none.json"),
            "none.json: no such file or folder".to_owned(),
        ),
        (
            bad.clone(),
            format!("{}: a case without a name", bad.display()),
        ),
    ] {
        let out = suite()
            .arg("diff")
            .arg(baseline("results.json"))
            .arg(&b)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&want), "{stderr}");
    }
}

#[test]
fn merge_makes_one_table_of_policies_and_shards() {
    let dir = tempfile::tempdir().unwrap();
    // The vkcopy-policy baseline split in two shards, and the halide-legacy run.
    let full = read(&baseline("results.json"));
    for (i, part) in full["cases"].as_array().unwrap().chunks(60).enumerate() {
        let mut shard = full.clone();
        shard["cases"] = Value::Array(part.to_vec());
        let d = dir.path().join(format!("fleet/shard-{i}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("results.json"), shard.to_string()).unwrap();
    }
    let out_dir = dir.path().join("merged");
    let out = suite()
        .arg("merge")
        .arg(dir.path().join("fleet"))
        .arg(baseline("results-halide-legacy.json"))
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "merged 2 configurations, 110 cases into {}",
            out_dir.display()
        )
    );
    let m = read(&out_dir.join("merged.json"));
    let labels: Vec<&str> = m["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["nvidia-h200", "nvidia-h200-halide-legacy"]);
    assert_eq!(m["columns"][0]["files"].as_array().unwrap().len(), 2);
    assert_eq!(m["columns"][0]["verdicts"]["pass"], 110);
    assert_eq!(m["columns"][1]["verdicts"]["pass"], 101);
    assert_eq!(m["columns"][1]["verdicts"]["expected_fail"], 9);
    let row = m["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "regressions::seed_readback::h200")
        .unwrap();
    assert_eq!(
        row["verdicts"],
        serde_json::json!(["pass", "expected_fail"])
    );
    let md = std::fs::read_to_string(out_dir.join("merged.md")).unwrap();
    assert!(
        md.contains("| | nvidia-h200 | nvidia-h200-halide-legacy |"),
        "{md}"
    );
    assert!(
        md.contains("| counts | 110 pass | 9 expected_fail, 101 pass |"),
        "{md}"
    );
    assert!(
        md.contains("| regressions::seed_readback::h200 | pass | expected_fail |"),
        "{md}"
    );
}
