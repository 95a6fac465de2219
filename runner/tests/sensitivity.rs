//! The suite catches what it claims to: each regression case fails when the
//! Halide bug it is written against is brought back, and passes without it.

use vkcopy::{Context, ContextOptions, Emulate, Error};
use vkcopy_suite::discover::cases_root;
use vkcopy_suite::exec::{self, Status};
use vkcopy_suite::plan;

/// Options for the default device, or None where this machine has no Vulkan.
fn options() -> Option<ContextOptions> {
    let options = ContextOptions::from_env().unwrap();
    match Context::new(options.clone()) {
        Ok(_) => Some(options),
        Err(e @ (Error::LoaderMissing(_) | Error::NoDevice))
            if std::env::var_os("CI").is_none() =>
        {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("cannot create a context: {e}"),
    }
}

fn run(case: &str, options: &ContextOptions) -> (Status, String) {
    let root = cases_root();
    let path = root.join(format!("{}.yaml", case.replace("::", "/")));
    let plan = plan::load(&root, &path).unwrap_or_else(|e| panic!("{e}"));
    let out = exec::run(&plan, options);
    (out.status, out.message)
}

fn assert_catches(case: &str, bug: Emulate) {
    let Some(options) = options() else { return };
    let (status, message) = run(case, &options);
    assert_eq!(
        status,
        Status::Pass,
        "{case} must pass without the bug: {message}"
    );
    let buggy = ContextOptions {
        emulate: bug,
        ..options
    };
    let (status, message) = run(case, &buggy);
    assert_eq!(status, Status::Fail, "{case} must fail with {bug:?}");
    assert!(!message.is_empty());
}

#[test]
fn crop_of_crop_offset_bug_is_caught() {
    let bug = Emulate {
        crop_offset_from_owner: true,
        ..Default::default()
    };
    assert_catches("regressions::crop_of_crop_device_dirty", bug);
    assert_catches("regressions::slice_of_slice_device_dirty", bug);
}

#[test]
fn staging_layout_bug_is_caught() {
    let bug = Emulate {
        staging_layout_mismatch: true,
        ..Default::default()
    };
    assert_catches("regressions::staging_layout_mismatch", bug);
    assert_catches(
        "halide::device_buffer_copy::row04b_host_to_device_subset_nonzero",
        bug,
    );
}

#[test]
fn min_extent_copy_bug_is_caught() {
    let bug = Emulate {
        min_extent_copy: true,
        ..Default::default()
    };
    assert_catches("regressions::partial_overlap", bug);
}
