//! A 2-D f32 image from the caller's own `Vec`: upload, a custom WGSL kernel on a
//! crop, a device-to-device copy of the crop into a new buffer, readback of the
//! parent (which knows the crop wrote its device memory), and a leak check.
//!
//! `cargo run --example image_round_trip [-- WIDTH HEIGHT]`

use vkcopy::{Arg, Buffer, Context, ContextOptions};
use vkcopy_kernels::Kernels;

/// `img[at] = 2 * img[at] + 1` over a `w` x `h` box whose element at its mins is
/// element `base` of the binding, rows `stride` elements apart.
fn scale_source(base: u64, stride: i64, w: i64, h: i64) -> String {
    format!(
        "@group(0) @binding(0) var<storage, read_write> img: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
    var i = gid.x;
    loop {{
        if i >= {n}u {{ break; }}
        let at = {base}u + i % {w}u + (i / {w}u) * {stride}u;
        img[at] = 2.0 * img[at] + 1.0;
        i = i + nwg.x * 64u;
    }}
}}
",
        n = w * h
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<i64> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let (w, h) = (
        args.first().copied().unwrap_or(256),
        args.get(1).copied().unwrap_or(128),
    );
    let ctx = Context::new(ContextOptions::from_env()?)?;

    // The caller's pixels become the buffer's host memory, without a copy.
    let pixels: Vec<f32> = (0..w * h).map(|i| i as f32).collect();
    let mut img = Buffer::from_vec("img", &[w, h], pixels)?; // host-dirty
    ctx.copy_to_device(&mut img)?;

    // A crop shares the image's memory; the kernel adds the crop's offset.
    let (cx, cy, cw, ch) = (w / 4, h / 4, w / 2, h / 2);
    let mut crop = img.cropped("crop", &[cx, cy], &[cw, ch])?;
    let base = ctx.bind(&crop)?.base;
    let source = scale_source(base, crop.dims()[1].stride, cw, ch);
    let groups = (cw * ch) as u64 / 64 + 1;
    ctx.kernel_wgsl(&source, &mut [Arg::read_write(&mut crop)], groups)?;

    // Device to device: a new buffer of the crop's shape (same mins), no host.
    let mut copy = ctx.copy_to_new(&crop, "copy", true)?;

    // The parent knows its device side is newer: this reads the device.
    ctx.copy_to_host(&mut img)?;
    let px = img.host::<f32>()?;
    let at = |x: i64, y: i64| (x + y * w) as usize;
    assert_eq!(px[at(0, 0)], 0.0);
    assert_eq!(px[at(cx, cy)], 2.0 * at(cx, cy) as f32 + 1.0);
    assert_eq!(px[at(cx + cw, cy)], at(cx + cw, cy) as f32);
    drop(px);

    // The copy, read back: element (x, y) of the crop at its own offset.
    ctx.device_and_host_malloc(&mut copy)?;
    ctx.copy_to_host(&mut copy)?;
    let c = copy.host::<f32>()?;
    let off = copy.offset_of(&[cx + 1, cy + 2]).expect("inside the copy") as usize;
    assert_eq!(c[off], 2.0 * at(cx + 1, cy + 2) as f32 + 1.0);
    drop(c);

    drop((crop, copy, img));
    let messages = ctx.take_validation_messages();
    let report = ctx.close();
    println!("{w}x{h} image, {cw}x{ch} crop: ok; {report}");
    if !report.is_empty() || !messages.is_empty() {
        return Err(format!("{report}; validation: {messages:?}").into());
    }
    Ok(())
}
