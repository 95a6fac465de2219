//! Malformed case files and the first line of the error each must give: every
//! file in `bad_cases/` starts with `# error: LINE:COL: message`, and loading
//! it (as `vkcopy-suite check` does, without Vulkan) must fail with exactly
//! `PATH:LINE:COL: message`, located in the file.

use std::path::Path;

use vkcopy_engine::discover::cases_root;
use vkcopy_engine::plan;

#[test]
fn every_bad_case_fails_with_its_located_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad_cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 100, "{} bad cases", files.len());
    let mut wrong = Vec::new();
    for path in &files {
        let src = std::fs::read_to_string(path).unwrap();
        let expected = src
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# error: "))
            .unwrap_or_else(|| panic!("{}: no `# error:` first line", path.display()));
        match plan::load(&cases_root(), path) {
            Ok(_) => wrong.push(format!("{}: loaded without an error", path.display())),
            Err(e) => {
                if e.line == 0 || e.column == 0 {
                    wrong.push(format!("{e}: not located"));
                }
                let got = e.to_string();
                let want = format!("{}:{expected}", path.display());
                if got != want {
                    wrong.push(format!("got  {got}\nwant {want}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

const HEAD: &str = "about: a\nbuffers:\n  g: { type: i32, extent: [8, 8] }\nsteps:\n";

/// An unknown step after a step of each family (and inside the control steps)
/// is reported at its own line and column, with its own name and a hint.
#[test]
fn an_unknown_step_after_each_kind_of_step_names_itself() {
    let before = [
        ("memory", "  - device_malloc: g\n"),
        ("copies", "  - copy_to_device: g\n"),
        ("async copies", "  - start_copy_to_device: g\n  - wait: g\n"),
        (
            "views",
            "  - crop: { from: g, to: c, min: [0, 0], extent: [4, 4] }\n",
        ),
        (
            "compute",
            "  - fill_host: { buffer: g, value: \"x + y\" }\n",
        ),
        ("checks", "  - expect: { buffer: g, value: \"0\" }\n"),
        (
            "expect_memory",
            "  - expect_memory: { role: readback, type: 0 }\n",
        ),
        ("measure", "  - measure: { copy_to_host: g, repeat: 2 }\n"),
        (
            "control",
            "  - when: { cond: \"1 > 0\", steps: [ { copy_to_host: g } ] }\n",
        ),
        (
            "expect_error",
            "  - expect_error: { error: no_device_allocation, step: { copy_to_host: g } }\n",
        ),
        ("a unit step", "  - release_unused\n"),
    ];
    let path = Path::new("unknown_after.yaml");
    let mut wrong = Vec::new();
    for (family, step) in before {
        let src = format!("{HEAD}{step}  - fill_devcie: {{ buffer: g, value: \"1\" }}\n");
        let line = src.lines().count();
        let want = format!(
            "unknown_after.yaml:{line}:5: unknown step 'fill_devcie'; did you mean fill_device?"
        );
        match plan::parse(&cases_root(), path, &src) {
            Ok(_) => wrong.push(format!("after {family}: loaded")),
            Err(e) if e.to_string() != want => wrong.push(format!("after {family}: got {e}")),
            Err(_) => {}
        }
    }
    // Inside the steps of a repeat, and as the step of an expect_error.
    let nested = [
        (
            "  - repeat:\n      from: 0\n      to: 2\n      steps:\n        - copy_to_device: g\n        - launch: g\n",
            "unknown_after.yaml:10:11: unknown step 'launch'; cases/README.md lists the steps",
        ),
        (
            "  - expect_error: { error: no_device_allocation, step: { copy_to_hots: g } }\n",
            "unknown_after.yaml:5:56: unknown step 'copy_to_hots'; did you mean copy_to_host?",
        ),
    ];
    for (steps, want) in nested {
        match plan::parse(&cases_root(), path, &format!("{HEAD}{steps}")) {
            Ok(_) => wrong.push(format!("{steps}: loaded")),
            Err(e) if e.to_string() != want => wrong.push(format!("{steps}: got {e}")),
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A file without `about:` is reported with its steps' errors, and an old
/// step spelling is pointed at its new name.
#[test]
fn a_missing_field_and_an_old_spelling_are_reported_with_the_rest() {
    let src = "buffers:\n  g: { type: i32, extent: [16] }\nsteps:\n  - kernel: { fill: g, value: \"1\" }\n  - copy_to_devcie: g\n  - release_crop: g\n";
    let Err(errors) = plan::parse_all(&cases_root(), Path::new("old.yaml"), src) else {
        panic!("loaded without an error");
    };
    let got: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert_eq!(
        got[0],
        "old.yaml:1:1: field about: missing; it is required here"
    );
    assert!(
        got[1].starts_with("old.yaml:4:5: unknown step 'kernel', an old spelling; did you mean fill_device, add_device or map_device (`kernel: { fill: b, value: \"...\" }` is now `fill_device: { buffer: b, value: \"...\" }`"),
        "{}",
        got[1]
    );
    assert_eq!(
        got[2],
        "old.yaml:5:5: unknown step 'copy_to_devcie'; did you mean copy_to_device?"
    );
    assert_eq!(
        got[3],
        "old.yaml:6:5: unknown step 'release_crop', an old spelling; did you mean release (it releases crops, slices and views too)?"
    );
}

/// Planning goes on past a failed step: every error of a file in one pass, in
/// file order, without the errors that only follow from an earlier one.
#[test]
fn every_error_of_a_file_in_one_pass() {
    let src = format!(
        "{HEAD}  - fill_devcie: {{ buffer: g, value: \"1\" }}\n\
         \x20 - crop: {{ from: g, to: c, min: [0, 0], extent: [9, 4] }}\n\
         \x20 - expect: {{ buffer: c, value: \"0\" }}\n\
         \x20 - expect: {{ buffer: g, value: \"0\", min: [0, 8], extent: [1, 1] }}\n\
         \x20 - copy_to_host: nope\n"
    );
    let errors = plan::parse_all(&cases_root(), Path::new("two.yaml"), &src).unwrap_err();
    let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "two.yaml:5:5: unknown step 'fill_devcie'; did you mean fill_device?",
            "two.yaml:6:5: crop: field extent: dimension 0 of the crop, [0, 9), is outside g's [0, 8)",
            "two.yaml:8:5: expect: the box [8, 9) does not meet g's [0, 8) in a dimension",
            "two.yaml:9:5: copy_to_host: unknown buffer 'nope'; buffers are [\"g\"]",
        ]
    );
    // `load` gives the first of them.
    let first = plan::parse(&cases_root(), Path::new("two.yaml"), &src).unwrap_err();
    assert_eq!(first.to_string(), got[0]);
}
