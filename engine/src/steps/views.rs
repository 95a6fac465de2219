//! View steps: crops, slices, strided views and views without host memory,
//! all sharing the memory of the buffer they are made from.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::rt::{Dim, MAX_DIMS};
use crate::runtime::StepError;
use crate::runtime::{Capability, Runtime, ViewKind};
use crate::steps::bind::Int;
use crate::steps::planner::{plain, Planner};

/// The view steps as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "ViewsStep")]
pub enum Step {
    /// Makes `to`, a view of the box `min`..`min + extent` of `from`.
    Crop {
        /// The buffer or view cropped.
        from: String,
        /// The name of the new view.
        to: String,
        /// The box's first coordinate per dimension.
        min: Vec<Int>,
        /// The box's extent per dimension.
        extent: Vec<Int>,
    },
    /// Makes `to`, a view of `from` with dimension `dim` fixed at `pos`.
    Slice {
        /// The buffer or view sliced.
        from: String,
        /// The name of the new view.
        to: String,
        /// The dimension fixed (0 innermost).
        dim: usize,
        /// The coordinate it is fixed at.
        pos: Int,
    },
    /// Makes `to`, a view of any shape over `from`'s memory: `from`'s element `at`
    /// is `to`'s element at its mins; `stride` in elements of `from`'s memory.
    View {
        /// The buffer or view whose memory the view uses.
        from: String,
        /// The name of the new view.
        to: String,
        /// The element of `from` (its coordinates) that is the view's element at its mins.
        at: Vec<Int>,
        /// The view's extent per dimension (1 to 16 dimensions).
        extent: Vec<Int>,
        /// The view's strides in elements; every element must lie within `from`.
        stride: Vec<Int>,
        /// The view's mins; default 0.
        #[serde(default)]
        min: Option<Vec<Int>>,
    },
    /// Makes `to`, the same buffer without host memory (a raw `halide_buffer_t` copy
    /// with `host = null`).
    ViewNoHost {
        /// The buffer whose device memory the view shares.
        from: String,
        /// The name of the new view.
        to: String,
    },
}

impl Step {
    /// The name of the view the step makes, as written.
    pub fn made(&self) -> &str {
        match self {
            Step::Crop { to, .. }
            | Step::Slice { to, .. }
            | Step::View { to, .. }
            | Step::ViewNoHost { to, .. } => to,
        }
    }
}

/// A checked view step; buffers are slots.
#[derive(Clone, Debug)]
pub enum Op {
    Crop {
        from: usize,
        to: usize,
        min: Vec<i64>,
        extent: Vec<i64>,
    },
    Slice {
        from: usize,
        to: usize,
        dim: usize,
        pos: i64,
    },
    View {
        from: usize,
        to: usize,
        at: Vec<i64>,
        dims: Vec<Dim>,
    },
    ViewNoHost {
        from: usize,
        to: usize,
    },
}

impl Op {
    /// The slot viewed and the slot of the view.
    pub fn slots(&self) -> (usize, usize) {
        match self {
            Op::Crop { from, to, .. }
            | Op::Slice { from, to, .. }
            | Op::View { from, to, .. }
            | Op::ViewNoHost { from, to } => (*from, *to),
        }
    }
}

