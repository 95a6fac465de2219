use super::*;
use crate::discover::case_name;
use crate::steps::OpKind;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases")
}

fn parse_err(src: &str) -> String {
    let root = root();
    parse(&root, &root.join("basic/bad.yaml"), src)
        .unwrap_err()
        .to_string()
}

#[test]
fn case_names_follow_the_folder() {
    let r = Path::new("/x/cases");
    assert_eq!(
        case_name(r, Path::new("/x/cases/halide/device_crop.yaml")),
        "halide::device_crop"
    );
}

#[test]
fn unknown_field_is_located() {
    let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - fill_host: { buffer: g, valu: x }\n");
    assert!(e.contains("basic/bad.yaml:5:29: "), "{e}");
    assert!(e.contains("unknown field `valu`"), "{e}");
}

#[test]
fn unknown_step_is_located() {
    let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - fill_hots: { buffer: g, value: x }\n");
    assert!(e.contains("bad.yaml:5:5: "), "{e}");
    assert!(e.contains("fill_hots"), "{e}");
}

#[test]
fn wrong_value_type_names_the_field() {
    let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4], host: maybe }\nsteps:\n  - copy_to_host: g\n");
    assert!(e.contains("bad.yaml:3:"), "{e}");
    assert!(e.contains("host"), "{e}");
}

#[test]
fn bad_expression_names_step_and_field() {
    let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - copy_to_host: g\n  - expect: { buffer: g, value: x + q }\n");
    assert!(
        e.contains("bad.yaml:6:5: expect: field value: 'x + q'"),
        "{e}"
    );
}

#[test]
fn expression_beyond_dimensions_is_an_error() {
    let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - fill_host: { buffer: g, value: y }\n");
    assert!(e.contains("uses dimension 1 but buffer g has 1"), "{e}");
}

#[test]
fn unknown_buffer_is_an_error() {
    let e = parse_err(
        "about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - copy_to_host: h\n",
    );
    assert!(
        e.contains("bad.yaml:5:5: copy_to_host: unknown buffer 'h'"),
        "{e}"
    );
}

#[test]
fn unknown_element_type_is_an_error() {
    let e = parse_err(
        "about: a\nbuffers:\n  g: { type: i33, extent: [4] }\nsteps:\n  - copy_to_host: g\n",
    );
    assert!(
        e.contains("bad.yaml:3:6: buffer g: field type: unknown element type 'i33'"),
        "{e}"
    );
}

#[test]
fn missing_table_is_an_error() {
    let e = parse_err("about: a\nselection:\n  table: no-such-gpu\n  expect:\n    - { request: readback, vkcopy: 0 }\n");
    assert!(e.contains("no recorded table 'no-such-gpu'"), "{e}");
}

#[test]
fn bad_request_is_an_error() {
    let e = parse_err("about: a\nselection:\n  table: lavapipe\n  expect:\n    - { request: sideways, vkcopy: 0 }\n");
    assert!(e.contains("bad.yaml:5:7: request 'sideways'"), "{e}");
}

#[test]
fn huge_buffers_are_refused_where_written() {
    for extent in [
        "[100000000000]",
        "[4294967296, 4294967296]",
        "[9223372036854775807]",
    ] {
        let e = parse_err(&format!(
            "about: a\nbuffers:\n  g: {{ type: u8, extent: {extent} }}\nsteps:\n  - copy_to_host: g\n"
        ));
        assert!(e.contains("bad.yaml:3:6: buffer g: "), "{e}");
    }
    let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [2, 2], stride: [1, 1000000000000] }\nsteps:\n  - copy_to_host: g\n");
    assert!(e.contains("spans more than"), "{e}");
    let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [2] }\nsteps:\n  - view: { from: g, to: v, at: [0], extent: [1000000, 1000000], stride: [0, 0] }\n");
    assert!(e.contains("bad.yaml:5:5: view: view v: more than"), "{e}");
    let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [2] }\nsteps:\n  - measure: { copy_to_host: g, repeat: 4000000000 }\n");
    assert!(e.contains("field repeat"), "{e}");
}

#[test]
fn long_expressions_are_quoted_by_their_start() {
    let long = "x+".repeat(3000) + "x";
    let e = parse_err(&format!("about: a\nbuffers:\n  g: {{ type: u8, extent: [2] }}\nsteps:\n  - fill_host: {{ buffer: g, value: \"{long}\" }}\n"));
    assert!(e.len() < 300, "{e}");
    assert!(e.contains("at most 4096"), "{e}");
}

