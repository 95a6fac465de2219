//! What planning a step needs: the buffers and views known so far, the loop
//! variables in scope, and errors located at the step being planned.

use std::path::Path;

use serde_saphyr::Location;

use crate::error::CaseError;
use crate::rt::{span_bytes, Buffer, Dim, ElemType, Error, Expr};
use crate::steps::bind::{Bindings, Int};

/// Most bytes a case's buffer may span: a guard against typos that would ask the
/// host for terabytes (the runtime itself has no such limit).
pub const MAX_BUFFER_BYTES: u64 = 4 << 30;
/// Most elements of a buffer or view a case may walk: expect and fill visit each.
pub const MAX_ELEMENTS: u64 = 1 << 31;
/// Most steps a case may expand to once its repeats are unrolled.
pub const MAX_STEPS: usize = 200_000;

/// A buffer or view as the planner knows it: what later steps may do with it.
#[derive(Clone, Debug)]
pub struct Slot {
    pub name: String,
    pub elem: ElemType,
    pub dims: Vec<Dim>,
    pub host: bool,
    pub released: bool,
}

/// Checks a buffer's or view's shape against the case limits.
pub fn check_size(elem: ElemType, dims: &[Dim]) -> Result<(), String> {
    dims.iter()
        .try_fold(1u64, |n, d| n.checked_mul(d.extent.max(0) as u64))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| format!("more than {MAX_ELEMENTS} elements"))?;
    span_bytes(elem, dims)
        .filter(|&b| b <= MAX_BUFFER_BYTES)
        .ok_or_else(|| format!("spans more than {MAX_BUFFER_BYTES} bytes (the case limit)"))?;
    Ok(())
}

/// A runtime error's message without its name (`device_crop_failed: `), for an
/// error found at load.
pub fn plain(e: &Error) -> String {
    let text = e.to_string();
    text.strip_prefix(&format!("{}: ", e.name()))
        .map_or(text.clone(), str::to_owned)
}

/// The planning state of one case.
pub struct Planner<'a> {
    path: &'a Path,
    /// The same path, shared by every planned step.
    shared_path: std::sync::Arc<Path>,
    /// Declared buffers first, then the views that steps make; a name refers to
    /// its latest slot.
    pub slots: Vec<Slot>,
    pub loops: Bindings,
    /// Names of the `measure` steps planned so far, for `min_ratio: { of: NAME }`.
    pub measures: Vec<String>,
    /// Native buffers made so far: name and bytes.
    pub natives: Vec<(String, u64)>,
    /// Inside `expect_error`: a step that the runtime must refuse is not refused
    /// at load.
    pub expecting_error: bool,
    /// Inside `threads`.
    pub in_threads: bool,
    /// The heaps of the table the case simulates, when it names one.
    pub heaps: Option<usize>,
    line: u64,
    column: u64,
    step: &'static str,
    planned: usize,
    /// Errors of the steps planned so far, one per place in the file.
    pub errors: Vec<CaseError>,
    /// Views that failed steps would have made: a later use of one is a
    /// consequence of that error, not an error of its own.
    failed_views: Vec<String>,
    /// Planning cannot go on (the case expands to too many steps).
    stopped: bool,
}

/// Most errors recorded for one case file.
pub const MAX_ERRORS: usize = 100;

impl<'a> Planner<'a> {
    pub fn new(path: &'a Path, slots: Vec<Slot>) -> Self {
        Planner {
            path,
            shared_path: path.into(),
            slots,
            loops: Bindings::default(),
            measures: Vec::new(),
            natives: Vec::new(),
            expecting_error: false,
            in_threads: false,
            heaps: None,
            line: 0,
            column: 0,
            step: "",
            planned: 0,
            errors: Vec::new(),
            failed_views: Vec::new(),
            stopped: false,
        }
    }

    /// Starts planning step `name`, written at `at`; counts it against [`MAX_STEPS`].
    pub fn enter(&mut self, at: &Location, name: &'static str) -> Result<(), CaseError> {
        self.line = at.line();
        self.column = at.column();
        self.step = name;
        self.planned += 1;
        if self.planned > MAX_STEPS {
            self.stopped = true;
            return Err(self.err(format!(
                "the case expands to more than {MAX_STEPS} steps; repeat fewer times"
            )));
        }
        Ok(())
    }

    /// The file being planned, shared.
    pub fn path_arc(&self) -> std::sync::Arc<Path> {
        self.shared_path.clone()
    }

