//! The map kernel on the real default device (lavapipe in CI), with the
//! validation layer when it is installed: the device agrees with the host's
//! evaluation of the same expression on the same random inputs, for every
//! element type, through crops, strided views and in place.

use vkcopy::types::Dim;
use vkcopy::{Buffer, Context, ContextOptions, ElemType, Value};
use vkcopy_kernels::expr::Expr;
use vkcopy_kernels::Kernels;

#[path = "../../allocator/tests/common/mod.rs"]
mod common;

use common::assert_clean as finish;

fn context() -> Option<Context> {
    common::context(ContextOptions {
        validation: common::validation_installed(),
        ..Default::default()
    })
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Fills `buf`'s host memory with random values: any bits for integers,
/// values within +-2^20 with fractions for floats (so truncation shows).
fn randomize(buf: &mut Buffer, rng: &mut Rng) {
    match buf.elem() {
        ElemType::F32 => {
            let mut h = buf.host_mut::<f32>().unwrap();
            for v in h.iter_mut() {
                *v = (rng.next() % (1 << 21)) as f32 / 2.0 - (1 << 20) as f32 + 0.75;
            }
        }
        ElemType::F64 => {
            let mut h = buf.host_mut::<f64>().unwrap();
            for v in h.iter_mut() {
                *v = (rng.next() % (1 << 24)) as f64 / 8.0 - (1 << 20) as f64 - 0.625;
            }
        }
        _ => buf.fill(|_| rng.next() as i64).unwrap(),
    }
    buf.set_host_dirty(true);
}

/// An element as a map's operand: converted to `i32` as a C cast does.
fn operand(buf: &Buffer, at: &[i64]) -> i64 {
    match buf.get(at).unwrap() {
        Value::Int(v) => i64::from(v as i32),
        Value::Float(f) => i64::from(f as i32),
    }
}

/// Asserts that `out` (on the host) holds `value` computed in `i32` from
/// `inputs` (and `before`, `out`'s old contents, when given) at each element.
fn check_map(out: &Buffer, value: &Expr, inputs: &[&Buffer], before: Option<&Buffer>) {
    let c = out
        .compare(
            |c| {
                let mut vals: Vec<i64> = inputs.iter().map(|b| operand(b, c)).collect();
                if let Some(b) = before {
                    vals.push(operand(b, c));
                }
                i64::from(value.eval_with(c, &vals) as i32)
            },
            5,
        )
        .unwrap();
    assert_eq!(
        c.mismatches,
        0,
        "{} ({}): {} mismatches of {value}, first {:?}",
        out.name(),
        out.elem(),
        c.mismatches,
        c.first
    );
}

/// Every output type from inputs of every type (through crops at odd
/// offsets), on random values: the device and the host agree.
#[test]
fn map_agrees_with_the_host_on_random_inputs() {
    let Some(ctx) = context() else { return };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let value = Expr::parse_with(
        "min(max(a, -100), 100) + b * 3 - x / 2 + (y if a < b else b % 7) + abs(c)",
        &["a", "b", "c"],
    )
    .unwrap();
    let mut ran = 0;
    for (k, out_elem) in ElemType::ALL.into_iter().enumerate() {
        let a_elem = ElemType::ALL[(k + 3) % ElemType::ALL.len()];
        let b_elem = ElemType::ALL[(k + 7) % ElemType::ALL.len()];
        let types = [out_elem, a_elem, b_elem, ElemType::I8];
        if let Some(e) = types.iter().find_map(|&t| ctx.kernel_supports(t).err()) {
            assert_eq!(e.name(), "unsupported_type");
            eprintln!("skipping {types:?}: {e}");
            continue;
        }
        let mut pa = Buffer::new("pa", a_elem, &[13, 9]).unwrap();
        let mut pb = Buffer::new("pb", b_elem, &[11, 8]).unwrap();
        let mut pc = Buffer::new("pc", ElemType::I8, &[13, 9]).unwrap();
        randomize(&mut pa, &mut rng);
        randomize(&mut pb, &mut rng);
        randomize(&mut pc, &mut rng);
        let mut a = pa.cropped("a", &[1, 1], &[9, 7]).unwrap();
        let mut b = pb.cropped("b", &[1, 1], &[10, 7]).unwrap();
        let mut c = pc.cropped("c", &[3, 2], &[7, 6]).unwrap();
        let mut out = Buffer::with_dims(
            "out",
            out_elem,
            vec![
                Dim {
                    min: 3,
                    extent: 7,
                    stride: 1,
                },
                Dim {
                    min: 2,
                    extent: 5,
                    stride: 7,
                },
            ],
            true,
        )
        .unwrap();
        ctx.kernel_map(&mut out, &mut [&mut a, &mut b, &mut c], &value)
            .unwrap();
        assert!(out.device_dirty() && !out.host_dirty());
        assert!(!a.host_dirty());
        ctx.copy_to_host(&mut out).unwrap();
        check_map(&out, &value, &[&a, &b, &c], None);
        ran += 1;
        drop((a, b, c, pa, pb, pc, out));
    }
    assert!(ran >= 6, "{ran} element types ran");
    finish(&ctx);
}

/// `out = out + k` in place through a strided view (every other element of a
/// row), for 8-bit elements that share words with elements it must not touch;
/// and `g = clamp(f, 20, 100)` from a fill, as Halide's gpu_large_alloc.
#[test]
fn map_in_place_through_a_strided_view() {
    let Some(ctx) = context() else { return };
    let mut rng = Rng(7);
    for elem in [ElemType::U8, ElemType::I32, ElemType::I16, ElemType::F32] {
        let mut parent = Buffer::new("parent", elem, &[64, 3]).unwrap();
        // Whole values, so that the elements left alone compare exactly.
        parent
            .fill(|_| (rng.next() % 100_000) as i64 - 50_000)
            .unwrap();
        ctx.copy_to_device(&mut parent).unwrap();
        let mut before = Buffer::new("before", elem, &[64, 3]).unwrap();
        ctx.copy_to_host(&mut parent).unwrap();
        before.fill(|c| operand(&parent, c)).unwrap();
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
        let mut odd = parent.view_at("odd", dims.clone(), 1).unwrap();
        let value = Expr::parse_with("odd * 2 + x - y", &["odd"]).unwrap();
        ctx.kernel_map(&mut odd, &mut [], &value).unwrap();
        parent.set_device_dirty(true);
        ctx.copy_to_host(&mut parent).unwrap();
        let expected = |c: &[i64]| {
            let old = operand(&before, c);
            if c[0] % 2 == 1 {
                i64::from(value.eval_with(&[c[0] / 2, c[1]], &[old]) as i32)
            } else {
                old
            }
        };
        let cmp = parent.compare(expected, 5).unwrap();
        assert_eq!(cmp.mismatches, 0, "{elem}: {:?}", cmp.first);
        drop((odd, parent, before));
    }

    let mut f = Buffer::new("f", ElemType::I32, &[300, 200]).unwrap();
    ctx.kernel_fill(&mut f, &Expr::parse("max(x, y)").unwrap())
        .unwrap();
    let mut g = Buffer::new("g", ElemType::I32, &[300, 200]).unwrap();
    let clamp = Expr::parse_with("clamp(f, 20, 100)", &["f"]).unwrap();
    ctx.kernel_map(&mut g, &mut [&mut f], &clamp).unwrap();
    ctx.copy_to_host(&mut g).unwrap();
    let c = g.compare(|c| c[0].max(c[1]).clamp(20, 100), 5).unwrap();
    assert_eq!(c.mismatches, 0, "{:?}", c.first);
    drop((f, g));
    finish(&ctx);
}

/// Inputs that do not fit the output are errors, and so are more inputs than
/// a dispatch binds; nothing is left behind.
#[test]
fn map_errors() {
    let Some(ctx) = context() else { return };
    let mut out = Buffer::new("out", ElemType::I32, &[8, 8]).unwrap();
    let mut small = Buffer::new("small", ElemType::I32, &[8, 7]).unwrap();
    let mut flat = Buffer::new("flat", ElemType::I32, &[64]).unwrap();
    let v = Expr::parse_with("s", &["s"]).unwrap();
    let e = ctx.kernel_map(&mut out, &mut [&mut small], &v).unwrap_err();
    assert_eq!(
        e.to_string(),
        "incompatible_buffers: kernel_map: input small [0..8, 0..7] does not contain the box of output out [0..8, 0..8]"
    );
    let e = ctx.kernel_map(&mut out, &mut [&mut flat], &v).unwrap_err();
    assert_eq!(
        e.to_string(),
        "incompatible_buffers: kernel_map: input flat has 1 dimensions, output out has 2"
    );
    let mut many: Vec<Buffer> = (0..ctx.max_bindings())
        .map(|i| Buffer::new(&format!("i{i}"), ElemType::I32, &[8, 8]).unwrap())
        .collect();
    let mut refs: Vec<&mut Buffer> = many.iter_mut().collect();
    let e = ctx.kernel_map(&mut out, &mut refs, &v).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "incompatible_buffers: kernel_map: {} inputs; a map reads at most {}",
            ctx.max_bindings(),
            ctx.max_bindings() - 1
        )
    );
    assert!(!out.has_device_allocation());
    drop((out, small, flat, many));
    finish(&ctx);
}

