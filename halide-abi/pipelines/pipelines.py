"""Halide pipelines that exercise a Vulkan runtime, compiled ahead of time.

`python pipelines.py OUT` writes, for each pipeline NAME, NAME_gpu.a/.h for
`host-vulkan-vk_v13-...-no_runtime` and NAME_cpu.a/.h for `host-no_runtime`.
check.cpp runs both and compares. Between them the pipelines cover several
kernels in one pipeline, shared memory, 1-, 2- and 3-D grids, 8-, 16-, 32- and
64-bit types, scalar arguments and an async copy; check.cpp adds device crops,
slices and halide_buffer_copy around them.
"""

import sys

import halide as hl

GPU = hl.Target(
    "host-vulkan-vk_v13-vk_int8-vk_int16-vk_int64-vk_float64-no_runtime"
)
CPU = hl.Target("host-no_runtime")

x, y, z, t = hl.Var("x"), hl.Var("y"), hl.Var("z"), hl.Var("t")
xo, yo, zo, xi, yi, zi = (hl.Var(n) for n in ("xo", "yo", "zo", "xi", "yi", "zi"))


def blur_u16(gpu):
    """Two kernels: a 3x3 box blur of u16 in two passes (2-D grids)."""
    inp = hl.ImageParam(hl.UInt(16), 2, "input")
    e = hl.BoundaryConditions.repeat_edge(inp)
    bx, out = hl.Func("bx"), hl.Func("blur_u16")
    bx[x, y] = (
        hl.u32(e[x - 1, y]) + hl.u32(e[x, y]) + hl.u32(e[x + 1, y])
    )
    out[x, y] = hl.u16((bx[x, y - 1] + bx[x, y] + bx[x, y + 1]) / 9)
    if gpu:
        bx.compute_root().gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
        out.gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
    return out, [inp]


def tile_sum_i8(gpu):
    """Shared memory: an i8 stage computed per block, summed in i32."""
    inp = hl.ImageParam(hl.Int(8), 2, "input")
    e = hl.BoundaryConditions.constant_exterior(inp, 0)
    w, out = hl.Func("widened"), hl.Func("tile_sum_i8")
    w[x, y] = hl.i32(e[x, y]) * 3
    out[x, y] = w[x, y] + w[x + 1, y] + w[x, y + 1] + w[x + 1, y + 1]
    if gpu:
        out.gpu_tile(x, y, xo, yo, xi, yi, 8, 8)
        w.compute_at(out, xo).gpu_threads(x, y)
    return out, [inp]


def volume_i64(gpu):
    """A 3-D grid over 64-bit integers."""
    inp = hl.ImageParam(hl.Int(64), 3, "input")
    out = hl.Func("volume_i64")
    out[x, y, z] = inp[x, y, z] * 3 + hl.i64(z) * (hl.i64(1) << 40) - x
    if gpu:
        out.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 4, 4, 4)
    return out, [inp]


def gain_f32(gpu):
    """A 1-D grid with scalar arguments (a float and an int)."""
    inp = hl.ImageParam(hl.Float(32), 1, "input")
    gain, offset = hl.Param(hl.Float(32), "gain"), hl.Param(hl.Int(32), "offset")
    out = hl.Func("gain_f32")
    out[x] = inp[x] * gain + hl.f32(offset)
    if gpu:
        out.gpu_tile(x, xo, xi, 64)
    return out, [inp, gain, offset]


def mix_f64(gpu):
    """64-bit floats from 16-bit integers."""
    inp = hl.ImageParam(hl.UInt(16), 2, "input")
    out = hl.Func("mix_f64")
    out[x, y] = hl.f64(inp[x, y]) * 0.5 + hl.f64(y) * 0.25
    if gpu:
        out.gpu_tile(x, y, xo, yo, xi, yi, 16, 8)
    return out, [inp]


def async_frames(gpu):
    """Frames made on the device and read back asynchronously, double-buffered,
    while the CPU sums them (Halide's async_device_copy)."""
    inp = hl.ImageParam(hl.Int(32), 2, "input")
    r = hl.RDom([(0, 8)])
    frames, out = hl.Func("frames"), hl.Func("async_frames")
    frames[x, y, t] = inp[x, y] * (t + 1) + t
    out[x, y] = 0
    out[x, y] += frames[x, y, r]
    if gpu:
        out.compute_root().update().reorder(x, y, r.x)
        frames.store_root().compute_at(frames.in_(), hl.Var.outermost()).gpu_tile(
            x, y, xo, yo, xi, yi, 16, 16
        )
        frames.in_().store_root().compute_at(out, r.x).copy_to_host().fold_storage(
            t, 2
        ).async_()
    return out, [inp]


PIPELINES = [blur_u16, tile_sum_i8, volume_i64, gain_f32, mix_f64, async_frames]


def main():
    out_dir = sys.argv[1]
    for make in PIPELINES:
        for gpu, target, suffix in ((True, GPU, "gpu"), (False, CPU, "cpu")):
            f, args = make(gpu)
            name = f"{make.__name__}_{suffix}"
            f.compile_to_static_library(f"{out_dir}/{name}", args, name, target)


if __name__ == "__main__":
    main()