    /// The name of the step being planned.
    pub fn step(&self) -> &'static str {
        self.step
    }

    /// The current step and where it is written, to come back to with
    /// [`Planner::back_to`] after planning the steps it holds.
    pub fn here(&self) -> (u64, u64, &'static str) {
        (self.line, self.column, self.step)
    }

    /// Makes `here` the current step again.
    pub fn back_to(&mut self, (line, column, step): (u64, u64, &'static str)) {
        (self.line, self.column, self.step) = (line, column, step);
    }

    /// Where the current step is written.
    pub fn at(&self) -> (u64, u64) {
        (self.line, self.column)
    }

    /// An error of the current step: `path:line:col: step: message (t = 3)`.
    pub fn err(&self, message: impl std::fmt::Display) -> CaseError {
        let loops = self.loops.describe();
        let message = if loops.is_empty() {
            format!("{}: {message}", self.step)
        } else {
            format!("{}: {message} (at {loops})", self.step)
        };
        CaseError::new(self.path, self.line, self.column, message)
    }

    /// An error of the step written at `at`, without a step name before the
    /// message (for a step whose name is unknown).
    pub fn err_at(&self, at: &Location, message: impl std::fmt::Display) -> CaseError {
        CaseError::new(self.path, at.line(), at.column(), message.to_string())
    }

    /// Records `e`, the error of a step that would make the view `made`, so that
    /// planning can go on with the next step; the first error of each place is
    /// kept. Gives `e` back when planning cannot go on.
    pub fn record(&mut self, e: CaseError, made: Option<&str>) -> Result<(), CaseError> {
        if self.stopped || self.errors.len() >= MAX_ERRORS {
            return Err(e);
        }
        if let Some(name) = made.and_then(|m| self.loops.name(m).ok()) {
            self.failed_views.push(name);
        }
        let consequence = self
            .failed_views
            .iter()
            .any(|v| e.message.contains(&format!("unknown buffer '{v}'")));
        let seen = self
            .errors
            .iter()
            .any(|o| (o.line, o.column) == (e.line, e.column));
        if !consequence && !seen {
            self.errors.push(e);
        }
        Ok(())
    }

    /// The slot of buffer or view `name` (`{expression}`s filled in).
    pub fn buf(&self, name: &str) -> Result<usize, CaseError> {
        let name = self.loops.name(name).map_err(|e| self.err(e))?;
        self.slots
            .iter()
            .rposition(|s| s.name == name && !s.released)
            .ok_or_else(|| {
                let known: Vec<&str> = self
                    .slots
                    .iter()
                    .filter(|s| !s.released)
                    .map(|s| s.name.as_str())
                    .take(20)
                    .collect();
                self.err(format!("unknown buffer '{name}'; buffers are {known:?}"))
            })
    }

    /// Adds `to`, a view of slot `parent` with `dims`; returns its slot. A view
    /// has host memory when its parent has.
    pub fn new_view(
        &mut self,
        to: &str,
        parent: usize,
        dims: Vec<Dim>,
    ) -> Result<usize, CaseError> {
        let name = self.loops.name(to).map_err(|e| self.err(e))?;
        if self.slots.iter().any(|s| s.name == name && !s.released) {
            return Err(self.err(format!("field to: '{name}' already names a buffer")));
        }
        let p = &self.slots[parent];
        check_size(p.elem, &dims).map_err(|e| self.err(format!("view {name}: {e}")))?;
        let slot = Slot {
            name,
            elem: p.elem,
            dims,
            host: p.host,
            released: false,
        };
        self.slots.push(slot);
        Ok(self.slots.len() - 1)
    }

    /// A value expression of `slot`'s coordinates (and loop variables).
    pub fn value(&self, field: &str, slot: usize, src: &str) -> Result<Expr, CaseError> {
        self.value_with(field, slot, src, &[])
    }

    /// [`Planner::value`] that may also name the buffers `inputs`.
    pub fn value_with(
        &self,
        field: &str,
        slot: usize,
        src: &str,
        inputs: &[&str],
    ) -> Result<Expr, CaseError> {
        let e = self
            .loops
            .parse_with(src, inputs)
            .map_err(|e| self.err(format!("field {field}: {e}")))?;
        let s = &self.slots[slot];
        if let Some(d) = e.max_dim() {
            if d >= s.dims.len() {
                return Err(self.err(format!(
                    "field {field}: '{src}' uses dimension {d} but buffer {} has {}",
                    s.name,
                    s.dims.len()
                )));
            }
        }
        Ok(e)
    }

    /// An integer of loop variables.
    pub fn int(&self, field: &str, v: &Int) -> Result<i64, CaseError> {
        self.loops
            .int(v)
            .map_err(|e| self.err(format!("field {field}: {e}")))
    }

    /// A list of integers with one per dimension of `n`.
    pub fn ints(&self, field: &str, v: &[Int], n: usize) -> Result<Vec<i64>, CaseError> {
        if v.len() != n {
            return Err(self.err(format!(
                "field {field}: {} values for {n} dimensions",
                v.len()
            )));
        }
        v.iter().map(|x| self.int(field, x)).collect()
    }

    /// The slot as a buffer without memory, to check a view of it with the
    /// runtime's own rules before anything runs.
    pub fn shape(&self, slot: usize) -> Result<Buffer, CaseError> {
        let s = &self.slots[slot];
        Buffer::with_dims(&s.name, s.elem, s.dims.clone(), false).map_err(|e| self.err(plain(&e)))
    }

    /// Whether the slot has host memory; an error naming `what` if not.
    pub fn needs_host(&self, slot: usize, what: &str) -> Result<(), CaseError> {
        if self.slots[slot].host {
            Ok(())
        } else {
            let name = &self.slots[slot].name;
            Err(self.err(format!("{what} {name} has no host memory")))
        }
    }
}
