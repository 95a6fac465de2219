//! The seam between the suite and a runtime under test, in the manner of
//! Halide's `halide_device_interface_impl_t`: a runtime gives primitives
//! (buffers, malloc and free, copies, views, dirty bits, device kernels,
//! counters, placements, the end-of-case report), and each step's meaning is
//! written once over them, in `steps/`. What goes beyond them (async copies,
//! threads, timed copies, native buffers...) is a [`Capability`], reached
//! through an interface of `interfaces.rs` that the runtime hands out where it
//! has it; a step that needs one declares it, and a runtime without it skips
//! the case with it named.

pub mod capability;
pub mod choice;
pub mod error;
pub mod interfaces;
pub mod native;
pub mod state;
pub mod target;
pub mod timed;
pub mod vkcopy;

pub use capability::Capability;
pub use choice::Choice;
pub use error::StepError;
pub use interfaces::{
    lacks, AsyncCopies, Fork, NativeBuffers, Reference, Timed, TimedCopies, WorkInFlight,
};
pub use state::State;
pub use target::{Open, OpenError, Target};

use crate::rt::{Buffer, DeviceType, Expr};
use vkcopy_results::outcome::PlacementRecord;

/// How a view's device memory aliases its parent's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    /// `halide_device_crop`: a box of the parent (also a view without host memory).
    Crop,
    /// `halide_device_slice` at `pos` of dimension `dim`.
    Slice {
        /// The dimension sliced away.
        dim: usize,
        /// Its coordinate.
        pos: i64,
    },
    /// A strided view: other strides over the same memory.
    Strided,
}

/// A device kernel of the suite's, over slots.
#[derive(Clone, Copy, Debug)]
pub enum DeviceKernel<'k> {
    /// `buffer(c) = value(c)`.
    Fill {
        /// The slot written.
        buffer: usize,
        /// The expression of the coordinates.
        value: &'k Expr,
    },
    /// `out(c) = sum of inputs(c) + constant`; in place without inputs.
    Add {
        /// The slot written.
        out: usize,
        /// The slots read.
        inputs: &'k [usize],
        /// Added to every element.
        constant: i64,
    },
    /// `out(c) = value(c, inputs(c)..., out(c))`.
    Map {
        /// The slot written.
        out: usize,
        /// The slots read.
        inputs: &'k [usize],
        /// The expression of the coordinates and the inputs' values.
        value: &'k Expr,
    },
    /// `out` = `input` summed over dimension `dim`.
    Sum {
        /// The slot written.
        out: usize,
        /// The slot summed.
        input: usize,
        /// The dimension summed over.
        dim: usize,
    },
}

/// A buffer's dirty bits and whether it has device memory, as `expect_flags`
/// reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    /// The host holds data the device lacks.
    pub host_dirty: bool,
    /// The device holds data the host lacks.
    pub device_dirty: bool,
    /// The buffer has device memory.
    pub has_device: bool,
}

/// What a case ran on said at its end: everything still alive, what went
/// wrong while emptying it or was seen done wrong (each a line of its own),
/// and the validation layer's messages.
#[derive(Debug, Default)]
pub struct Finish {
    /// What was still alive, in words; `None` when nothing was.
    pub leaks: Option<String>,
    /// Problems found while emptying the runtime, and Vulkan misuse it was seen at.
    pub findings: Vec<String>,
    /// The validation layer's messages.
    pub messages: Vec<String>,
}

