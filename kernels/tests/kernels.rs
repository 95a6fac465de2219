//! Compute kernels (WGSL compiled by naga) on the real default device (lavapipe
//! in CI), with the validation layer when it is installed: values read back,
//! views at unaligned offsets and with strides, every element type, dirty bits,
//! the pipeline cache and the leak report.

use std::time::Instant;

use vkcopy::types::Dim;
use vkcopy::{Buffer, Context, ContextOptions, ElemType, Error};
use vkcopy_kernels::expr::Expr;
use vkcopy_kernels::Kernels;

#[path = "../../allocator/tests/common/mod.rs"]
mod common;

use common::assert_clean as finish;

/// The default device with validation when installed.
fn context() -> Option<Context> {
    common::context(ContextOptions {
        validation: common::validation_installed(),
        ..Default::default()
    })
}

fn expr(s: &str) -> Expr {
    Expr::parse(s).expect("expression parses")
}

/// Asserts that every element of `buf` (on the host) equals `f(coords)` converted
/// to its type.
fn check(buf: &Buffer, f: impl FnMut(&[i64]) -> i64) {
    let c = buf.compare(f, 5).expect("compare");
    assert_eq!(
        c.mismatches,
        0,
        "{} ({}): {} mismatches, first {:?}",
        buf.name(),
        buf.elem(),
        c.mismatches,
        c.first
    );
}

fn host_i32(buf: &Buffer, at: &[i64]) -> i64 {
    match buf.get(at).expect("element") {
        vkcopy::Value::Int(v) => v,
        vkcopy::Value::Float(v) => v as i64,
    }
}

#[test]
fn fill_2d_i32() {
    let Some(ctx) = context() else { return };
    let mut g = Buffer::new("g", ElemType::I32, &[128, 128]).unwrap();
    ctx.kernel_fill(&mut g, &expr("x + 256*y")).unwrap();
    assert!(g.device_dirty() && !g.host_dirty());
    assert!(g.has_device_allocation());
    ctx.copy_to_host(&mut g).unwrap();
    check(&g, |c| c[0] + 256 * c[1]);
    drop(g);
    finish(&ctx);
}

#[test]
fn fill_with_mins_conditionals_and_division() {
    let Some(ctx) = context() else { return };
    let dims = vec![
        Dim {
            min: -5,
            extent: 11,
            stride: 1,
        },
        Dim {
            min: 100,
            extent: 7,
            stride: 11,
        },
    ];
    let mut b = Buffer::with_dims("b", ElemType::I32, dims, true).unwrap();
    let e = expr("(x * y) / 7 - x % 3 + (1000 if x < 0 and y != 103 else -1000) + max(x, -2)");
    ctx.kernel_fill(&mut b, &e).unwrap();
    ctx.copy_to_host(&mut b).unwrap();
    check(&b, |c| e.eval(c));
    drop(b);
    finish(&ctx);
}

/// A grid-stride loop: more elements than one dispatch has invocations
/// (65535 workgroups x 64).
#[test]
fn fill_more_elements_than_invocations() {
    let Some(ctx) = context() else { return };
    let mut b = Buffer::new("big", ElemType::U32, &[4099, 1100]).unwrap();
    assert!(b.len() > 65535 * 64);
    ctx.kernel_fill(&mut b, &expr("x * 3 + y * 5000")).unwrap();
    ctx.copy_to_host(&mut b).unwrap();
    check(&b, |c| c[0] * 3 + c[1] * 5000);
    drop(b);
    finish(&ctx);
}

/// Stride 2 in dimension 0: the elements in between keep their values on the device.
#[test]
fn fill_through_a_strided_view() {
    let Some(ctx) = context() else { return };
    for elem in [ElemType::I32, ElemType::U8, ElemType::I16, ElemType::F32] {
        let mut parent = Buffer::new("parent", elem, &[64, 3]).unwrap();
        parent.fill(|_| 77).unwrap();
        ctx.copy_to_device(&mut parent).unwrap();
        let dims = vec![
            Dim {
                min: 0,
                extent: 32,
                stride: 2,
            },
            Dim {
                min: 0,
                extent: 3,
                stride: 64,
            },
        ];
        let mut odd = parent.view_at("odd", dims, 1).unwrap();
        ctx.kernel_fill(&mut odd, &expr("x + 40*y")).unwrap();
        // The view wrote the parent's device memory; read all of it back.
        parent.set_device_dirty(true);
        ctx.copy_to_host(&mut parent).unwrap();
        check(&parent, |c| {
            if c[0] % 2 == 1 {
                c[0] / 2 + 40 * c[1]
            } else {
                77
            }
        });
        drop(odd);
        drop(parent);
    }
    finish(&ctx);
}

