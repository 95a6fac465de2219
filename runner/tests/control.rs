//! Control steps that run on a device: `threads` with a thread variable,
//! `repeat` without a variable, and `expect_concurrent` both ways.

mod common;

use vkcopy_engine::rt::ContextOptions;
use vkcopy_suite::outcome::{Outcome, Status};

fn run(case: &str) -> Option<Outcome> {
    common::run_case("case.yaml", case, &ContextOptions::from_env().unwrap())
}

#[test]
fn each_thread_runs_the_steps_its_index_selects() {
    // Threads 0 and 1 upload 3 times, threads 2 and 3 read back 5 times; a
    // repeat without `var` runs its steps once per value.
    let case = "\
about: t
buffers:
  a: { type: i32, extent: [1024] }
steps:
  - threads:
      count: 4
      var: t
      steps:
        - fill_host: { buffer: a, value: \"x + 1000 * t\" }
        - when:
            cond: \"t < 2\"
            steps:
              - repeat: { from: 0, to: 3, steps: [ set_dirty: { buffer: a, host_dirty: true }, copy_to_device: a ] }
        - when:
            cond: \"t >= 2\"
            steps:
              - copy_to_device: a
              - repeat: { from: 0, to: 5, steps: [ set_dirty: { buffer: a, device_dirty: true }, copy_to_host: a ] }
        - expect: { buffer: a, value: \"x + 1000 * t\" }
  - expect_counters: { copies_to_device: 8, bytes_to_device: 32768, copies_to_host: 10, bytes_to_host: 40960 }
";
    let Some(out) = run(case) else { return };
    assert_eq!(out.status, Status::Pass, "{}", out.message);
}

#[test]
fn a_failure_in_a_repeat_without_var_names_its_run() {
    let case = "\
about: t
buffers:
  a: { type: i32, extent: [4] }
steps:
  - repeat:
      from: 0
      to: 4
      steps:
        - copy_to_device: a
        - fill_host: { buffer: a, value: \"7\" }
        - expect: { buffer: a, value: \"0\" }
";
    let Some(out) = run(case) else { return };
    assert_eq!(out.status, Status::Fail, "{}", out.message);
    assert!(
        out.message.contains("case.yaml:11:11: expect") && out.message.contains("(run 1 of 4"),
        "{}",
        out.message
    );
}

#[test]
fn a_host_stage_beside_an_async_copy_is_concurrent() {
    let case = "\
about: t
buffers:
  a: { type: i32, extent: [1048576] }
  b: { type: i32, extent: [1048576] }
steps:
  - fill_device: { buffer: a, value: \"x\" }
  - start_copy_to_host: a
  - fill_host: { buffer: b, value: \"x * 3 + 1\" }
  - expect: { buffer: b, value: \"x * 3 + 1\" }
  - wait: a
  - expect: { buffer: a, value: \"x\" }
  - expect_concurrent: 2
";
    let Some(out) = run(case) else { return };
    assert_eq!(out.status, Status::Pass, "{}", out.message);
}

#[test]
fn serial_work_is_not_concurrent() {
    let case = "\
about: t
buffers:
  a: { type: i32, extent: [65536] }
steps:
  - copy_to_device: a
  - copy_to_host: a
  - set_dirty: { buffer: a, device_dirty: true }
  - start_copy_to_host: a
  - wait: a
  - expect_concurrent: 1
  - expect_concurrent: 2
";
    let Some(out) = run(case) else { return };
    assert_eq!(out.status, Status::Fail, "{}", out.message);
    assert!(
        out.message.contains("case.yaml:11:5: expect_concurrent")
            && out
                .message
                .contains("at most 1 piece(s) of work in flight at once"),
        "{}",
        out.message
    );
}
