//! Compute kernels written in WGSL, compiled by naga, run on the device.
//!
//! Four kernels, with Halide's pipeline semantics around them (inputs that are
//! host-dirty are uploaded first, the output gets device memory when it has
//! none, and ends device-dirty):
//!
//! - [`Kernels::kernel_fill`]: `out(c) = value(c)` for an [`Expr`] of the coordinates;
//! - [`Kernels::kernel_map`]: `out(c) = value(c, inputs(c))`, element-wise over
//!   any number of inputs of any element types (an in-place update included);
//! - [`Kernels::kernel_add`]: `out = sum(inputs) + constant`, or `out += constant`;
//! - [`Kernels::kernel_sum`]: `out = input` summed over one dimension.
//!
//! Each call generates WGSL (module `wgsl`) whose text depends on the kernel's
//! form only: element types, number of dimensions and inputs, the expression or
//! constant. The shape (extents, mins, each view's offset and strides) goes in
//! push constants ([`Context::launch_with`]), so one pipeline serves every crop
//! and view of one form; a shape of more than [`vkcopy::MAX_PUSH_WORDS`] words
//! (many dimensions and inputs) is written into the source instead. The source
//! is compiled with naga to SPIR-V 1.3 on first use and run through the
//! runtime's launch (the path of the caller's own shaders too:
//! [`Kernels::kernel_wgsl`]), whose pipeline cache is keyed by the source text.
//! Views are bound as [`Context::bind`] says; the shader adds the view's element offset.
//!
//! Element types: i32, u32, f32, and the 8/16-bit types everywhere (no device
//! feature needed); i64/u64 need `shaderInt64`, f64 needs `shaderFloat64`, else
//! [`Error::UnsupportedType`] names the missing feature. Values of a fill are
//! computed in `i32` and converted as a C cast does, so a fill whose values could
//! leave `i32` anywhere in the computation over the buffer's box is refused (the
//! host, which computes in `i64`, would give other values); an add or sum
//! computes in the element type (integers wrap, floats round).
//!
//! Inputs that overlap the output in memory at other coordinates give undefined
//! results, as in Halide. An output with a zero stride (several coordinates at
//! one element) ends with one of the values of a fill or sum; an in-place add
//! to it is undefined.
//!
//! Kernel calls are synchronous, as dispatches are; pipelines live in the
//! context's cache until [`Context::release_pipelines`] or the context goes.

use vkcopy::{box_text, Arg, Buffer, Context, Dim, ElemType, Error, Result, Shader};

use crate::compile::{capabilities, compile};
use crate::expr::Expr;
use crate::wgsl::{Body, Kernel, Operand, WORKGROUP_SIZE};

/// Most storage buffers one dispatch binds (output included). An add of more
/// inputs runs as several dispatches.
const MAX_BINDINGS: u32 = 8;

/// Compiles `source` (once per source text, in the context's pipeline cache) and
/// launches it over `args` in `groups` workgroups.
fn launch_wgsl(
    ctx: &Context,
    source: &str,
    args: &mut [Arg<'_>],
    groups: u64,
    push_constants: &[u32],
) -> Result<()> {
    let caps = capabilities(ctx);
    let spirv = move || compile(source, caps);
    ctx.launch_with(
        Shader {
            key: source,
            spirv: &spirv,
        },
        args,
        groups,
        push_constants,
    )
}

/// A generated kernel over `args`, one invocation per element.
fn run(ctx: &Context, kernel: &Kernel<'_>, args: &mut [Arg<'_>]) -> Result<()> {
    if let Some(why) = kernel.index_overflow() {
        return Err(Error::BadDimensions(format!(
            "{}: {why}",
            args[0].buffer.name()
        )));
    }
    launch_wgsl(
        ctx,
        &kernel.source(),
        args,
        kernel.elements().div_ceil(u64::from(WORKGROUP_SIZE)),
        &kernel.push_constants(),
    )
}

/// An output no kernel ran on (no elements) ends as if one had.
fn written(out: &mut Buffer) {
    out.set_host_dirty(false);
    out.set_device_dirty(true);
}