/// A runtime under test, over the slots of one case (a buffer or view each).
/// `'a` is the life of a vkcopy context, which vkcopy's state and the runtimes it forks borrow.
pub trait Runtime<'a> {
    /// What it can do beyond the primitives.
    fn capabilities(&self) -> &'static [Capability];

    /// The device type it opened, once it has opened one.
    fn device_type(&self) -> Option<DeviceType>;

    /// The case's name of slot `slot`.
    fn slot_name(&self, slot: usize) -> String;

    /// Slot `slot` holds `host`, a buffer over host memory the suite made.
    fn put(&mut self, slot: usize, host: Buffer) -> Result<(), StepError>;

    /// The host side of slot `slot`: its shape and host memory.
    fn host(&self, slot: usize) -> Result<&Buffer, StepError>;

    /// The same, to write its host memory (dirty bits go by [`Runtime::set_dirty`]).
    fn host_mut(&mut self, slot: usize) -> Result<&mut Buffer, StepError>;

    /// Slot `slot`'s dirty bits and whether it has device memory.
    fn flags(&self, slot: usize) -> Result<Flags, StepError>;

    /// Sets the dirty bits given; `None` leaves one as it is.
    fn set_dirty(
        &mut self,
        slot: usize,
        host_dirty: Option<bool>,
        device_dirty: Option<bool>,
    ) -> Result<(), StepError>;

    /// `halide_device_malloc`: device memory, zero-filled; dirty bits unchanged.
    fn device_malloc(&mut self, slot: usize) -> Result<(), StepError>;
    /// `halide_device_free`.
    fn device_free(&mut self, slot: usize) -> Result<(), StepError>;

    /// The buffer in `slot` goes; its device memory lives on while views of it do.
    fn release(&mut self, slot: usize) -> Result<(), StepError>;

    /// `halide_copy_to_device`.
    fn copy_to_device(&mut self, slot: usize) -> Result<(), StepError>;
    /// `halide_copy_to_host`.
    fn copy_to_host(&mut self, slot: usize) -> Result<(), StepError>;
    /// `halide_buffer_copy`, to `to`'s device memory or its host memory.
    fn buffer_copy(&mut self, from: usize, to: usize, to_device: bool) -> Result<(), StepError>;

    /// Slot `to` becomes `view` (a view of `from`'s host side, made by the
    /// step), its device memory aliasing `from`'s as `how` says.
    fn put_view(
        &mut self,
        from: usize,
        to: usize,
        view: Buffer,
        how: ViewKind,
    ) -> Result<(), StepError>;

    /// A device kernel (`fill_device`, `add_device`, `map_device`, `sum_device`).
    fn kernel(&mut self, kernel: DeviceKernel<'_>) -> Result<(), StepError>;

    /// `halide_reuse_device_allocations`.
    fn reuse_device_allocations(&mut self, on: bool) -> Result<(), StepError>;

    /// `halide_device_and_host_malloc`: host memory the runtime allocates
    /// (zeros, where the buffer has none) and device memory.
    fn device_and_host_malloc(&mut self, slot: usize) -> Result<(), StepError>;

    /// `halide_device_and_host_free`: both sides; both dirty bits cleared.
    fn device_and_host_free(&mut self, slot: usize) -> Result<(), StepError>;

    /// Gives back the device memory kept for reuse and nothing else
    /// (`halide_release_unused_device_allocations`).
    fn release_unused(&mut self) -> Result<(), StepError>;

    /// Frees what the runtime keeps for reuse, and its context.
    fn device_release(&mut self) -> Result<(), StepError>;

    /// Takes all but `leave` bytes of heap `heap`.
    fn fill_heap(&mut self, heap: u32, leave: u64) -> Result<(), StepError>;

    /// Counter `name`, or `None` where it has no meaning on this runtime.
    fn counter(&self, name: &str) -> Option<u64>;

    /// Where memory landed so far, by role, in order.
    fn placements(&self) -> Vec<PlacementRecord>;

    /// Memory type `ty` in words (index and flags), as this runtime sees the table.
    fn describe_type(&self, ty: u32) -> String;

    /// Who picked the memory types, for `expect_memory`'s messages.
    fn chooser(&self) -> String;

    /// Empties every slot and says what was left alive.
    fn finish(&mut self) -> Finish;

    /// Its async copies, where it has them.
    fn async_copies(&mut self) -> Option<&mut dyn AsyncCopies> {
        None
    }

    /// Its timed copies, where it has them.
    fn timed_copies(&mut self) -> Option<&mut dyn TimedCopies> {
        None
    }

    /// Its native buffers, where it has them.
    fn native_buffers(&mut self) -> Option<&mut dyn NativeBuffers> {
        None
    }

    /// Its work-in-flight accounting so far, where it has one.
    fn work_in_flight(&self) -> Option<WorkInFlight> {
        None
    }

    /// A maker of runtimes on the same device for other threads, where it
    /// can run several at once.
    fn fork(&self) -> Option<Fork<'a>> {
        None
    }

    /// Whether Halide's generic device layer (`device_interface.cpp`) decides
    /// what reaches this runtime: `on_runtime`'s `halide` steps run then.
    fn generic_layer(&self) -> bool {
        false
    }
}

/// Whether a placement of role `placed` answers `expect_memory: {role: asked}`.
/// `device` is a buffer's device memory wherever the runtime put it (a small
/// buffer placed for mapped uploads included); the other roles are themselves.
pub fn role_answers(asked: crate::rt::Role, placed: &str) -> bool {
    use crate::rt::Role;
    placed == asked.to_string()
        || (asked == Role::Device && placed == Role::DeviceMapped.to_string())
}

#[cfg(test)]
mod tests {
    use super::role_answers;
    use crate::rt::Role;

    #[test]
    fn role_device_answers_mapped_placements_and_the_others_only_themselves() {
        assert!(role_answers(Role::Device, "device"));
        assert!(role_answers(Role::Device, "device_mapped"));
        assert!(role_answers(Role::DeviceMapped, "device_mapped"));
        assert!(!role_answers(Role::DeviceMapped, "device"));
        assert!(!role_answers(Role::Device, "upload"));
        assert!(!role_answers(Role::Readback, "upload"));
        assert!(role_answers(Role::Upload, "upload"));
    }
}
