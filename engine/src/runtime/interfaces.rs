//! What the steps ask of a runtime beyond the primitives, one interface per
//! [`super::Capability`] that needs more than a flag. A runtime hands out the
//! ones it has ([`super::Runtime::async_copies`] and the others); a step asks
//! for the one it needs and is skipped with it named where there is none. No
//! step sees a runtime's own state: vkcopy has them all (`vkcopy.rs`), and any
//! other runtime may gain one by implementing it.

use std::time::Instant;

use super::{Capability, Runtime, StepError};
use crate::timing::Samples;
use vkcopy_results::outcome::Measurement;

/// The error of a step whose runtime lacks `need` (the case was checked
/// before it ran, so this is a runtime that declared what it cannot give).
pub fn lacks(need: Capability) -> StepError {
    StepError::Unsupported(format!("needs {}", need.about()))
}

/// Copies that do not block (`start_*`, `wait`, `expect_order`): a started
/// copy holds its destination slot until it is waited for.
pub trait AsyncCopies {
    /// Starts uploading the buffer in `slot`.
    fn start_copy_to_device(&mut self, slot: usize) -> Result<(), StepError>;
    /// Starts reading the buffer in `slot` back.
    fn start_copy_to_host(&mut self, slot: usize) -> Result<(), StepError>;
    /// Starts `halide_buffer_copy` from `from` into `to`, after the latest
    /// copies into the slots of `after`.
    fn start_buffer_copy(
        &mut self,
        from: usize,
        to: usize,
        to_device: bool,
        after: &[usize],
    ) -> Result<(), StepError>;
    /// Waits for the copy into `slot` and gives its buffer back.
    fn wait(&mut self, slot: usize) -> Result<(), StepError>;
    /// When the latest copy into `slot` ran, by the host clock; `None` while
    /// it has not finished.
    fn ran(&self, slot: usize) -> Result<Option<(Instant, Instant)>, StepError>;
    /// Whether a copy is in flight now.
    fn copying(&self) -> bool;
    /// A work step ran from `from` until now while a copy was in flight.
    fn worked_since(&mut self, from: Instant);
    /// The slots whose copies were never waited for, by name.
    fn unwaited(&self) -> Vec<String>;
}

/// What a `measure` step times.
#[derive(Clone, Debug)]
pub enum Timed {
    /// A readback of the buffer in this slot.
    CopyToHost(usize),
    /// An upload of the buffer in this slot.
    CopyToDevice(usize),
    /// A device-to-device copy between two slots.
    DeviceToDevice {
        /// The source.
        from: usize,
        /// The destination.
        to: usize,
    },
}

/// What a `min_ratio` compares with.
#[derive(Clone, Debug, PartialEq)]
pub enum Reference {
    /// A host memcpy of the same bytes, timed in the same runs.
    HostMemcpy,
    /// The runtime's plain copy of the same bytes along the same path, timed in
    /// the same runs.
    RawCopy,
    /// The driver's floor: the same bytes along the same path, recorded once,
    /// on every queue family; the fastest family's runs, timed after the step's.
    Floor,
    /// An earlier measure of the case, by name.
    Measure(String),
}

/// Copies timed by the host clock and GPU timestamps (`measure`, `profiling`).
pub trait TimedCopies {
    /// Turns GPU timestamps around copies on or off.
    fn set_profiling(&mut self, on: bool);
    /// Times `timed`: once untimed, then `repeat` runs, with the reference
    /// `of` where the runtime times one (not [`Reference::Measure`]).
    fn time(
        &mut self,
        timed: &Timed,
        repeat: u32,
        of: Option<&Reference>,
    ) -> Result<(Measurement, Option<Samples>), StepError>;
    /// Whether the times are taken under the validation layer.
    fn under_validation(&self) -> bool;
    /// The measurements of the case so far.
    fn measured(&self) -> &[Measurement];
    /// Keeps a measurement for the report.
    fn record(&mut self, m: Measurement);
    /// The measurements of the case, for its outcome.
    fn take_measured(&mut self) -> Vec<Measurement>;
}

/// `VkBuffer`s the case makes on the runtime's own device and hands to
/// buffers (`native_buffer`, `wrap_native`, `detach_native`).
pub trait NativeBuffers {
    /// Makes native buffer `native` of `bytes`.
    fn make(&mut self, native: usize, bytes: u64) -> Result<(), StepError>;
    /// Wraps native buffer `native` from `offset` as the device side of `buffer`.
    fn wrap(&mut self, buffer: usize, native: usize, offset: u64) -> Result<(), StepError>;
    /// Detaches `buffer`'s native buffer; an error if it is not the one wrapped.
    fn detach(&mut self, buffer: usize) -> Result<(), StepError>;
}

/// Work-in-flight accounting (`expect_concurrent`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkInFlight {
    /// The most pieces of work in flight at once.
    pub peak: u64,
    /// Pieces of work so far.
    pub created: u64,
    /// Async copies that ran while a step of this thread worked.
    pub overlapped: u64,
}

/// Makes a runtime with slots named as given, on the same device, for
/// another thread (`threads`).
pub type Fork<'a> = Box<dyn Fn(Vec<String>) -> Box<dyn Runtime<'a> + 'a> + Sync + 'a>;
