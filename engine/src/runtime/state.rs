//! vkcopy's state of a running case: the context, the case's buffers and
//! views by slot, async copies in flight, native buffers, and the results of
//! timed copies. It is vkcopy's [`super::Runtime`] (`vkcopy.rs`).

use std::collections::HashMap;
use std::time::Instant;

use super::error::StepError;
use super::native::Native;
use crate::rt::{vk, Buffer, Context, Event, InFlight};
use vkcopy_results::outcome::Measurement;

/// A running case.
pub struct State<'a> {
    /// The context the case runs on.
    pub ctx: &'a Context,
    names: Vec<String>,
    bufs: Vec<Option<Buffer>>,
    /// Async copies in flight into a slot, and the latest async copy of each slot.
    inflight: Vec<Option<InFlight>>,
    events: Vec<Option<Event>>,
    /// Results of `measure` steps, for the report.
    pub measured: Vec<Measurement>,
    /// Native buffers by their `native_buffer` index; declared after the buffers,
    /// so that buffers wrapping them are dropped first.
    pub natives: HashMap<usize, Native<'a>>,
    /// The native buffer each wrapping slot was given.
    pub wrapped: HashMap<usize, vk::Buffer>,
    /// Host intervals of the work steps (copies, kernels, host stages, checks)
    /// run while an async copy was in flight, until no copy is.
    work_log: Vec<(Instant, Instant)>,
    /// Async copies that ran while a work step ran, seen when waited for.
    overlapped: u64,
}

impl<'a> State<'a> {
    /// No buffer yet in any of the slots named `names`.
    pub fn new(ctx: &'a Context, names: Vec<String>) -> Self {
        let bufs = names.iter().map(|_| None).collect();
        State {
            ctx,
            inflight: names.iter().map(|_| None).collect(),
            events: names.iter().map(|_| None).collect(),
            names,
            bufs,
            measured: Vec::new(),
            natives: HashMap::new(),
            wrapped: HashMap::new(),
            work_log: Vec::new(),
            overlapped: 0,
        }
    }

    /// Native buffer `i`'s handle and size.
    pub fn native(&self, i: usize) -> Result<(vk::Buffer, u64), StepError> {
        self.natives
            .get(&i)
            .map(|n| (n.buffer(), n.size()))
            .ok_or_else(|| StepError::Check("the native buffer was not made".into()))
    }

    /// The case's name of slot `i`.
    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// The buffer in slot `i`.
    pub fn get(&self, i: usize) -> Result<&Buffer, StepError> {
        self.bufs[i].as_ref().ok_or_else(|| self.missing(i))
    }

    /// The buffer in slot `i`, to change.
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

    /// Puts `b` in slot `i`.
    pub fn put(&mut self, i: usize, b: Buffer) {
        self.bufs[i] = Some(b);
    }

    /// Empties every slot: buffers first, then what they wrap.
    pub fn clear(&mut self) {
        self.bufs.iter_mut().for_each(|b| *b = None);
        self.inflight.iter_mut().for_each(|c| *c = None);
        self.events.iter_mut().for_each(|e| *e = None);
        self.wrapped.clear();
        self.natives.clear();
    }

    /// Empties a slot.
    pub fn drop_slot(&mut self, i: usize) {
        self.bufs[i] = None;
    }

    /// Holds the async copy into slot `i` (whose buffer it owns) until [`State::wait`];
    /// a copy refused at start gives its buffer back and fails the step.
    pub fn start(&mut self, i: usize, copy: InFlight) -> Result<(), StepError> {
        if copy.failed_at_start() {
            let (buf, result) = copy.wait();
            self.put(i, buf);
            return result.map(|_| ()).map_err(StepError::Runtime);
        }
        self.events[i] = Some(copy.event());
        self.inflight[i] = Some(copy);
        Ok(())
    }

    /// Waits for the async copy into slot `i` and puts its buffer back.
    pub fn wait(&mut self, i: usize) -> Result<(), StepError> {
        let copy = self.inflight[i].take().ok_or_else(|| {
            StepError::Check(format!("no async copy into {} is in flight", self.names[i]))
        })?;
        let (buf, result) = copy.wait();
        self.put(i, buf);
        let ran = self.events[i].as_ref().and_then(Event::interval);
        if let Some((from, to)) = ran {
            if self.work_log.iter().any(|&(a, b)| a < to && b > from) {
                self.overlapped += 1;
            }
        }
        if self.inflight.iter().all(Option::is_none) {
            self.work_log.clear();
        }
        result.map(|_| ()).map_err(StepError::Runtime)
    }

    /// Whether an async copy is in flight now.
    pub fn copying(&self) -> bool {
        self.inflight.iter().any(Option::is_some)
    }

    /// A work step ran from `from` until now while a copy was in flight.
    pub fn worked_since(&mut self, from: Instant) {
        self.work_log.push((from, Instant::now()));
    }

    /// Async copies waited for so far that ran while a work step of this
    /// thread ran.
    pub fn overlapped(&self) -> u64 {
        self.overlapped
    }

    /// The buffers whose async copies are still in flight.
    pub fn in_flight(&self) -> Vec<String> {
        (0..self.names.len())
            .filter(|&i| self.inflight[i].is_some())
            .map(|i| self.names[i].clone())
            .collect()
    }

    /// The latest async copy into slot `i`.
    pub fn event(&self, i: usize) -> Result<Event, StepError> {
        self.events[i].clone().ok_or_else(|| {
            StepError::Check(format!("no async copy into {} was started", self.names[i]))
        })
    }

    fn missing(&self, i: usize) -> StepError {
        if self.inflight[i].is_some() {
            return StepError::Check(format!(
                "buffer {} is in flight: `wait: {}` before using it",
                self.names[i], self.names[i]
            ));
        }
        StepError::Check(format!(
            "buffer {} does not exist (released, or the step that makes it failed)",
            self.names[i]
        ))
    }
}