pub fn plan(step: &Step, p: &mut Planner) -> Result<Op, CaseError> {
    Ok(match step {
        Step::Crop {
            from,
            to,
            min,
            extent,
        } => {
            let f = p.buf(from)?;
            let n = p.slots[f].dims.len();
            let min = p.ints("min", min, n)?;
            let extent = p.ints("extent", extent, n)?;
            if !p.expecting_error {
                check_crop(p, f, &min, &extent)?;
            }
            let dims = p.slots[f]
                .dims
                .iter()
                .zip(min.iter().zip(&extent))
                .map(|(d, (&min, &extent))| Dim {
                    min,
                    extent,
                    stride: d.stride,
                })
                .collect();
            let to = p.new_view(to, f, dims)?;
            Op::Crop {
                from: f,
                to,
                min,
                extent,
            }
        }
        Step::Slice { from, to, dim, pos } => {
            let f = p.buf(from)?;
            let n = p.slots[f].dims.len();
            if *dim >= n || n == 1 {
                return Err(p.err(format!(
                    "field dim: {dim}, but {from} has {n} dimensions (a slice keeps at least one)"
                )));
            }
            let pos = p.int("pos", pos)?;
            let d = p.slots[f].dims[*dim];
            let end = d.min.saturating_add(d.extent);
            if !p.expecting_error && !(d.min..end).contains(&pos) {
                return Err(p.err(format!(
                    "field pos: {pos} is outside dimension {dim} of {from}, [{}, {end})",
                    d.min
                )));
            }
            let mut dims = p.slots[f].dims.clone();
            dims.remove(*dim);
            let to = p.new_view(to, f, dims)?;
            Op::Slice {
                from: f,
                to,
                dim: *dim,
                pos,
            }
        }
        Step::View {
            from,
            to,
            at,
            extent,
            stride,
            min,
        } => {
            let f = p.buf(from)?;
            let at = p.ints("at", at, p.slots[f].dims.len())?;
            let n = extent.len();
            if n == 0 || n > MAX_DIMS {
                return Err(p.err(format!(
                    "field extent: {n} dimensions; 1 to {MAX_DIMS} allowed"
                )));
            }
            let extent = p.ints("extent", extent, n)?;
            let stride = p.ints("stride", stride, n)?;
            let mins = match min {
                Some(m) => p.ints("min", m, n)?,
                None => vec![0; n],
            };
            let dims: Vec<Dim> = (0..n)
                .map(|d| Dim {
                    min: mins[d],
                    extent: extent[d],
                    stride: stride[d],
                })
                .collect();
            if !p.expecting_error {
                let name = p.loops.name(to).map_err(|e| p.err(e))?;
                let parent = p.shape(f)?;
                if let Err(e) = parent.strided_view(&name, &at, dims.clone()) {
                    let field = if parent.offset_of(&at).is_none() {
                        "at"
                    } else {
                        "extent"
                    };
                    return Err(p.err(format!("field {field}: {}", plain(&e))));
                }
            }
            let to = p.new_view(to, f, dims.clone())?;
            Op::View {
                from: f,
                to,
                at,
                dims,
            }
        }
        Step::ViewNoHost { from, to } => {
            let f = p.buf(from)?;
            let dims = p.slots[f].dims.clone();
            let to = p.new_view(to, f, dims)?;
            p.slots[to].host = false;
            Op::ViewNoHost { from: f, to }
        }
    })
}

/// Checks that the box `min`..`min + extent` lies in slot `f`'s box.
fn check_crop(p: &Planner, f: usize, min: &[i64], extent: &[i64]) -> Result<(), CaseError> {
    let name = &p.slots[f].name;
    for (d, (dim, (&m, &e))) in p.slots[f]
        .dims
        .iter()
        .zip(min.iter().zip(extent))
        .enumerate()
    {
        if e < 0 {
            return Err(p.err(format!("field extent: {e} in dimension {d} is negative")));
        }
        let Some(end) = m.checked_add(e) else {
            return Err(p.err(format!(
                "field extent: min {m} + extent {e} of dimension {d} overflows 64 bits"
            )));
        };
        let (lo, hi) = (dim.min, dim.min.saturating_add(dim.extent));
        if m < lo || end > hi {
            let field = if m < lo || m >= hi { "min" } else { "extent" };
            return Err(p.err(format!(
                "field {field}: dimension {d} of the crop, [{m}, {end}), is outside {name}'s [{lo}, {hi})"
            )));
        }
    }
    Ok(())
}

/// Views are made on every runtime (a strided view of device memory is
/// refused at run time by a runtime that views device memory only by crop and slice).
pub fn needs(op: &Op) -> Option<Capability> {
    match op {
        Op::Crop { .. } | Op::Slice { .. } | Op::View { .. } | Op::ViewNoHost { .. } => None,
    }
}

/// The view's host side is made here, once for every runtime; the runtime
/// aliases its device memory.
pub fn run<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    let (from, to) = op.slots();
    let name = rt.slot_name(to);
    let src = rt.host(from)?;
    let view = match op {
        Op::Crop { min, extent, .. } => src.cropped(&name, min, extent)?,
        Op::Slice { dim, pos, .. } => src.sliced(&name, *dim, *pos)?,
        Op::View { at, dims, .. } => src.strided_view(&name, at, dims.clone())?,
        Op::ViewNoHost { .. } => src.without_host(&name),
    };
    let how = match op {
        Op::Crop { .. } | Op::ViewNoHost { .. } => ViewKind::Crop,
        Op::Slice { dim, pos, .. } => ViewKind::Slice {
            dim: *dim,
            pos: *pos,
        },
        Op::View { .. } => ViewKind::Strided,
    };
    rt.put_view(from, to, view, how)
}