/// A crop at element offset 33 (byte 132 for i32: not a multiple of
/// minStorageBufferOffsetAlignment), then a crop of a crop, as in Halide's
/// device_crop test (Halide #8944).
#[test]
fn fill_and_add_through_unaligned_crops() {
    let Some(ctx) = context() else { return };
    let align = ctx.info().min_storage_buffer_offset_alignment;
    for elem in [ElemType::I32, ElemType::U8, ElemType::U16] {
        let mut parent = Buffer::new("parent", elem, &[256]).unwrap();
        parent.fill(|_| 9).unwrap();
        ctx.copy_to_device(&mut parent).unwrap();
        let mut crop = parent.cropped("crop", &[33], &[100]).unwrap();
        let offset = crop.device_view().unwrap().offset;
        assert_eq!(offset, 33);
        if elem == ElemType::I32 {
            assert_ne!(
                offset * 4 % align.max(1),
                0,
                "the test needs an unaligned offset"
            );
        }
        ctx.kernel_fill(&mut crop, &expr("x * 3")).unwrap();
        parent.set_device_dirty(true);
        ctx.copy_to_host(&mut parent).unwrap();
        check(&parent, |c| {
            if (33..133).contains(&c[0]) {
                c[0] * 3
            } else {
                9
            }
        });
        ctx.copy_to_host(&mut crop).unwrap();
        check(&crop, |c| c[0] * 3);
        drop(crop);
        drop(parent);
    }

    // The design document's example.
    let mut g = Buffer::new("g", ElemType::I32, &[128, 128]).unwrap();
    ctx.kernel_fill(&mut g, &expr("x + 256*y")).unwrap();
    let c = g.cropped("c", &[32, 32], &[64, 64]).unwrap();
    let mut c2 = c.cropped("c2", &[40, 40], &[16, 16]).unwrap();
    assert!(c2.device_dirty());
    ctx.kernel_add(&mut c2, &mut [], 7).unwrap();
    ctx.copy_to_host(&mut g).unwrap();
    let e = expr("x + 256*y + (7 if 40 <= x < 56 and 40 <= y < 56 else 0)");
    check(&g, |p| e.eval(p));
    drop((c, c2, g));
    finish(&ctx);
}

/// A region larger than `maxStorageBufferRange` cannot be bound whole: views
/// in it are bound from an aligned offset below them.
#[test]
fn views_in_a_region_larger_than_a_binding() {
    let Some(ctx) = context() else { return };
    let max = u64::from(ctx.info().max_storage_buffer_range);
    if max > 512 << 20 {
        eprintln!("skipping: maxStorageBufferRange is {max} bytes");
        return;
    }
    let n = (max / 4 + 1000) as i64;
    let mut big = Buffer::new("big", ElemType::I32, &[n]).unwrap();
    ctx.device_malloc(&mut big).unwrap();
    for (at, len) in [(n - 997, 990), (5, 100), (n / 2 + 1, 33)] {
        let mut crop = big.cropped("crop", &[at], &[len]).unwrap();
        ctx.kernel_fill(&mut crop, &expr("x % 1000 + 7")).unwrap();
        ctx.kernel_add(&mut crop, &mut [], 1).unwrap();
        ctx.copy_to_host(&mut crop).unwrap();
        check(&crop, |c| c[0] % 1000 + 8);
    }
    // A whole-buffer kernel needs the whole region in one binding.
    let err = ctx.kernel_fill(&mut big, &expr("x")).unwrap_err();
    assert_eq!(err.name(), "bad_dimensions", "{err}");
    assert!(err.to_string().contains("maxStorageBufferRange"), "{err}");
    drop(big);
    finish(&ctx);
}

