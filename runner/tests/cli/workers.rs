//! Cases in worker processes: every status, early stops, a lost device, a killed run resumed, perf cases alone.

use super::*;

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
