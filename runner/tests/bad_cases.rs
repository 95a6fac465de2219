//! Malformed case files and the first line of the error each must give: every
//! file in `bad_cases/` starts with `# error: LINE:COL: message`, and loading
//! it (as `vkcopy-suite check` does, without Vulkan) must fail with exactly
//! `PATH:LINE:COL: message`, located in the file.

use std::path::Path;

use vkcopy_suite::discover::cases_root;
use vkcopy_suite::plan;

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