/// In-place add of a constant uploads a host-dirty output first.
#[test]
fn add_constant_in_place() {
    let Some(ctx) = context() else { return };
    let mut b = Buffer::new("b", ElemType::I32, &[33, 17]).unwrap();
    b.fill(|c| c[0] * 1000 - c[1]).unwrap();
    assert!(b.host_dirty());
    ctx.kernel_add(&mut b, &mut [], -12345).unwrap();
    assert!(b.device_dirty() && !b.host_dirty());
    ctx.copy_to_host(&mut b).unwrap();
    check(&b, |c| c[0] * 1000 - c[1] - 12345);
    // Twice more, now from device data.
    ctx.kernel_add(&mut b, &mut [], 5).unwrap();
    ctx.kernel_add(&mut b, &mut [], 5).unwrap();
    ctx.copy_to_host(&mut b).unwrap();
    check(&b, |c| c[0] * 1000 - c[1] - 12335);
    drop(b);
    finish(&ctx);
}

/// out = a + b + constant, inputs larger than out with other mins and strides,
/// both host-dirty (so uploaded first).
#[test]
fn add_two_buffers_and_a_constant() {
    let Some(ctx) = context() else { return };
    let mut a = Buffer::new("a", ElemType::I32, &[20, 20]).unwrap();
    a.fill(|c| c[0] + 100 * c[1]).unwrap();
    let padded = vec![
        Dim {
            min: 1,
            extent: 15,
            stride: 1,
        },
        Dim {
            min: 2,
            extent: 14,
            stride: 17,
        },
    ];
    let mut b = Buffer::with_dims("b", ElemType::I32, padded, true).unwrap();
    b.fill(|c| 7 * c[0] - c[1]).unwrap();
    let out_dims = vec![
        Dim {
            min: 3,
            extent: 10,
            stride: 1,
        },
        Dim {
            min: 4,
            extent: 9,
            stride: 10,
        },
    ];
    let mut out = Buffer::with_dims("out", ElemType::I32, out_dims, true).unwrap();
    ctx.kernel_add(&mut out, &mut [&mut a, &mut b], 3).unwrap();
    assert!(!a.host_dirty() && !b.host_dirty(), "inputs were uploaded");
    assert!(out.device_dirty() && !out.host_dirty());
    ctx.copy_to_host(&mut out).unwrap();
    check(&out, |c| (c[0] + 100 * c[1]) + (7 * c[0] - c[1]) + 3);
    drop((a, b, out));
    finish(&ctx);
}

/// More inputs than one descriptor set binds: several dispatches in one
/// submission, with barriers between them.
#[test]
fn add_many_inputs() {
    let Some(ctx) = context() else { return };
    let mut inputs: Vec<Buffer> = (0..11)
        .map(|i| {
            let mut b = Buffer::new(&format!("in{i}"), ElemType::F32, &[50, 4]).unwrap();
            b.fill(|c| c[0] * (i + 1) + c[1]).unwrap();
            b
        })
        .collect();
    let mut out = Buffer::new("out", ElemType::F32, &[50, 4]).unwrap();
    let mut refs: Vec<&mut Buffer> = inputs.iter_mut().collect();
    ctx.kernel_add(&mut out, &mut refs, -1).unwrap();
    ctx.copy_to_host(&mut out).unwrap();
    check(&out, |c| (1..=11).map(|k| c[0] * k + c[1]).sum::<i64>() - 1);
    drop((inputs, out));
    finish(&ctx);
}

/// A kernel whose input is host-dirty (with stale device data) uploads it first.
#[test]
fn host_dirty_input_is_uploaded_first() {
    let Some(ctx) = context() else { return };
    let mut a = Buffer::new("a", ElemType::I32, &[64]).unwrap();
    a.fill(|c| c[0]).unwrap();
    ctx.copy_to_device(&mut a).unwrap();
    a.fill(|c| 1000 + c[0]).unwrap();
    assert!(a.host_dirty() && a.has_device_allocation());
    let mut out = Buffer::new("out", ElemType::I32, &[64]).unwrap();
    ctx.kernel_add(&mut out, &mut [&mut a], 1).unwrap();
    assert!(!a.host_dirty());
    ctx.copy_to_host(&mut out).unwrap();
    check(&out, |c| 1001 + c[0]);

    // A device-dirty input is used as it is on the device, not re-uploaded.
    let mut s = Buffer::new("s", ElemType::I32, &[64, 2]).unwrap();
    ctx.kernel_fill(&mut a, &expr("2 * x")).unwrap();
    ctx.kernel_fill(&mut s, &expr("x + y")).unwrap();
    ctx.kernel_sum(&mut out, &mut s, 1).unwrap();
    ctx.kernel_add(&mut out, &mut [&mut a], 0).unwrap();
    assert!(a.device_dirty());
    ctx.copy_to_host(&mut out).unwrap();
    check(&out, |c| 2 * c[0]);
    drop((a, out, s));
    finish(&ctx);
}

