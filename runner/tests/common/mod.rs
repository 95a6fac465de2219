//! Running one case written inline, on the default device.

use vkcopy_engine::exec;
use vkcopy_engine::plan;
use vkcopy_engine::rt::ContextOptions;
use vkcopy_suite::outcome::Outcome;
use vkcopy_suite::suite::probe;

/// Writes `case` to `file` in a temporary folder and runs it with `options`;
/// None where this machine has no Vulkan (outside CI, which must have one).
pub fn run_case(file: &str, case: &str, options: &ContextOptions) -> Option<Outcome> {
    match probe(options).unwrap_or_else(|e| panic!("cannot create a context: {e}")) {
        Ok(_) => {}
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            return None;
        }
        Err(e) => panic!("no Vulkan device: {e}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file);
    std::fs::write(&path, case).unwrap();
    let plan = plan::load(dir.path(), &path).unwrap_or_else(|e| panic!("{e}"));
    Some(exec::run(
        &plan,
        options,
        &vkcopy_engine::runtime::Target::vkcopy(),
    ))
}
