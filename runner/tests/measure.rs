//! Speed thresholds of `measure` steps: held without the validation layer,
//! reported and not held under it (its cost per call is part of every time).

mod common;

use vkcopy_suite::outcome::{Outcome, Status};
use vkcopy_suite::rt::ContextOptions;

/// A case no device can pass on speed: 1 MiB readback at 1e6 GB/s, and at
/// 1000x a host memcpy.
const CASE: &str = "\
about: a threshold no device meets
buffers:
  g: { type: u8, extent: [1048576] }
steps:
  - fill_host: { buffer: g, value: \"x\" }
  - copy_to_device: g
  - measure: { copy_to_host: g, repeat: 2, min_gbps: { any: 1000000 } }
  - measure: { copy_to_host: g, repeat: 2, min_ratio: { of: host_memcpy, value: 1000 } }
  - expect: { buffer: g, value: \"x\" }
";

fn run(validation: bool) -> Option<Outcome> {
    let options = ContextOptions {
        validation,
        ..ContextOptions::from_env().unwrap()
    };
    common::run_case("too_fast.yaml", CASE, &options)
}

#[test]
fn thresholds_fail_without_the_validation_layer() {
    let Some(out) = run(false) else { return };
    assert_eq!(out.status, Status::Fail, "{}", out.message);
    assert!(
        out.message.contains("below the 1000000 GB/s expected"),
        "{}",
        out.message
    );
    assert!(
        out.message.contains("too_fast.yaml:7:5: measure"),
        "{}",
        out.message
    );
}

#[test]
fn thresholds_are_reported_not_held_under_the_validation_layer() {
    if !std::path::Path::new("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")
        .exists()
    {
        return;
    }
    let Some(out) = run(true) else { return };
    assert_eq!(out.status, Status::Pass, "{}", out.message);
    assert_eq!(out.measurements.len(), 2);
    let speed = out.measurements[0].not_held.as_deref().unwrap_or_default();
    assert!(speed.contains("under the validation layer"), "{speed}");
    assert!(speed.contains("below the 1000000 GB/s expected"), "{speed}");
    let ratio = out.measurements[1].not_held.as_deref().unwrap_or_default();
    assert!(ratio.contains("below the 1000x expected"), "{ratio}");
    assert!(out.measurements[1].ratio.is_some());
}
