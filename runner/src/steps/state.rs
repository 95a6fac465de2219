//! What running a step needs: the context, the case's buffers and views by
//! slot, and the results of timed copies.

use crate::outcome::Measurement;
use crate::rt::{Buffer, Context, Error};

/// Why a step failed: a runtime error (with its name, for `expect_error`), a failed
/// check, or something the device lacks (the case is then skipped).
#[derive(Debug)]
pub enum StepError {
    Runtime(Error),
    Check(String),
    Unsupported(String),
}

impl From<Error> for StepError {
    fn from(e: Error) -> Self {
        StepError::Runtime(e)
    }
}

impl From<String> for StepError {
    fn from(m: String) -> Self {
        StepError::Check(m)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Runtime(e) => write!(f, "{e}"),
            StepError::Check(m) | StepError::Unsupported(m) => f.write_str(m),
        }
    }
}

/// A running case.
pub struct State<'a> {
    pub ctx: &'a Context,
    names: Vec<String>,
    bufs: Vec<Option<Buffer>>,
    /// Results of `measure` steps, for the report.
    pub measured: Vec<Measurement>,
}

impl<'a> State<'a> {
    /// No buffer yet in any of the slots named `names`.
    pub fn new(ctx: &'a Context, names: Vec<String>) -> Self {
        let bufs = names.iter().map(|_| None).collect();
        State {
            ctx,
            names,
            bufs,
            measured: Vec::new(),
        }
    }

    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    pub fn get(&self, i: usize) -> Result<&Buffer, StepError> {
        self.bufs[i].as_ref().ok_or_else(|| self.missing(i))
    }

    pub fn get_mut(&mut self, i: usize) -> Result<&mut Buffer, StepError> {
        if self.bufs[i].is_none() {
            return Err(self.missing(i));
        }
        Ok(self.bufs[i].as_mut().expect("checked"))
    }

    /// Two different slots, the second mutable.
    pub fn pair(&mut self, a: usize, b: usize) -> Result<(&Buffer, &mut Buffer), StepError> {
        self.get(a)?;
        self.get(b)?;
        let (x, y) = if a < b {
            let (lo, hi) = self.bufs.split_at_mut(b);
            (lo[a].as_ref(), hi[0].as_mut())
        } else {
            let (lo, hi) = self.bufs.split_at_mut(a);
            (hi[0].as_ref(), lo[b].as_mut())
        };
        Ok((x.expect("checked"), y.expect("checked")))
    }

    /// Takes a buffer out of its slot (for disjoint borrows); [`State::put`] returns it.
    pub fn take(&mut self, i: usize) -> Result<Buffer, StepError> {
        self.bufs[i].take().ok_or_else(|| self.missing(i))
    }

    pub fn put(&mut self, i: usize, b: Buffer) {
        self.bufs[i] = Some(b);
    }

    /// Empties a slot.
    pub fn drop_slot(&mut self, i: usize) {
        self.bufs[i] = None;
    }

    fn missing(&self, i: usize) -> StepError {
        StepError::Check(format!(
            "buffer {} does not exist (released, or the step that makes it failed)",
            self.names[i]
        ))
    }
}