/// Sum over dimension 1 of a 3-D buffer, and over dimensions 0 and 2.
#[test]
fn sum_over_a_dimension() {
    let Some(ctx) = context() else { return };
    let mut input = Buffer::new("in", ElemType::I32, &[4, 5, 6]).unwrap();
    input.fill(|c| c[0] + 10 * c[1] + 100 * c[2]).unwrap();
    let mut out = Buffer::new("out", ElemType::I32, &[4, 6]).unwrap();
    ctx.kernel_sum(&mut out, &mut input, 1).unwrap();
    assert!(!input.host_dirty() && out.device_dirty());
    ctx.copy_to_host(&mut out).unwrap();
    // sum over y in 0..5 of x + 10y + 100z
    check(&out, |c| 5 * c[0] + 100 + 500 * c[1]);

    let mut out0 = Buffer::new("out0", ElemType::I32, &[5, 6]).unwrap();
    ctx.kernel_sum(&mut out0, &mut input, 0).unwrap();
    ctx.copy_to_host(&mut out0).unwrap();
    check(&out0, |c| 6 + 40 * c[0] + 400 * c[1]);

    let mut out2 = Buffer::new("out2", ElemType::I32, &[4, 5]).unwrap();
    ctx.kernel_sum(&mut out2, &mut input, 2).unwrap();
    ctx.copy_to_host(&mut out2).unwrap();
    check(&out2, |c| 6 * c[0] + 60 * c[1] + 1500);

    // To a 0-D buffer.
    let mut line = Buffer::new("line", ElemType::I32, &[10]).unwrap();
    line.fill(|c| c[0] * c[0]).unwrap();
    let mut total = Buffer::new("total", ElemType::I32, &[]).unwrap();
    ctx.kernel_sum(&mut total, &mut line, 0).unwrap();
    ctx.copy_to_host(&mut total).unwrap();
    assert_eq!(host_i32(&total, &[]), 285);
    drop((input, out, out0, out2, line, total));
    finish(&ctx);
}

/// Fill, in-place add, add of buffers and sum for every element type; 64-bit
/// types are skipped with a note where the device lacks the feature.
#[test]
fn every_element_type() {
    let Some(ctx) = context() else { return };
    let e = expr("x - 3*y + 1000 * (x == 2)");
    let f = |c: &[i64]| e.eval(c);
    for elem in ElemType::ALL {
        if let Err(err) = ctx.kernel_supports(elem) {
            assert_eq!(err.name(), "unsupported_type");
            let mut b = Buffer::new("b", elem, &[3]).unwrap();
            let got = ctx.kernel_fill(&mut b, &e).unwrap_err();
            assert_eq!(got.name(), "unsupported_type");
            eprintln!("skipping {elem}: {err}");
            continue;
        }
        // Odd extents: elements of 8/16-bit types share words across rows.
        let mut a = Buffer::new("a", elem, &[7, 5]).unwrap();
        ctx.kernel_fill(&mut a, &e).unwrap();
        ctx.copy_to_host(&mut a).unwrap();
        check(&a, f);

        ctx.kernel_add(&mut a, &mut [], -2).unwrap();
        ctx.copy_to_host(&mut a).unwrap();
        check(&a, |c| f(c) - 2);

        let mut b = Buffer::new("b", elem, &[7, 5]).unwrap();
        b.fill(|c| 3 * c[0] + c[1]).unwrap();
        let mut out = Buffer::new("out", elem, &[7, 5]).unwrap();
        ctx.kernel_add(&mut out, &mut [&mut a, &mut b], 11).unwrap();
        ctx.copy_to_host(&mut out).unwrap();
        // Wrapping in the element type: the host's conversion of the exact sum.
        check(&out, |c| f(c) - 2 + 3 * c[0] + c[1] + 11);

        let mut sum = Buffer::new("sum", elem, &[7]).unwrap();
        ctx.kernel_sum(&mut sum, &mut out, 1).unwrap();
        ctx.copy_to_host(&mut sum).unwrap();
        // Each addend converted to the type first, then the wrapping sum.
        check(&sum, |c| {
            (0..5)
                .map(|y| {
                    let mut t = [0u8; 8];
                    elem.store(&mut t, f(&[c[0], y]) - 2 + 3 * c[0] + y + 11);
                    match elem.load(&t) {
                        vkcopy::Value::Int(v) => v,
                        vkcopy::Value::Float(v) => v as i64,
                    }
                })
                .fold(0i64, |acc, v| acc.wrapping_add(v))
        });
        drop((a, b, out, sum));
    }
    finish(&ctx);
}

