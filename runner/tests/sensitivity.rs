//! The suite catches what it claims to: each regression case fails when the
//! Halide bug it is written against is brought back, and passes without it.

use vkcopy_engine::discover::{case_files, cases_root};
use vkcopy_engine::exec;
use vkcopy_engine::plan;
use vkcopy_engine::rt::{ContextOptions, Emulate, Policy};
use vkcopy_suite::outcome::Status;
use vkcopy_suite::suite::probe;

/// Options for the default device, or None where this machine has no Vulkan.
fn options() -> Option<ContextOptions> {
    let options = ContextOptions::from_env().unwrap();
    match probe(&options).unwrap_or_else(|e| panic!("cannot create a context: {e}")) {
        Ok(_) => Some(options),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("no Vulkan device: {e}"),
    }
}

fn run(case: &str, options: &ContextOptions) -> (Status, String) {
    let root = cases_root();
    let path = root.join(format!("{}.yaml", case.replace("::", "/")));
    let plan = plan::load(&root, &path).unwrap_or_else(|e| panic!("{e}"));
    let out = exec::run(&plan, options, &vkcopy_engine::runtime::Target::vkcopy());
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
    // The Halide mirrors of the same schedule.
    assert_catches("halide::device_crop::crop_of_crop_device_dirty", bug);
    assert_catches("halide::device_slice::slice_of_slice_device_dirty", bug);
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
    assert_catches(
        "halide::device_buffer_copy::row05b_device_dirty_to_host_subset",
        bug,
    );
    assert_catches("halide::gpu_object_lifetime_1", bug);
}

#[test]
fn min_extent_copy_bug_is_caught() {
    let bug = Emulate {
        min_extent_copy: true,
        ..Default::default()
    };
    assert_catches("regressions::partial_overlap", bug);
}

#[test]
fn use_count_bug_is_caught() {
    let bug = Emulate {
        use_count_zero: true,
        ..Default::default()
    };
    assert_catches("regressions::parent_freed_before_crop", bug);
    // Regions given back while in use: the allocation cache hands them out twice.
    // (`gpu_allocation_cache::concurrent` crashes under it, so it runs in the
    // runner's worker processes only.)
    assert_catches("halide::gpu_allocation_cache::decreasing_size", bug);
    assert_catches("halide::gpu_allocation_cache::increasing_size", bug);
}

#[test]
fn missing_invalidate_is_caught() {
    let bug = Emulate {
        no_flush_invalidate: true,
        ..Default::default()
    };
    assert_catches("regressions::noncoherent_readback", bug);
}

/// Runs every case but the perf cases under `policy`; returns the names of
/// those that failed.
fn failing_under(policy: Policy) -> Option<Vec<String>> {
    let options = ContextOptions {
        policy,
        ..options()?
    };
    let root = cases_root();
    let mut failed = Vec::new();
    for path in case_files(&root).unwrap() {
        let plan = plan::load(&root, &path).unwrap_or_else(|e| panic!("{e}"));
        // Speed is not placement: a perf case's threshold moves with the load
        // of the machine (held only in scripts/test.sh's perf run).
        if plan.tags.iter().any(|t| t == "perf") {
            continue;
        }
        if exec::run(&plan, &options, &vkcopy_engine::runtime::Target::vkcopy()).status
            == Status::Fail
        {
            failed.push(plan.name);
        }
    }
    Some(failed)
}

#[test]
fn old_policies_fail_exactly_the_readback_cases() {
    let seed = [
        "regressions::seed_readback::h200",
        "regressions::seed_readback::h200_vram_nearly_full",
        "regressions::seed_readback::rtx4070",
        "regressions::seed_readback::rtx4070_bar_full",
    ];
    let Some(legacy) = failing_under(Policy::HalideLegacy) else {
        return;
    };
    let mut want: Vec<String> = seed.iter().map(|s| s.to_string()).collect();
    // Both Halide policies require coherent memory, so they miss the cached
    // non-coherent type, and both let device memory fall back into the small BAR heap.
    let both = [
        "regressions::heap_exhaustion",
        "regressions::noncoherent_readback",
    ];
    want.extend(both.iter().map(|s| s.to_string()));
    want.sort();
    assert_eq!(legacy, want, "under halide-legacy");
    let Some(halide) = failing_under(Policy::Halide) else {
        return;
    };
    assert_eq!(halide, both.to_vec(), "under halide");
    let Some(vkcopy) = failing_under(Policy::Vkcopy) else {
        return;
    };
    assert!(vkcopy.is_empty(), "under vkcopy: {vkcopy:?}");
}
