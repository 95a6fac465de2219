"""A photo export as the seed's application runs it: 13 Halide Vulkan
pipelines over a 24-megapixel RAW frame, each output read back.

`python export.py OUT` writes export_NN.a/.h (host-vulkan-vk_v13-no_runtime)
for NN = 01..13; export.cpp runs them in order and times each export.
"""

import sys

import halide as hl

# Not `host`: the export runs on the lab machine, compiled here.
TARGET = hl.Target("x86-64-linux-sse41-vulkan-vk_v13-vk_int8-vk_int16-no_runtime")
x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")


def tile(f, dims=2):
    if dims == 3:
        f.reorder(c, x, y).bound(c, 0, 3).unroll(c)
    f.gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
    return f


def stencil_u16(name):
    """A 3x3 box filter of the mono frame (denoise)."""
    i = hl.ImageParam(hl.UInt(16), 2, "input")
    e = hl.BoundaryConditions.repeat_edge(i)
    f = hl.Func(name)
    s = sum(hl.u32(e[x + dx, y + dy]) for dx in (-1, 0, 1) for dy in (-1, 0, 1))
    f[x, y] = hl.u16(s / 9)
    return tile(f), [i]


def black_level(name):
    i = hl.ImageParam(hl.UInt(16), 2, "input")
    black = hl.Param(hl.UInt(16), "black")
    f = hl.Func(name)
    f[x, y] = hl.u16(hl.max(hl.i32(i[x, y]) - hl.i32(black), 0))
    return tile(f), [i, black]


def demosaic(name):
    """Mono to three channels from the 2x2 neighbourhood (a stand-in for a
    Bayer demosaic), as f32 in [0, 1]."""
    i = hl.ImageParam(hl.UInt(16), 2, "input")
    e = hl.BoundaryConditions.repeat_edge(i)
    f = hl.Func(name)
    v = [hl.f32(e[x + dx, y + dy]) / 65535.0 for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1))]
    f[x, y, c] = hl.select(c == 0, v[0], c == 1, (v[1] + v[2]) * 0.5, v[3])
    return tile(f, 3), [i]


def pointwise(name, body, params=()):
    i = hl.ImageParam(hl.Float(32), 3, "input")
    ps = [hl.Param(hl.Float(32), p) for p in params]
    f = hl.Func(name)
    f[x, y, c] = body(i, ps)
    return tile(f, 3), [i] + ps


def colour_matrix(name):
    i = hl.ImageParam(hl.Float(32), 3, "input")
    m = hl.ImageParam(hl.Float(32), 2, "matrix")
    f = hl.Func(name)
    f[x, y, c] = m[0, c] * i[x, y, 0] + m[1, c] * i[x, y, 1] + m[2, c] * i[x, y, 2]
    return tile(f, 3), [i, m]


def sharpen(name):
    i = hl.ImageParam(hl.Float(32), 3, "input")
    e = hl.BoundaryConditions.repeat_edge(i)
    blur_x, f = hl.Func("blur_x"), hl.Func(name)
    blur_x[x, y, c] = (e[x - 1, y, c] + e[x, y, c] + e[x + 1, y, c]) / 3
    blur = (blur_x[x, y - 1, c] + blur_x[x, y, c] + blur_x[x, y + 1, c]) / 3
    f[x, y, c] = e[x, y, c] + hl.f32(0.6) * (e[x, y, c] - blur)
    tile(f, 3)
    blur_x.compute_root().reorder(c, x, y).bound(c, 0, 3).gpu_tile(x, y, xo, yo, xi, yi, 16, 16)
    return f, [i]


def resize_half(name):
    i = hl.ImageParam(hl.Float(32), 3, "input")
    f = hl.Func(name)
    f[x, y, c] = (i[2 * x, 2 * y, c] + i[2 * x + 1, 2 * y, c] + i[2 * x, 2 * y + 1, c] + i[2 * x + 1, 2 * y + 1, c]) * 0.25
    return tile(f, 3), [i]


def to_u8(name):
    i = hl.ImageParam(hl.Float(32), 3, "input")
    f = hl.Func(name)
    f[x, y, c] = hl.u8(hl.clamp(i[x, y, c] * 255.0 + 0.5, 0, 255))
    return tile(f, 3), [i]


def vignette(name):
    i = hl.ImageParam(hl.UInt(8), 3, "input")
    w, h = hl.Param(hl.Float(32), "width"), hl.Param(hl.Float(32), "height")
    f = hl.Func(name)
    dx, dy = hl.f32(x) / w - 0.5, hl.f32(y) / h - 0.5
    g = 1.0 - 0.5 * (dx * dx + dy * dy)
    f[x, y, c] = hl.u8(hl.f32(i[x, y, c]) * g)
    return tile(f, 3), [i, w, h]


STAGES = [
    black_level,
    stencil_u16,
    demosaic,
    lambda n: pointwise(n, lambda i, p: i[x, y, c] * hl.select(c == 0, p[0], c == 1, 1.0, p[1]), ("red", "blue")),
    colour_matrix,
    lambda n: pointwise(n, lambda i, p: i[x, y, c] * p[0], ("exposure",)),
    lambda n: pointwise(n, lambda i, p: i[x, y, c] / (1.0 + i[x, y, c]), ()),
    lambda n: pointwise(n, lambda i, p: hl.pow(hl.max(i[x, y, c], 0.0), hl.f32(1.0 / 2.2)), ()),
    sharpen,
    lambda n: pointwise(
        n,
        lambda i, p: (i[x, y, 0] + i[x, y, 1] + i[x, y, 2]) / 3 * (1 - p[0]) + i[x, y, c] * p[0],
        ("saturation",),
    ),
    resize_half,
    to_u8,
    vignette,
]


def main():
    out = sys.argv[1]
    for n, make in enumerate(STAGES, 1):
        name = f"export_{n:02d}"
        f, args = make(name)
        f.compile_to_static_library(f"{out}/{name}", args, name, TARGET)


if __name__ == "__main__":
    main()