/// Same source twice: one pipeline; another shape of the same form too (the
/// shape is in push constants). Another expression: another.
#[test]
fn pipeline_cache_reuses_pipelines() {
    let Some(ctx) = context() else { return };
    let before = ctx.stats().pipelines.created();
    let e = expr("x * y");
    let mut a = Buffer::new("a", ElemType::I32, &[16, 16]).unwrap();
    let mut b = Buffer::new("b", ElemType::I32, &[16, 16]).unwrap();
    let t = Instant::now();
    ctx.kernel_fill(&mut a, &e).unwrap();
    let first = t.elapsed();
    let t = Instant::now();
    ctx.kernel_fill(&mut b, &e).unwrap();
    let second = t.elapsed();
    assert_eq!(ctx.stats().pipelines.created(), before + 1);
    assert_eq!(ctx.stats().shader_modules.created(), before + 1);
    let k = ctx.pipeline_stats();
    assert_eq!((k.compiled, k.cache_hits, k.cached), (1, 1, 1));
    eprintln!(
        "first fill {first:?} (WGSL->SPIR-V {:?}, shader module + pipeline {:?}), cached {second:?}",
        k.to_spirv, k.pipeline_creation
    );
    let mut c = Buffer::new("c", ElemType::I32, &[16, 17]).unwrap();
    ctx.kernel_fill(&mut c, &e).unwrap();
    assert_eq!(ctx.stats().pipelines.created(), before + 1);
    ctx.kernel_fill(&mut a, &expr("x + y")).unwrap();
    assert_eq!(ctx.stats().pipelines.created(), before + 2);
    assert_eq!(ctx.stats().pipelines.live(), 2);
    assert_eq!(ctx.stats().pipeline_layouts.live(), 1);
    assert_eq!(ctx.stats().descriptor_pools.live(), 0);
    assert_eq!(ctx.stats().descriptor_pools.created(), 4);
    drop((a, b, c));
    // The cache is not a leak; releasing it destroys everything.
    finish(&ctx);
    ctx.release_pipelines();
    assert_eq!(ctx.stats().pipelines.live(), 0);
    assert_eq!(ctx.stats().shader_modules.live(), 0);
    assert_eq!(ctx.stats().pipeline_layouts.live(), 0);
    assert_eq!(ctx.stats().descriptor_set_layouts.live(), 0);
    assert_eq!(ctx.pipeline_stats().cached, 0);
    // And kernels compile again afterwards.
    let mut d = Buffer::new("d", ElemType::I32, &[16, 16]).unwrap();
    ctx.kernel_fill(&mut d, &e).unwrap();
    ctx.copy_to_host(&mut d).unwrap();
    check(&d, |c| c[0] * c[1]);
    drop(d);
    finish(&ctx);
}

