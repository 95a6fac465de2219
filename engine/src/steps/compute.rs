//! Compute steps: the same fills and adds on the host (as a CPU stage of a
//! Halide pipeline) and on the device (WGSL kernels), a device map (Halide's
//! `out(x, y) = f(in(x, y), ...)`) and a device sum. Every kernel call of the
//! suite is in this module.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::rt::{box_text, Buffer, Dim, ElemType, Error, Expr, Value};
use crate::runtime::StepError;
use crate::runtime::{Capability, DeviceKernel, Runtime};
use crate::steps::planner::{Planner, Slot};

/// The compute steps as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "ComputeStep")]
pub enum Step {
    /// Writes `value` (an expression of the coordinates) on the host; sets `host_dirty`.
    FillHost {
        /// The buffer or view written; it needs host memory.
        buffer: String,
        /// An expression of the coordinates, converted to the element type.
        value: String,
    },
    /// Computes `value` on the device, through `buffer`'s strides and view offset;
    /// sets `device_dirty`.
    FillDevice {
        /// The buffer or view written.
        buffer: String,
        /// An expression of the coordinates, converted to the element type.
        value: String,
    },
    /// `out = inputs[0] + inputs[1] + ... + value` element-wise on the host, at
    /// `out`'s coordinates (inputs may alias `out`); `out += value` without
    /// inputs. A device-dirty input is an error (its host data is stale).
    AddHost(Add),
    /// The same on the device; `value` must be a constant. Host-dirty inputs are
    /// uploaded first.
    AddDevice(Add),
    /// `out = value` element-wise on the device, where `value` is an expression
    /// of the coordinates and of the elements of `inputs` (by buffer name) and of
    /// `out` itself (its value before; an in-place update) at the same
    /// coordinates. Each element is converted to `i32` as a C cast does; the value
    /// is computed and converted as `fill_device`'s. Host-dirty inputs are
    /// uploaded first.
    MapDevice(Map),
    /// `out` = `input` summed over dimension `dim` (`out` has one dimension less).
    SumDevice {
        /// The buffer written: `input`'s shape without dimension `dim`.
        out: String,
        /// The buffer summed.
        input: String,
        /// The dimension summed over.
        dim: usize,
    },
}

/// The fields of `add_host` and `add_device`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Add {
    /// The buffer written.
    out: String,
    /// The buffers added, element-wise at `out`'s coordinates; default none.
    #[serde(default)]
    inputs: Vec<String>,
    /// An expression added to every element.
    #[serde(default)]
    value: Option<String>,
}

/// The fields of `map_device`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Map {
    /// The buffer written.
    out: String,
    /// The buffers read, of any element type, each with `out`'s dimensions and
    /// containing its box; at most 7 (a dispatch binds 8 buffers). Default none.
    #[serde(default)]
    inputs: Vec<String>,
    /// An expression of the coordinates, of the inputs' names and of `out`'s name.
    value: String,
}

/// Inputs a map reads: a dispatch binds at most 8 buffers, the output one of them.
const MAX_MAP_INPUTS: usize = 7;

/// A checked compute step; buffers are slots.
#[derive(Clone, Debug)]
pub enum Op {
    FillHost {
        buffer: usize,
        value: Expr,
    },
    FillDevice {
        buffer: usize,
        value: Expr,
    },
    AddHost {
        out: usize,
        inputs: Vec<usize>,
        value: Option<Expr>,
    },
    AddDevice {
        out: usize,
        inputs: Vec<usize>,
        constant: i64,
    },
    MapDevice {
        out: usize,
        inputs: Vec<usize>,
        value: Expr,
    },
    SumDevice {
        out: usize,
        input: usize,
        dim: usize,
    },
}

impl Op {
    /// The slots a device kernel writes or reads, to check support before running.
    pub fn kernel_slots(&self) -> Vec<usize> {
        match self {
            Op::FillHost { .. } | Op::AddHost { .. } => Vec::new(),
            Op::FillDevice { buffer, .. } => vec![*buffer],
            Op::AddDevice { out, inputs, .. } | Op::MapDevice { out, inputs, .. } => {
                std::iter::once(*out).chain(inputs.clone()).collect()
            }
            Op::SumDevice { out, input, .. } => vec![*out, *input],
        }
    }
}

