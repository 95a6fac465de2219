//! The suite across machines: shards and the archive.

use std::process::Command;

use super::*;

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
