//! Records the git commit the binary is built from as `VKCOPY_COMMIT` (reports
//! name it): `VKCOPY_COMMIT` from the environment when set (a build outside a
//! checkout), else `git rev-parse HEAD`, else empty.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=VKCOPY_COMMIT");
    let commit = std::env::var("VKCOPY_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_default();
    // Build again when HEAD moves: HEAD itself, the branch it names, packed refs
    // (only files that exist: a missing one would rerun this on every build).
    let mut watch = Vec::new();
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        watch.push(format!("{dir}/HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(format!("{common}/{branch}"));
        }
        watch.push(format!("{common}/packed-refs"));
    }
    for file in watch.iter().filter(|f| std::path::Path::new(f).is_file()) {
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rustc-env=VKCOPY_COMMIT={commit}");
}