#[test]
fn shapes_that_do_not_fit_are_errors() {
    let Some(ctx) = context() else { return };
    let mut out = Buffer::new("out", ElemType::I32, &[8, 8]).unwrap();
    let mut small = Buffer::new("small", ElemType::I32, &[8, 7]).unwrap();
    let mut flat = Buffer::new("flat", ElemType::I32, &[64]).unwrap();
    let mut other = Buffer::new("other", ElemType::F32, &[8, 8]).unwrap();
    let name = |r: vkcopy::Result<()>| r.unwrap_err().name();
    assert_eq!(
        name(ctx.kernel_add(&mut out, &mut [&mut small], 0)),
        "incompatible_buffers"
    );
    assert_eq!(
        name(ctx.kernel_add(&mut out, &mut [&mut flat], 0)),
        "incompatible_buffers"
    );
    assert_eq!(
        name(ctx.kernel_add(&mut out, &mut [&mut other], 0)),
        "incompatible_buffers"
    );
    let mut cube = Buffer::new("cube", ElemType::I32, &[8, 8, 8]).unwrap();
    assert_eq!(
        name(ctx.kernel_sum(&mut out, &mut cube, 3)),
        "bad_dimensions"
    );
    assert_eq!(
        name(ctx.kernel_sum(&mut flat, &mut cube, 1)),
        "incompatible_buffers"
    );
    let mut wide = Buffer::new("wide", ElemType::I32, &[9, 8]).unwrap();
    assert_eq!(
        name(ctx.kernel_sum(&mut wide, &mut cube, 2)),
        "incompatible_buffers"
    );
    // Nothing was allocated or marked by the failed calls.
    assert!(!out.has_device_allocation() && !out.device_dirty());
    // A buffer without host memory that is host-dirty cannot be uploaded.
    let mut nohost = Buffer::with_dims(
        "nohost",
        ElemType::I32,
        vec![Dim {
            min: 0,
            extent: 4,
            stride: 1,
        }],
        false,
    )
    .unwrap();
    nohost.set_host_dirty(true);
    assert_eq!(
        name(ctx.kernel_add(&mut nohost, &mut [], 1)),
        "host_is_null"
    );
    // Empty buffers: nothing runs, the flags follow the pipeline semantics.
    let mut empty = Buffer::new("empty", ElemType::I32, &[0, 4]).unwrap();
    ctx.kernel_fill(&mut empty, &expr("x")).unwrap();
    assert!(empty.device_dirty());
    let err = Error::UnsupportedType {
        elem: ElemType::F64,
        missing_feature: "shaderFloat64",
    };
    assert_eq!(err.name(), "unsupported_type");
    assert!(err.to_string().contains("shaderFloat64"), "{err}");
    drop((out, small, flat, other, cube, wide, nohost, empty));
    finish(&ctx);
}

/// A kernel output from another context is rejected.
#[test]
fn buffers_of_another_context_are_rejected() {
    let Some(ctx) = context() else { return };
    let Some(other) = context() else { return };
    let mut a = Buffer::new("a", ElemType::I32, &[4]).unwrap();
    other.device_malloc(&mut a).unwrap();
    assert_eq!(
        ctx.kernel_fill(&mut a, &expr("x")).unwrap_err().name(),
        "incompatible_buffers"
    );
    drop(a);
    finish(&ctx);
    finish(&other);
}

/// 140 fills of one expression through 140 distinct crops (offsets, extents
/// and mins all differ) and 140 maps over them compile two pipelines: the
/// shapes are push constants. Every crop holds its values.
#[test]
fn distinct_crops_share_one_pipeline() {
    let Some(ctx) = context() else { return };
    let mut parent = Buffer::new("parent", ElemType::I32, &[200, 20]).unwrap();
    parent.fill(|_| -1).unwrap();
    ctx.copy_to_device(&mut parent).unwrap();
    let before = ctx.pipeline_stats().compiled;
    let fill = expr("x + 1000 * y");
    let inc = Expr::parse_with("c + 1", &["c"]).unwrap();
    let crops: Vec<(i64, i64, i64)> = (0..140).map(|i| (i, 1 + i % 9, i % 13)).collect();
    for &(x0, w, y0) in &crops {
        let mut c = parent.cropped("c", &[x0, y0], &[w, 1 + (x0 % 5)]).unwrap();
        ctx.kernel_fill(&mut c, &fill).unwrap();
        ctx.kernel_map(&mut c, &mut [], &inc).unwrap();
        ctx.copy_to_host(&mut c).unwrap();
        check(&c, |p| p[0] + 1000 * p[1] + 1);
    }
    let k = ctx.pipeline_stats();
    assert_eq!(k.compiled - before, 2, "{k:?}");
    assert_eq!(k.dispatches, 280);
    drop(parent);
    finish(&ctx);
}