pub fn plan(step: &Step, p: &mut Planner) -> Result<Op, CaseError> {
    Ok(match step {
        Step::FillHost { buffer, value } => {
            let b = p.buf(buffer)?;
            p.needs_host(b, "buffer")?;
            Op::FillHost {
                buffer: b,
                value: p.value("value", b, value)?,
            }
        }
        Step::FillDevice { buffer, value } => {
            let b = p.buf(buffer)?;
            let value = p.value("value", b, value)?;
            if !p.expecting_error {
                kernel_size(p, b, "buffer")?;
                value
                    .check_wgsl()
                    .map_err(|e| p.err(format!("field value: the expression {e}")))?;
            }
            Op::FillDevice { buffer: b, value }
        }
        Step::AddHost(add) => {
            let (out, inputs, value) = plan_add(add, p, true)?;
            Op::AddHost { out, inputs, value }
        }
        Step::AddDevice(add) => {
            let (out, inputs, value) = plan_add(add, p, false)?;
            let constant = match &value {
                None => 0,
                Some(v) => v.is_constant().ok_or_else(|| {
                    p.err(format!(
                        "field value: '{}': the device adds a constant only; fill a buffer with the expression and add it as an input",
                        add.value.as_deref().unwrap_or("")
                    ))
                })?,
            };
            if !p.expecting_error {
                check_add_device(p, out, &inputs)?;
            }
            Op::AddDevice {
                out,
                inputs,
                constant,
            }
        }
        Step::MapDevice(map) => plan_map(map, p)?,
        Step::SumDevice { out, input, dim } => {
            let (o, i) = (p.buf(out)?, p.buf(input)?);
            if i == o {
                return Err(p.err("input and output are the same buffer"));
            }
            if !p.expecting_error {
                check_sum(p, o, i, *dim)?;
            }
            Op::SumDevice {
                out: o,
                input: i,
                dim: *dim,
            }
        }
    })
}

/// Kernels run over at most 2^32 - 1 elements.
fn kernel_size(p: &Planner, slot: usize, field: &str) -> Result<(), CaseError> {
    let s = &p.slots[slot];
    let n: u64 = s.dims.iter().map(|d| d.extent.max(0) as u64).product();
    if n > u64::from(u32::MAX) {
        return Err(p.err(format!(
            "field {field}: {} has {n} elements; a kernel runs over at most 2^32 - 1",
            s.name
        )));
    }
    Ok(())
}

/// Whether the box of `outer` contains the box of `inner`.
fn contains(outer: &[Dim], inner: &[Dim]) -> bool {
    outer.iter().zip(inner).all(|(o, i)| {
        o.min <= i.min && i.min.saturating_add(i.extent) <= o.min.saturating_add(o.extent)
    })
}

/// An input of an element-wise kernel has the output's dimensions and contains
/// its box.
fn input_covers(p: &Planner, s: &Slot, o: &Slot) -> Result<(), CaseError> {
    if s.dims.len() != o.dims.len() {
        return Err(p.err(format!(
            "field inputs: {} has {} dimensions, the output {} has {}",
            s.name,
            s.dims.len(),
            o.name,
            o.dims.len()
        )));
    }
    if !is_empty(&o.dims) && !contains(&s.dims, &o.dims) {
        return Err(p.err(format!(
            "field inputs: {} {} does not contain the box of the output {} {}",
            s.name,
            box_text(&s.dims),
            o.name,
            box_text(&o.dims)
        )));
    }
    Ok(())
}

fn is_empty(dims: &[Dim]) -> bool {
    dims.iter().any(|d| d.extent == 0)
}

/// The checks of the runtime's `kernel_add`, at load.
fn check_add_device(p: &Planner, out: usize, inputs: &[usize]) -> Result<(), CaseError> {
    kernel_size(p, out, "out")?;
    let o = &p.slots[out];
    for &i in inputs {
        let s = &p.slots[i];
        if s.elem != o.elem {
            return Err(p.err(format!(
                "field inputs: {} is {}, the output {} is {}",
                s.name, s.elem, o.name, o.elem
            )));
        }
        input_covers(p, s, o)?;
    }
    Ok(())
}

/// The checks of the runtime's `kernel_sum`, at load.
fn check_sum(p: &Planner, out: usize, input: usize, dim: usize) -> Result<(), CaseError> {
    let (o, i) = (&p.slots[out], &p.slots[input]);
    if dim >= i.dims.len() {
        return Err(p.err(format!(
            "field dim: {dim}, but {} has {} dimensions (0 to {})",
            i.name,
            i.dims.len(),
            i.dims.len() - 1
        )));
    }
    if o.elem != i.elem {
        return Err(p.err(format!(
            "field out: {} is {}, the input {} is {}",
            o.name, o.elem, i.name, i.elem
        )));
    }
    let mut rest = i.dims.clone();
    let reduced = rest.remove(dim);
    if o.dims.len() != rest.len() {
        return Err(p.err(format!(
            "field out: {} has {} dimensions; {} summed over dimension {dim} has {}",
            o.name,
            o.dims.len(),
            i.name,
            rest.len()
        )));
    }
    if !is_empty(&o.dims) && !contains(&rest, &o.dims) {
        return Err(p.err(format!(
            "field out: {} {} is not inside {} without dimension {dim} {}",
            o.name,
            box_text(&o.dims),
            i.name,
            box_text(&rest)
        )));
    }
    if reduced.extent as u64 > u64::from(u32::MAX) {
        return Err(p.err(format!(
            "field dim: dimension {dim} of {} has extent {}; a kernel sums at most 2^32 - 1",
            i.name, reduced.extent
        )));
    }
    kernel_size(p, out, "out")
}

