//! Writing a case as a user does: `new`, `check`, `explain`, then a run, all
//! through the `vkcopy-suite` binary. `check` needs no device, so a broken case
//! of `cases/` fails here even where there is none.

use std::path::Path;
use std::process::{Command, Output};

use vkcopy_engine::discover::{case_files, cases_root};

fn suite() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn check(paths: &[&Path]) -> Output {
    suite().arg("check").args(paths).output().unwrap()
}

/// A cases folder with the recorded tables of the real one.
fn temp_cases() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let devices = dir.path().join("devices");
    std::fs::create_dir(&devices).unwrap();
    for name in ["lavapipe.yaml", "nvidia-h200.yaml"] {
        std::fs::copy(cases_root().join("devices").join(name), devices.join(name)).unwrap();
    }
    dir
}

#[test]
fn every_case_table_and_expectation_file_checks_without_a_device() {
    let out = check(&[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let cases = case_files(&cases_root()).unwrap().len();
    let count = |dir: &str| std::fs::read_dir(cases_root().join(dir)).unwrap().count();
    // Expectation files: all.yaml, policy-*, runtime-* and the layer folders' files.
    let layered: usize = ["driver", "model", "device"]
        .iter()
        .filter_map(|d| {
            std::fs::read_dir(cases_root().join("../reports/expectations").join(d)).ok()
        })
        .map(|d| d.count())
        .sum();
    let top = std::fs::read_dir(cases_root().join("../reports/expectations"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_file())
        .count();
    let (tables, expectations) = (count("devices"), top + layered);
    assert!(cases >= 100 && tables >= 19 && expectations >= 3);
    assert_eq!(
        stdout.trim(),
        format!(
            "checked {cases} cases, {tables} tables, {expectations} expectation files: 0 errors"
        )
    );
}

#[test]
fn check_reports_every_broken_file_located() {
    let dir = temp_cases();
    let basic = dir.path().join("basic");
    std::fs::create_dir(&basic).unwrap();
    let good = "about: a\nbuffers:\n  g: { type: i32, extent: [8] }\nsteps:\n";
    std::fs::write(
        basic.join("unknown_buffer.yaml"),
        format!("{good}  - copy_to_device: g\n  - fill_host: {{ buffer: h, value: \"x\" }}\n"),
    )
    .unwrap();
    std::fs::write(
        basic.join("bad_value.yaml"),
        format!("{good}  - fill_host: {{ buffer: g, value: \"x +\" }}\n"),
    )
    .unwrap();
    std::fs::write(
        basic.join("fine.yaml"),
        format!("{good}  - copy_to_device: g\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("devices/broken.yaml"),
        "name: x\ndevice_type: cpu\n",
    )
    .unwrap();
    let out = check(&[dir.path()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    let at = |f: &str| basic.join(f).display().to_string();
    assert!(
        lines[0].starts_with(&format!(
            "{}:5:5: fill_host: field value: 'x +'",
            at("bad_value.yaml")
        )),
        "{stderr}"
    );
    assert_eq!(
        lines[1],
        format!(
            "{}:6:5: fill_host: unknown buffer 'h'; buffers are [\"g\"]",
            at("unknown_buffer.yaml")
        )
    );
    assert!(lines[2].contains("broken.yaml"), "{stderr}");
    assert_eq!(
        text(&out.stdout).trim(),
        "checked 3 cases, 3 tables, 0 expectation files: 3 errors"
    );
}

/// One `check` finds every error of a file, and what `run` would refuse.
#[test]
fn check_reports_every_error_of_a_file_in_one_pass() {
    let dir = temp_cases();
    let case = dir.path().join("two.yaml");
    std::fs::write(
        &case,
        "about: a\nbuffers:\n  g: { type: i32, extent: [8] }\nsteps:\n\
         \x20 - fill_devcie: { buffer: g, value: \"x\" }\n\
         \x20 - crop: { from: g, to: c, min: [2], extent: [7] }\n\
         \x20 - expect: { buffer: g, value: \"0\", min: [-4], extent: [4] }\n",
    )
    .unwrap();
    let out = check(&[&case]);
    assert_eq!(out.status.code(), Some(1));
    let at = case.display();
    assert_eq!(
        text(&out.stderr).lines().collect::<Vec<_>>(),
        [
            format!("{at}:5:5: unknown step 'fill_devcie'; did you mean fill_device?"),
            format!("{at}:6:5: crop: field extent: dimension 0 of the crop, [2, 9), is outside g's [0, 8)"),
            format!("{at}:7:5: expect: the box [-4, 0) does not meet g's [0, 8) in a dimension"),
        ]
    );
    assert_eq!(
        text(&out.stdout).trim(),
        "checked 1 case, 0 tables, 0 expectation files: 3 errors"
    );
}

#[test]
fn check_of_a_missing_path_fails() {
    let out = check(&[Path::new("/nonexistent/cases")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/cases: no such file or folder"));
}

#[test]
fn new_writes_a_case_that_checks_and_runs() {
    let dir = temp_cases();
    let new = |extra: &[&str]| {
        suite()
            .args(["new", "basic/my_case", "--cases"])
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let out = new(&["--mirrors", "test/correctness/device_buffer_copy.cpp"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = dir.path().join("basic/my_case.yaml");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("mirrors: test/correctness/device_buffer_copy.cpp"));
    assert!(written.starts_with("# yaml-language-server: $schema="));

    let again = new(&[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("exists; not overwriting it"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);

    let out = check(&[&file]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        "checked 1 case, 0 tables, 0 expectation files: 0 errors"
    );

    let reports = tempfile::tempdir().unwrap();
    let out = suite()
        .args(["run", "--filter", "basic::my_case", "--cases"])
        .arg(dir.path())
        .arg("--report-dir")
        .arg(reports.path())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    if stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        eprintln!("no Vulkan device: the new case is checked but not run");
        return;
    }
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("pass  basic::my_case"), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[test]
fn explain_shows_sizes_copies_and_memory_types() {
    let out = suite()
        .args(["explain", "basic::round_trip_2d", "--table", "nvidia-h200"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for want in [
        "case basic::round_trip_2d",
        "policy: vkcopy (the default)",
        "table: NVIDIA H200 (--table nvidia-h200)",
        "  readback      type 3: HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1)",
        "  g: i32 128x128 (min 0,0 stride 1,128), 65536 bytes; host memory of vkcopy, page-aligned",
        "copy_to_device (if host-dirty) g: 65536 bytes in 1 contiguous run(s)",
        "steps (8):",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
    let legacy = suite()
        .args(["explain", "basic::round_trip_2d", "--table", "nvidia-h200"])
        .args(["--policy", "halide-legacy"])
        .output()
        .unwrap();
    let legacy = text(&legacy.stdout);
    assert!(
        legacy.contains("  readback      type 4: DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT (heap 0)"),
        "{legacy}"
    );
}

/// The schema a case written by `new` points at, resolved from its folder.
fn schema_of(case: &Path) -> std::path::PathBuf {
    let written = std::fs::read_to_string(case).unwrap();
    let first = written.lines().next().unwrap();
    let rel = first
        .strip_prefix("# yaml-language-server: $schema=")
        .unwrap_or_else(|| panic!("no schema line: {first}"));
    case.parent().unwrap().join(rel).canonicalize().unwrap()
}

#[test]
fn new_points_at_the_schema_the_cases_folder_has() {
    // A folder without a schema: the repository's, by a path that resolves.
    let dir = temp_cases();
    let out = suite()
        .args(["new", "basic/deep/x", "--cases"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let own = cases_root()
        .join("case.schema.json")
        .canonicalize()
        .unwrap();
    assert_eq!(schema_of(&dir.path().join("basic/deep/x.yaml")), own);

    // A folder with its own schema: that one, two folders up.
    std::fs::copy(&own, dir.path().join("case.schema.json")).unwrap();
    let out = suite()
        .args(["new", "basic/deep/y", "--cases"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let case = dir.path().join("basic/deep/y.yaml");
    assert!(std::fs::read_to_string(&case)
        .unwrap()
        .starts_with("# yaml-language-server: $schema=../../case.schema.json\n"));
    assert_eq!(
        schema_of(&case),
        dir.path().join("case.schema.json").canonicalize().unwrap()
    );
}

#[test]
fn every_cases_option_has_help() {
    for command in ["run", "list", "new", "explain", "schema"] {
        let out = suite().args([command, "--help"]).output().unwrap();
        let help = text(&out.stdout);
        assert!(
            help.contains("--cases <DIR>")
                && help.contains(
                    "The cases folder; default: VKCOPY_CASES, else this repository's cases/"
                ),
            "{command}:\n{help}"
        );
    }
}

#[test]
fn explain_with_another_cases_folder_names_the_folder_searched() {
    let dir = tempfile::tempdir().unwrap();
    let basic = dir.path().join("basic");
    std::fs::create_dir(&basic).unwrap();
    std::fs::copy(
        cases_root().join("basic/round_trip_2d.yaml"),
        basic.join("x.yaml"),
    )
    .unwrap();
    let explain = |table: &Path| {
        suite()
            .args(["explain", "basic::x", "--cases"])
            .arg(dir.path())
            .arg("--table")
            .arg(table)
            .output()
            .unwrap()
    };
    let devices = dir.path().join("devices");
    let out = explain(Path::new("lavapipe"));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        format!(
            "error: --table: no recorded table 'lavapipe' in {}/; the folder does not exist; \
             give the name of a table there or a path to a table file",
            devices.display()
        )
    );

    std::fs::create_dir(&devices).unwrap();
    std::fs::copy(
        cases_root().join("devices/swiftshader.yaml"),
        devices.join("swiftshader.yaml"),
    )
    .unwrap();
    let out = explain(Path::new("lavapipe"));
    assert!(
        text(&out.stderr).contains("; the tables are swiftshader; "),
        "{}",
        text(&out.stderr)
    );

    // A path to a table file is taken as it is.
    let table = cases_root().join("devices/lavapipe.yaml");
    let out = explain(&table);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.starts_with("case basic::x ("), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "table: llvmpipe (lavapipe) (--table {})",
            table.display()
        )),
        "{stdout}"
    );
}

#[test]
fn explain_names_a_case_as_run_does() {
    // A path relative to the working folder is below the cases folder too.
    for (dir, case) in [
        ("..", "cases/basic/round_trip_2d.yaml"),
        ("../cases/basic", "round_trip_2d.yaml"),
    ] {
        let out = suite()
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir))
            .args(["explain", case, "--table", "lavapipe"])
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            stdout.starts_with(&format!("case basic::round_trip_2d ({case})")),
            "{stdout}"
        );
    }
}

#[test]
fn explain_says_which_bytes_of_a_crop_it_counts() {
    let out = suite()
        .args([
            "explain",
            "basic::crop_write_parent_read",
            "--table",
            "lavapipe",
        ])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "crop of g makes c: u8 64x32 (min 32,16 stride 1,128), 2048 bytes of elements \
             in a span of 4032 bytes, starting 2080 bytes into g"
        ),
        "{stdout}"
    );
}

#[test]
fn explain_of_an_unknown_table_says_so() {
    let out = suite()
        .args(["explain", "basic::round_trip_2d", "--table", "no-such-gpu"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--table: no recorded table 'no-such-gpu'"));
}

#[test]
fn schema_command_prints_the_committed_schema() {
    let out = suite().arg("schema").output().unwrap();
    assert!(out.status.success());
    let committed = std::fs::read_to_string(cases_root().join("case.schema.json")).unwrap();
    assert!(
        text(&out.stdout) == committed,
        "cases/case.schema.json is stale"
    );
}

#[test]
fn check_reports_yml_files_and_oversized_cases() {
    let dir = temp_cases();
    std::fs::write(dir.path().join("forgotten.yml"), "about: a\n").unwrap();
    let big = format!(
        "about: a\n#{}\nsteps: [release_unused]\n",
        "x".repeat(1 << 20)
    );
    std::fs::write(dir.path().join("big.yaml"), big).unwrap();
    let out = check(&[dir.path()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(
        lines[0],
        format!(
            "{}: the suite reads only *.yaml files; rename it to .yaml",
            dir.path().join("forgotten.yml").display()
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "{}:0:0: 1048611 bytes; a case or table file is at most 1048576",
            dir.path().join("big.yaml").display()
        )
    );
}