/// The built-in kernels, on a [`Context`].
pub trait Kernels {
    /// Errors when the device cannot run kernels on `elem`.
    fn kernel_supports(&self, elem: ElemType) -> Result<()>;
    /// `out(c) = value(c)` for every element `c` of `out`'s box, written through its
    /// strides and view offset; `value` must pass [`Expr::check_wgsl`]. Allocates device memory when `out` has none; `out`
    /// ends device-dirty and not host-dirty.
    fn kernel_fill(&self, out: &mut Buffer, value: &Expr) -> Result<()>;
    /// `out(c) = value(c, inputs(c))` for every element `c` of `out`'s box:
    /// `value`'s input `j` ([`Expr::parse_with`]) is `inputs[j]` read at the same
    /// coordinates, and input `inputs.len()` is `out`'s own element before it is
    /// written (an in-place update). Inputs have any element type and `out`'s
    /// dimensions, contain its box, and are at most [`Context::max_bindings`] - 1;
    /// each element is converted to `i32` as a C cast does, and the value is
    /// computed and converted as a fill's. Host-dirty inputs (and `out`, when
    /// read) are uploaded first.
    fn kernel_map(&self, out: &mut Buffer, inputs: &mut [&mut Buffer], value: &Expr) -> Result<()>;
    /// `out = sum(inputs) + constant`, element-wise over `out`'s box; each input is
    /// read at the same coordinates and must contain `out`'s box and have its
    /// element type. With no inputs, `out = out + constant` in place (uploading
    /// `out` first when it is host-dirty). The arithmetic is the element type's.
    fn kernel_add(&self, out: &mut Buffer, inputs: &mut [&mut Buffer], constant: i64)
        -> Result<()>;
    /// `out(c without dim) = sum over k of input(c with dim = k)`, k over the whole
    /// extent of `input`'s dimension `dim`. `out` has `input`'s dimensions without
    /// `dim`, its element type, and a box inside `input`'s in those dimensions.
    fn kernel_sum(&self, out: &mut Buffer, input: &mut Buffer, dim: usize) -> Result<()>;
    /// Runs the caller's WGSL compute shader over `args` in `groups` workgroups, as
    /// [`Context::launch`] does (uploads, bindings, barriers, dirty bits): entry
    /// point `main`, `var<storage>` bindings `0..n` of group 0 in the order of
    /// `args`. Compiled by naga once per source text.
    fn kernel_wgsl(&self, source: &str, args: &mut [Arg<'_>], groups: u64) -> Result<()>;
}

/// Whether `outer`'s box contains `inner`'s, dimension by dimension.
fn contains(outer: &[Dim], inner: &[Dim]) -> bool {
    outer
        .iter()
        .zip(inner)
        .all(|(o, i)| o.min <= i.min && i.min + i.extent <= o.min + o.extent)
}

/// Errors unless `input` has `out`'s dimensions and contains its box (of `n` elements).
fn fits(out: &Buffer, input: &Buffer, n: u64, what: &str) -> Result<()> {
    if input.dimensions() != out.dimensions() {
        return Err(Error::IncompatibleBuffers(format!(
            "{what}: input {} has {} dimensions, output {} has {}",
            input.name(),
            input.dimensions(),
            out.name(),
            out.dimensions()
        )));
    }
    if n > 0 && !contains(input.dims(), out.dims()) {
        return Err(Error::IncompatibleBuffers(format!(
            "{what}: input {} {} does not contain the box of output {} {}",
            input.name(),
            box_text(input.dims()),
            out.name(),
            box_text(out.dims())
        )));
    }
    Ok(())
}

/// How a kernel over `out`'s box addresses `input` (with device memory): its
/// element at `out`'s mins, and its strides.
fn operand(ctx: &Context, input: &Buffer, out: &Buffer) -> Result<Operand> {
    let b = ctx.bind(input)?;
    let delta: u64 = input
        .dims()
        .iter()
        .zip(out.dims())
        .map(|(i, o)| (o.min - i.min) as u64 * i.stride as u64)
        .sum();
    Ok(Operand {
        base: b.base + delta,
        strides: input.dims().iter().map(|d| d.stride as u64).collect(),
    })
}

fn elements(buf: &Buffer) -> Result<u64> {
    let n = buf.len();
    if n > u64::from(u32::MAX) {
        return Err(Error::BadDimensions(format!(
            "{}: {n} elements; kernels run over at most 2^32 - 1",
            buf.name()
        )));
    }
    Ok(n)
}

impl Kernels for Context {
    fn kernel_wgsl(&self, source: &str, args: &mut [Arg<'_>], groups: u64) -> Result<()> {
        launch_wgsl(self, source, args, groups, &[])
    }

    fn kernel_supports(&self, elem: ElemType) -> Result<()> {
        let needed = match elem {
            ElemType::I64 | ElemType::U64 => "shaderInt64",
            ElemType::F64 => "shaderFloat64",
            _ => return Ok(()),
        };
        if self.info().has(needed) {
            Ok(())
        } else {
            Err(Error::UnsupportedType {
                elem,
                missing_feature: needed,
            })
        }
    }

    fn kernel_fill(&self, out: &mut Buffer, value: &Expr) -> Result<()> {
        self.kernel_supports(out.elem())?;
        value.check_wgsl().map_err(|why| {
            Error::KernelCompileFailed(format!("{}: the value {why}", out.name()))
        })?;
        let n = elements(out)?;
        if n > 0 {
            let boxes: Vec<(i64, i64)> = out
                .dims()
                .iter()
                .map(|d| (d.min, d.min + d.extent - 1))
                .collect();
            value.fits_i32(&boxes).map_err(|why| {
                Error::KernelCompileFailed(format!("{}: the value {why}", out.name()))
            })?;
        }
        self.device_malloc(out)?;
        if n > 0 {
            let bound = self.bind(out)?;
            let kernel = Kernel {
                elem: out.elem(),
                extents: out.dims().iter().map(|d| d.extent as u64).collect(),
                out: Operand {
                    base: bound.base,
                    strides: out.dims().iter().map(|d| d.stride as u64).collect(),
                },
                body: Body::Fill {
                    value,
                    mins: out.dims().iter().map(|d| d.min).collect(),
                },
            };
            run(self, &kernel, &mut [Arg::write(out)])?;
        } else {
            written(out);
        }
        Ok(())
    }

    fn kernel_map(&self, out: &mut Buffer, inputs: &mut [&mut Buffer], value: &Expr) -> Result<()> {
        self.kernel_supports(out.elem())?;
        for input in inputs.iter() {
            self.kernel_supports(input.elem())?;
        }
        value.check_wgsl().map_err(|why| {
            Error::KernelCompileFailed(format!("{}: the value {why}", out.name()))
        })?;
        let n = elements(out)?;
        let most = self.max_bindings().min(MAX_BINDINGS) as usize - 1;
        if inputs.len() > most {
            return Err(Error::IncompatibleBuffers(format!(
                "kernel_map: {} inputs; a map reads at most {most}",
                inputs.len()
            )));
        }
        for input in inputs.iter() {
            fits(out, input, n, "kernel_map")?;
        }
        for input in inputs.iter_mut() {
            self.copy_to_device(input)?;
        }
        let in_place = value.uses_input(inputs.len());
        if in_place {
            self.copy_to_device(out)?;
        } else {
            self.device_malloc(out)?;
        }
        if n == 0 {
            written(out);
            return Ok(());
        }
        let out_op = Operand {
            base: self.bind(out)?.base,
            strides: out.dims().iter().map(|d| d.stride as u64).collect(),
        };
        let mut operands = Vec::with_capacity(inputs.len());
        for input in inputs.iter() {
            operands.push(operand(self, input, out)?);
        }
        let kernel = Kernel {
            elem: out.elem(),
            extents: out.dims().iter().map(|d| d.extent as u64).collect(),
            out: out_op,
            body: Body::Map {
                value,
                inputs: operands,
                elems: inputs.iter().map(|b| b.elem()).collect(),
                mins: out.dims().iter().map(|d| d.min).collect(),
            },
        };
        let mut args = vec![if in_place {
            Arg::read_write(out)
        } else {
            Arg::write(out)
        }];
        args.extend(inputs.iter_mut().map(|b| Arg::read(b)));
        run(self, &kernel, &mut args)
    }

    fn kernel_add(
        &self,
        out: &mut Buffer,
        inputs: &mut [&mut Buffer],
        constant: i64,
    ) -> Result<()> {
        self.kernel_supports(out.elem())?;
        let n = elements(out)?;
        for input in inputs.iter() {
            if input.elem() != out.elem() {
                return Err(Error::IncompatibleBuffers(format!(
                    "kernel_add: input {} is {}, output {} is {}",
                    input.name(),
                    input.elem(),
                    out.name(),
                    out.elem()
                )));
            }
            fits(out, input, n, "kernel_add")?;
        }
        for input in inputs.iter_mut() {
            self.copy_to_device(input)?;
        }
        let in_place = inputs.is_empty();
        if in_place {
            self.copy_to_device(out)?;
        } else {
            self.device_malloc(out)?;
        }
        if n > 0 {
            let out_bound = self.bind(out)?;
            let extents: Vec<u64> = out.dims().iter().map(|d| d.extent as u64).collect();
            let out_op = Operand {
                base: out_bound.base,
                strides: out.dims().iter().map(|d| d.stride as u64).collect(),
            };
            let mut operands = Vec::with_capacity(inputs.len());
            for input in inputs.iter() {
                operands.push(operand(self, input, out)?);
            }
            let per_dispatch = (self.max_bindings().min(MAX_BINDINGS) - 1) as usize;
            let chunks = operands.len().div_ceil(per_dispatch).max(1);
            for i in 0..chunks {
                let range = (i * per_dispatch).min(operands.len())
                    ..((i + 1) * per_dispatch).min(operands.len());
                let kernel = Kernel {
                    elem: out.elem(),
                    extents: extents.clone(),
                    out: out_op.clone(),
                    body: Body::Add {
                        inputs: operands[range.clone()].to_vec(),
                        read_out: in_place || i > 0,
                        constant: if i == 0 { constant } else { 0 },
                    },
                };
                let mut args = vec![if in_place || i > 0 {
                    Arg::read_write(out)
                } else {
                    Arg::write(out)
                }];
                args.extend(inputs[range].iter_mut().map(|b| Arg::read(b)));
                run(self, &kernel, &mut args)?;
            }
        } else {
            written(out);
        }
        Ok(())
    }

    fn kernel_sum(&self, out: &mut Buffer, input: &mut Buffer, dim: usize) -> Result<()> {
        self.kernel_supports(out.elem())?;
        if dim >= input.dimensions() {
            return Err(Error::BadDimensions(format!(
                "kernel_sum: dimension {dim} of {}, which has {}",
                input.name(),
                input.dimensions()
            )));
        }
        if input.elem() != out.elem() {
            return Err(Error::IncompatibleBuffers(format!(
                "kernel_sum: input {} is {}, output {} is {}",
                input.name(),
                input.elem(),
                out.name(),
                out.elem()
            )));
        }
        let mut rest: Vec<Dim> = input.dims().to_vec();
        let reduced = rest.remove(dim);
        if out.dimensions() != rest.len() {
            return Err(Error::IncompatibleBuffers(format!(
                "kernel_sum: output {} has {} dimensions; the sum of {} over dimension {dim} has {}",
                out.name(),
                out.dimensions(),
                input.name(),
                rest.len()
            )));
        }
        let n = elements(out)?;
        if n > 0 && !contains(&rest, out.dims()) {
            return Err(Error::IncompatibleBuffers(format!(
                "kernel_sum: output {} {} is not inside {} without dimension {dim} {}",
                out.name(),
                box_text(out.dims()),
                input.name(),
                box_text(&rest)
            )));
        }
        if reduced.extent as u64 > u64::from(u32::MAX) {
            return Err(Error::BadDimensions(format!(
                "kernel_sum: dimension {dim} of {} has extent {}",
                input.name(),
                reduced.extent
            )));
        }
        self.copy_to_device(input)?;
        self.device_malloc(out)?;
        if n > 0 {
            let out_bound = self.bind(out)?;
            let in_bound = self.bind(input)?;
            let delta: u64 = rest
                .iter()
                .zip(out.dims())
                .map(|(i, o)| (o.min - i.min) as u64 * i.stride as u64)
                .sum();
            let kernel = Kernel {
                elem: out.elem(),
                extents: out.dims().iter().map(|d| d.extent as u64).collect(),
                out: Operand {
                    base: out_bound.base,
                    strides: out.dims().iter().map(|d| d.stride as u64).collect(),
                },
                body: Body::Sum {
                    input: Operand {
                        base: in_bound.base + delta,
                        strides: rest.iter().map(|d| d.stride as u64).collect(),
                    },
                    stride: reduced.stride as u64,
                    extent: reduced.extent as u64,
                },
            };
            run(self, &kernel, &mut [Arg::write(out), Arg::read(input)])?;
        } else {
            written(out);
        }
        Ok(())
    }
}