/// Checks a map's buffers and expression: the runtime's checks of
/// `kernel_map`, at load.
fn plan_map(map: &Map, p: &Planner) -> Result<Op, CaseError> {
    let out = p.buf(&map.out)?;
    if map.inputs.len() > MAX_MAP_INPUTS {
        return Err(p.err(format!(
            "field inputs: {} inputs; a map reads at most {MAX_MAP_INPUTS} (a dispatch binds 8 buffers)",
            map.inputs.len()
        )));
    }
    let mut inputs = Vec::new();
    for name in &map.inputs {
        let b = p.buf(name)?;
        if b == out {
            return Err(p.err(format!(
                "field inputs: {name} is the output; name it in value to read its elements in place"
            )));
        }
        if inputs.contains(&b) {
            return Err(p.err(format!("field inputs: {name} is named twice")));
        }
        inputs.push(b);
    }
    let mut names: Vec<&str> = inputs.iter().map(|&b| p.slots[b].name.as_str()).collect();
    for name in &names {
        Expr::check_input_name(name).map_err(|e| p.err(format!("field inputs: {e}")))?;
    }
    // The output is an operand when its name can be one.
    let out_name = p.slots[out].name.as_str();
    if Expr::check_input_name(out_name).is_ok() {
        names.push(out_name);
    }
    let value = p.value_with("value", out, &map.value, &names)?;
    if !p.expecting_error {
        kernel_size(p, out, "out")?;
        value
            .check_wgsl()
            .map_err(|e| p.err(format!("field value: the expression {e}")))?;
        let o = &p.slots[out];
        for &i in &inputs {
            let s = &p.slots[i];
            input_covers(p, s, o)?;
        }
    }
    Ok(Op::MapDevice { out, inputs, value })
}

/// Checks an add's buffers; on the host they need host memory, on the device
/// an input may not be the output.
fn plan_add(
    add: &Add,
    p: &Planner,
    host: bool,
) -> Result<(usize, Vec<usize>, Option<Expr>), CaseError> {
    let o = p.buf(&add.out)?;
    if host {
        p.needs_host(o, "buffer")?;
    }
    let mut inputs = Vec::new();
    for name in &add.inputs {
        let b = p.buf(name)?;
        if host {
            p.needs_host(b, "input")?;
        } else if b == o || inputs.contains(&b) {
            return Err(p.err(format!(
                "input {name} is named twice or is the output; write an in-place add without inputs"
            )));
        }
        let (nb, no) = (p.slots[b].dims.len(), p.slots[o].dims.len());
        if host && nb != no {
            return Err(p.err(format!(
                "input {name} has {nb} dimensions, {} has {no}",
                add.out
            )));
        }
        inputs.push(b);
    }
    if inputs.is_empty() && add.value.is_none() {
        return Err(p.err("give `inputs`, `value` or both"));
    }
    let value = match &add.value {
        Some(v) => Some(p.value("value", o, v)?),
        None => None,
    };
    Ok((o, inputs, value))
}

/// What the step needs beyond the primitives of every runtime.
pub fn needs(op: &Op) -> Option<Capability> {
    match op {
        Op::FillHost { .. }
        | Op::AddHost { .. }
        | Op::FillDevice { .. }
        | Op::AddDevice { .. }
        | Op::MapDevice { .. } => None,
        Op::SumDevice { .. } => Some(Capability::SumKernel),
    }
}

/// Host stages run here, the same on every runtime; device kernels are the
/// runtime's ([`Runtime::kernel`]).
pub fn run<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    match op {
        Op::FillHost { buffer, value } => {
            let f = value.compile();
            let b = rt.host_mut(*buffer)?;
            match super::aliased::distinct_part(b, value)? {
                Some((mut part, _)) => part.fill(|c| f.eval(c))?,
                None => b.fill(|c| f.eval(c))?,
            }
            rt.set_dirty(*buffer, Some(true), None)
        }
        Op::AddHost { out, inputs, value } => {
            // Without inputs the add is in place, as on the device.
            let inputs = if inputs.is_empty() {
                vec![*out]
            } else {
                inputs.clone()
            };
            add_host(rt, *out, &inputs, value.as_ref())
        }
        Op::FillDevice { buffer, value } => rt.kernel(DeviceKernel::Fill {
            buffer: *buffer,
            value,
        }),
        Op::AddDevice {
            out,
            inputs,
            constant,
        } => rt.kernel(DeviceKernel::Add {
            out: *out,
            inputs,
            constant: *constant,
        }),
        Op::MapDevice { out, inputs, value } => rt.kernel(DeviceKernel::Map {
            out: *out,
            inputs,
            value,
        }),
        Op::SumDevice { out, input, dim } => rt.kernel(DeviceKernel::Sum {
            out: *out,
            input: *input,
            dim: *dim,
        }),
    }
}