/// Seven inputs over four dimensions: a shape of 48 words, more than the push
/// constants hold, so it is written into the source; the values still agree
/// with the host, and a second shape of this form is a second pipeline.
#[test]
fn map_whose_shape_is_too_large_for_push_constants() {
    let Some(ctx) = context() else { return };
    let most = ctx.max_bindings() as usize - 1;
    if most < 7 {
        eprintln!("skipping: a dispatch binds {} buffers", most + 1);
        return;
    }
    let mut rng = Rng(99);
    let names: Vec<String> = (0..7).map(|j| format!("i{j}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let value =
        Expr::parse_with("i0 - i1 + i2 * 2 + max(i3, i4) + i5 % 5 + i6 + w", &refs).unwrap();
    let before = ctx.pipeline_stats().compiled;
    for extents in [[3i64, 2, 2, 2], [2, 3, 2, 2]] {
        let mut ins: Vec<Buffer> = (0..7)
            .map(|j| {
                let elem = [ElemType::I32, ElemType::U8, ElemType::I16][j % 3];
                let mut b = Buffer::new(&names[j], elem, &extents).unwrap();
                randomize(&mut b, &mut rng);
                b
            })
            .collect();
        let mut out = Buffer::new("out", ElemType::I32, &extents).unwrap();
        let mut refs: Vec<&mut Buffer> = ins.iter_mut().collect();
        ctx.kernel_map(&mut out, &mut refs, &value).unwrap();
        ctx.copy_to_host(&mut out).unwrap();
        let inputs: Vec<&Buffer> = ins.iter().collect();
        check_map(&out, &value, &inputs, None);
    }
    assert_eq!(ctx.pipeline_stats().compiled - before, 2);
    finish(&ctx);
}