#[test]
fn good_case_plans() {
    let root = root();
    let p = parse(
        &root,
        &root.join("basic/ok.yaml"),
        "about: a\nbuffers:\n  g: { type: u16, extent: [4, 2], min: [1, 1] }\nsteps:\n  - fill_host: { buffer: g, value: x + 10*y }\n  - copy_to_device: g\n",
    )
    .unwrap();
    assert_eq!(p.name, "basic::ok");
    let PlanKind::Runtime(r) = p.kind else {
        panic!("runtime case expected")
    };
    assert_eq!(
        r.buffers[0].dims[1],
        Dim {
            min: 1,
            extent: 2,
            stride: 4
        }
    );
    assert_eq!(r.ops.len(), 2);
    assert_eq!(r.ops[1].line, 6);
}

#[test]
fn repeat_expands_with_the_loop_variable() {
    let root = root();
    let p = parse(
        &root,
        &root.join("basic/ok.yaml"),
        "about: a\nbuffers:\n  g: { type: u8, extent: [4, 4] }\nsteps:\n  - repeat:\n      var: t\n      from: 0\n      to: 4\n      steps:\n        - crop: { from: g, to: \"c{t}\", min: [0, t], extent: [4, 1] }\n        - when: { cond: \"t % 2\", steps: [ { fill_host: { buffer: \"c{t}\", value: \"x + t\" } } ] }\n        - release: \"c{t}\"\n",
    )
    .unwrap();
    let PlanKind::Runtime(r) = p.kind else {
        panic!("runtime case expected")
    };
    assert_eq!(r.ops.len(), 4 * 2 + 2);
    assert_eq!(r.slots, ["g", "c0", "c1", "c2", "c3"]);
    assert_eq!(r.ops[3].iteration, "t = 1");
}

#[test]
fn repeat_errors_are_located_and_bounded() {
    let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [4] }\nsteps:\n  - repeat: { var: y, from: 0, to: 2, steps: [] }\n");
    assert!(
        e.contains("bad.yaml:5:5: repeat: field var: 'y' is a coordinate"),
        "{e}"
    );
    let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [4] }\nsteps:\n  - repeat:\n      var: t\n      from: 0\n      to: 3\n      steps:\n        - crop: { from: g, to: c, min: [t], extent: [2] }\n");
    assert!(
        e.contains("bad.yaml:10:11: crop: field to: 'c' already names a buffer (at t = 1)"),
        "{e}"
    );
    let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [4] }\nsteps:\n  - repeat:\n      var: t\n      from: 0\n      to: 1000\n      steps:\n        - repeat: { var: i, from: 0, to: 1000, steps: [ { copy_to_host: g } ] }\n");
    assert!(e.contains("expands to more than 200000 steps"), "{e}");
    let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [4] }\nsteps:\n  - add_device: { out: g, value: x }\n");
    assert!(
        e.contains("bad.yaml:5:5: add_device: field value: 'x': the device adds a constant only"),
        "{e}"
    );
}

#[test]
fn host_offset_is_checked() {
    let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4], host_offset: 4096 }\nsteps:\n  - copy_to_host: g\n");
    assert!(e.contains("bad.yaml:3:"), "{e}");
    assert!(e.contains("field host_offset: 4096"), "{e}");
    let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4], host: false, host_offset: 16 }\nsteps:\n  - copy_to_host: g\n");
    assert!(e.contains("no host memory"), "{e}");
}

#[test]
fn bad_min_ratio_fields_are_located() {
    let case = |steps: &str| {
        parse_err(&format!(
            "about: a\nbuffers:\n  g: {{ type: u8, extent: [2] }}\nsteps:\n{steps}"
        ))
    };
    let e = case("  - measure: { copy_to_host: g, min_ratio: { of: fast, value: 1 } }\n");
    assert!(
        e.contains("bad.yaml:5:5: measure: field min_ratio: of: no earlier measure named 'fast'"),
        "{e}"
    );
    let e = case("  - measure: { name: raw_copy, copy_to_host: g }\n");
    assert!(
        e.contains("bad.yaml:5:5: measure: field name: 'raw_copy' is a reference, not a name"),
        "{e}"
    );
    let e = case("  - measure: { copy_to_host: g, min_ratio: { of: host_memcpy, value: 0 } }\n");
    assert!(
        e.contains("measure: field min_ratio: value: 0 is not a positive number"),
        "{e}"
    );
    let e = case("  - measure: { copy_to_host: g, min_ratio: { of: host_memcpy, valu: 1 } }\n");
    assert!(e.contains("bad.yaml:5:") && e.contains("valu"), "{e}");
    let e = case("  - measure: { copy_to_host: g, min_ratio: { value: 1 } }\n");
    assert!(
        e.contains("bad.yaml:5:") && e.contains("field of: missing"),
        "{e}"
    );
    let e = case(
        "  - measure: { name: a, copy_to_host: g }\n  - measure: { name: a, copy_to_device: g }\n",
    );
    assert!(
        e.contains("bad.yaml:6:5: measure: field name: 'a' already names a measure"),
        "{e}"
    );
    let e = case("  - measure: { name: host_memcpy, copy_to_host: g }\n");
    assert!(
        e.contains("field name: 'host_memcpy' is a reference"),
        "{e}"
    );
    // A measure refers to an earlier one only: it is measured in the same run.
    let e = case(
        "  - measure: { copy_to_host: g, min_ratio: { of: later, value: 1 } }\n  - measure: { name: later, copy_to_device: g }\n",
    );
    assert!(
        e.contains("bad.yaml:5:5: measure: field min_ratio: of: no earlier"),
        "{e}"
    );
}

