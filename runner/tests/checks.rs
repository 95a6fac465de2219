//! What a failed `expect` says: the count, the box every mismatch lies in and
//! the first few, so that a wrong crop shows at once.

mod common;

use vkcopy_engine::rt::ContextOptions;
use vkcopy_suite::outcome::{Outcome, Status};

fn run(case: &str) -> Option<Outcome> {
    common::run_case("case.yaml", case, &ContextOptions::from_env().unwrap())
}

#[test]
fn a_failed_expect_gives_the_box_of_its_mismatches() {
    // The crop's elements are zeroed; the parent is then checked as if they were not.
    let case = "\
about: t
buffers:
  g: { type: i32, extent: [16, 16] }
steps:
  - fill_host: { buffer: g, value: \"x + 16*y\" }
  - crop: { from: g, to: c, min: [4, 2], extent: [3, 5] }
  - fill_host: { buffer: c, value: \"0\" }
  - expect: { buffer: g, value: \"x + 16*y\" }
";
    let Some(out) = run(case) else { return };
    assert_eq!(out.status, Status::Fail, "{}", out.message);
    assert!(
        out.message.contains(
            "expect: g: 15 of 256 elements differ from 'x + 16*y', all within the box \
             min [4, 2] extent [3, 5]; first: [4, 2]: expected 36, got 0;"
        ),
        "{}",
        out.message
    );
}

#[test]
fn the_box_spans_a_stride_0_dimension_the_check_visits_once() {
    // v repeats g's 16 elements 4 times (stride 0); the check of v visits
    // each element once, yet a wrong element is wrong at all 4 rows.
    let case = "\
about: t
buffers:
  g: { type: i32, extent: [16] }
steps:
  - fill_host: { buffer: g, value: \"x\" }
  - crop: { from: g, to: c, min: [5], extent: [3] }
  - fill_host: { buffer: c, value: \"-1\" }
  - view: { from: g, to: v, at: [0], extent: [16, 4], stride: [1, 0] }
  - expect: { buffer: v, value: \"x\" }
";
    let Some(out) = run(case) else { return };
    assert_eq!(out.status, Status::Fail, "{}", out.message);
    assert!(
        out.message.contains(
            "12 of 64 elements differ from 'x', all within the box min [5, 0] extent [3, 4]"
        ),
        "{}",
        out.message
    );
}