/// `out(c) = sum of inputs(c) + value(c)` on the host. Values are read first and
/// written after, so an input may share memory with `out`.
/// `value` (0 without one) plus every input at each element of `o`, in the
/// order of `o`'s elements: a host add, also the reference for device adds.
pub fn add_sums(
    o: &Buffer,
    inputs: &[&Buffer],
    value: Option<&Expr>,
) -> Result<Vec<i64>, StepError> {
    let value = value.map(|v| v.compile());
    combine(o, inputs, |c, vals| {
        vals.iter()
            .fold(value.as_ref().map_or(0, |f| f.eval(c)), |a, v| {
                a.wrapping_add(*v)
            })
    })
}

/// `input` summed over dimension `dim` at each element of `o`, in the order of
/// `o`'s elements: the reference of the device sum. Floats add in the
/// element's own width from 0, as the kernel does; integers wrap.
pub fn sums_over(o: &Buffer, input: &Buffer, dim: usize) -> Result<Vec<i64>, StepError> {
    let d = *input
        .dims()
        .get(dim)
        .ok_or_else(|| StepError::Check(format!("sum: {} has no dimension {dim}", input.name())))?;
    let f32_sum = input.elem() == ElemType::F32;
    let mut sums = Vec::new();
    let mut err = None;
    let mut at = Vec::new();
    o.for_each_element(|c, _| {
        at.clear();
        at.extend_from_slice(c);
        at.insert(dim, d.min);
        let (mut int, mut float, mut single) = (0i64, 0f64, 0f32);
        for k in d.min..d.min + d.extent {
            at[dim] = k;
            match input.get(&at) {
                Ok(Value::Int(v)) => int = int.wrapping_add(v),
                Ok(Value::Float(v)) if f32_sum => single += v as f32,
                Ok(Value::Float(v)) => float += v,
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        sums.push(if input.elem().is_float() {
            if f32_sum {
                single as i64
            } else {
                float as i64
            }
        } else {
            int
        });
    });
    match err {
        Some(e) => Err(StepError::Runtime(e)),
        None => Ok(sums),
    }
}

/// `f(coords, inputs' values there)` at each element of `o`, in the order of
/// `o`'s elements (values as integers, as the kernels compute).
pub fn combine(
    o: &Buffer,
    inputs: &[&Buffer],
    mut f: impl FnMut(&[i64], &[i64]) -> i64,
) -> Result<Vec<i64>, StepError> {
    let mut sums = Vec::new();
    let mut readers = Vec::new();
    for b in inputs {
        let h = b
            .host_view()
            .ok_or_else(|| StepError::Runtime(Error::HostIsNull(b.name().to_owned())))?;
        readers.push((
            *b,
            h.memory.read().unwrap_or_else(|p| p.into_inner()),
            h.offset,
        ));
    }
    let mut outside = None;
    let mut vals = Vec::with_capacity(readers.len());
    o.for_each_element(|c, _| {
        vals.clear();
        for (b, mem, base) in &readers {
            match b.offset_of(c) {
                Some(off) => {
                    let at = base + off as usize * b.elem().bytes();
                    vals.push(match b.elem().load(&mem[at..]) {
                        Value::Int(i) => i,
                        Value::Float(f) => f as i64,
                    });
                }
                None => {
                    vals.push(0);
                    if outside.is_none() {
                        outside = Some(format!("{c:?} is outside input {}", b.name()));
                    }
                }
            }
        }
        sums.push(f(c, &vals));
    });
    if let Some(m) = outside {
        return Err(StepError::Check(format!("add_host: {m}")));
    }
    Ok(sums)
}

fn add_host<'a>(
    rt: &mut dyn Runtime<'a>,
    out: usize,
    inputs: &[usize],
    value: Option<&Expr>,
) -> Result<(), StepError> {
    let sums = {
        let r: &dyn Runtime<'a> = rt;
        let mut ins = Vec::new();
        for &i in inputs {
            if r.flags(i)?.device_dirty {
                return Err(StepError::Check(format!(
                    "add_host: input {} is device-dirty: its host memory is stale (copy_to_host first)",
                    r.slot_name(i)
                )));
            }
            ins.push(r.host(i)?);
        }
        add_sums(r.host(out)?, &ins, value)?
    };
    let mut next = sums.into_iter();
    rt.host_mut(out)?
        .fill(|_| next.next().unwrap_or(0))
        .map_err(StepError::Runtime)?;
    rt.set_dirty(out, Some(true), None)
}