#[test]
fn min_ratio_refers_to_named_measures_in_loops() {
    let root = root();
    let src = "about: a\nbuffers:\n  g: { type: u8, extent: [2] }\nsteps:\n  - measure: { name: up, copy_to_device: g }\n  - repeat:\n      var: t\n      from: 0\n      to: 2\n      steps:\n        - measure: { name: \"down{t}\", copy_to_host: g, min_ratio: { of: up, value: 0.5 } }\n  - measure: { copy_to_host: g, min_ratio: { of: down1, value: 0.5 } }\n";
    let p = parse(&root, &root.join("basic/ok.yaml"), src).unwrap();
    let PlanKind::Runtime(r) = p.kind else {
        panic!("a runtime case")
    };
    assert_eq!(r.ops.len(), 4);
}

#[test]
fn bad_native_buffer_steps_are_located() {
    let case = |steps: &str| {
        parse_err(&format!(
            "about: a\nbuffers:\n  g: {{ type: i32, extent: [16] }}\nsteps:\n{steps}"
        ))
    };
    let e = case("  - wrap_native: { buffer: g, native: app }\n");
    assert!(
        e.contains("bad.yaml:5:5: wrap_native: field native: no native_buffer named 'app'"),
        "{e}"
    );
    let e = case("  - native_buffer: { name: app, bytes: 0 }\n");
    assert!(
        e.contains("bad.yaml:5:5: native_buffer: field bytes: 0;"),
        "{e}"
    );
    let e = case(
        "  - native_buffer: { name: app, bytes: 64 }\n  - native_buffer: { name: app, bytes: 64 }\n",
    );
    assert!(
        e.contains("bad.yaml:6:5: native_buffer: field name: 'app' already names a native buffer"),
        "{e}"
    );
    let e = case(
        "  - native_buffer: { name: app, bytes: 128 }\n  - wrap_native: { buffer: g, native: app, offset: 2 }\n",
    );
    assert!(
        e.contains("bad.yaml:6:5: wrap_native: field offset: 2 is not a multiple of g's 4-byte"),
        "{e}"
    );
    let e = case(
        "  - native_buffer: { name: app, bytes: 128 }\n  - wrap_native: { buffer: g, native: app, offset: 68 }\n",
    );
    assert!(
        e.contains(
            "field offset: g spans 64 bytes, which from byte 68 do not fit in the 128 bytes"
        ),
        "{e}"
    );
}

#[test]
fn on_runtime_needs_a_why_and_plans_both_sides() {
    let e = parse_err(
        "about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - on_runtime: { why: \" \", halide: [copy_to_host: g] }\n",
    );
    assert!(e.contains("bad.yaml:5:5: "), "{e}");
    assert!(e.contains("field why: say how the runtimes differ"), "{e}");
    let e = parse_err(
        "about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - on_runtime: { why: w, vkcopy: [copy_to_host: h] }\n",
    );
    assert!(e.contains("bad.yaml:5:"), "{e}");
    assert!(e.contains("'h'"), "{e}");
    let root = root();
    let plan = parse(
        &root,
        &root.join("basic/ok.yaml"),
        "about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - on_runtime: { why: w, halide: [copy_to_host: g, copy_to_device: g], vkcopy: [copy_to_host: g] }\n",
    )
    .unwrap();
    let PlanKind::Runtime(r) = &plan.kind else {
        panic!("a runtime case")
    };
    let [op] = r.ops.as_slice() else {
        panic!("one step: {:?}", r.ops.len())
    };
    let OpKind::OnRuntime { halide, vkcopy } = &op.kind else {
        panic!("on_runtime")
    };
    assert_eq!((halide.len(), vkcopy.len()), (2, 1));
}
