//! vkcopy's API as a [`Runtime`]: the steps' [`State`] over one context. A
//! buffer is its own host side; views alias device memory through the
//! buffer's region, which lives while any view of it does.

use std::time::Instant;

use super::native::{Native, NativeError};
use super::{AsyncCopies, Fork, NativeBuffers, TimedCopies, WorkInFlight};
use super::{Capability, DeviceKernel, Finish, Flags, Runtime, State, StepError, ViewKind};
use crate::rt::{Buffer, Context, DeviceType, Expr, Kernels};
use vkcopy_results::outcome::PlacementRecord;

impl<'a> Runtime<'a> for State<'a> {
    fn capabilities(&self) -> &'static [Capability] {
        &Capability::ALL
    }

    fn device_type(&self) -> Option<DeviceType> {
        Some(self.ctx.info().device_type)
    }

    fn slot_name(&self, slot: usize) -> String {
        self.name(slot).to_owned()
    }

    fn put(&mut self, slot: usize, host: Buffer) -> Result<(), StepError> {
        State::put(self, slot, host);
        Ok(())
    }

    fn host(&self, slot: usize) -> Result<&Buffer, StepError> {
        self.get(slot)
    }

    fn host_mut(&mut self, slot: usize) -> Result<&mut Buffer, StepError> {
        self.get_mut(slot)
    }

    fn flags(&self, slot: usize) -> Result<Flags, StepError> {
        let b = self.get(slot)?;
        Ok(Flags {
            host_dirty: b.host_dirty(),
            device_dirty: b.device_dirty(),
            has_device: b.has_device_allocation(),
        })
    }

    fn set_dirty(
        &mut self,
        slot: usize,
        host_dirty: Option<bool>,
        device_dirty: Option<bool>,
    ) -> Result<(), StepError> {
        // Through the setters: `false` says the other side holds the same data,
        // also for writes counted through views of the same memory.
        let b = self.get_mut(slot)?;
        if let Some(h) = host_dirty {
            b.set_host_dirty(h);
        }
        if let Some(d) = device_dirty {
            b.set_device_dirty(d);
        }
        Ok(())
    }

    fn device_malloc(&mut self, slot: usize) -> Result<(), StepError> {
        let ctx = self.ctx;
        Ok(ctx.device_malloc(self.get_mut(slot)?)?)
    }

    fn device_free(&mut self, slot: usize) -> Result<(), StepError> {
        let ctx = self.ctx;
        Ok(ctx.device_free(self.get_mut(slot)?)?)
    }

    fn release(&mut self, slot: usize) -> Result<(), StepError> {
        // Views hold the region: it goes with the last of them.
        self.device_free(slot)?;
        self.drop_slot(slot);
        Ok(())
    }

    fn copy_to_device(&mut self, slot: usize) -> Result<(), StepError> {
        let ctx = self.ctx;
        Ok(ctx.copy_to_device(self.get_mut(slot)?)?)
    }

    fn copy_to_host(&mut self, slot: usize) -> Result<(), StepError> {
        let ctx = self.ctx;
        Ok(ctx.copy_to_host(self.get_mut(slot)?)?)
    }

    fn buffer_copy(&mut self, from: usize, to: usize, to_device: bool) -> Result<(), StepError> {
        let ctx = self.ctx;
        let (src, dst) = self.pair(from, to)?;
        ctx.buffer_copy(src, dst, to_device)?;
        Ok(())
    }

    fn put_view(
        &mut self,
        _from: usize,
        to: usize,
        view: Buffer,
        _how: ViewKind,
    ) -> Result<(), StepError> {
        // A view of a vkcopy buffer already aliases its device memory.
        State::put(self, to, view);
        Ok(())
    }

    fn kernel(&mut self, kernel: DeviceKernel<'_>) -> Result<(), StepError> {
        let ctx = self.ctx;
        match kernel {
            DeviceKernel::Fill { buffer, value } => {
                let b = self.get_mut(buffer)?;
                supported(ctx, b)?;
                ctx.kernel_fill(b, value)?;
                Ok(())
            }
            DeviceKernel::Add {
                out,
                inputs,
                constant,
            } => run_kernel(self, out, inputs, Kernel::Add(constant)),
            DeviceKernel::Map { out, inputs, value } => {
                run_kernel(self, out, inputs, Kernel::Map(value))
            }
            DeviceKernel::Sum { out, input, dim } => {
                let mut i = self.take(input)?;
                let result = self.get_mut(out).and_then(|o| {
                    supported(ctx, o)?;
                    ctx.kernel_sum(o, &mut i, dim).map_err(StepError::Runtime)
                });
                State::put(self, input, i);
                result
            }
        }
    }

    fn reuse_device_allocations(&mut self, on: bool) -> Result<(), StepError> {
        self.ctx.reuse_device_allocations(on);
        Ok(())
    }

    fn device_release(&mut self) -> Result<(), StepError> {
        self.ctx.device_release();
        Ok(())
    }

    fn device_and_host_malloc(&mut self, slot: usize) -> Result<(), StepError> {
        let ctx = self.ctx;
        Ok(ctx.device_and_host_malloc(self.get_mut(slot)?)?)
    }

    fn device_and_host_free(&mut self, slot: usize) -> Result<(), StepError> {
        let ctx = self.ctx;
        Ok(ctx.device_and_host_free(self.get_mut(slot)?)?)
    }

    fn release_unused(&mut self) -> Result<(), StepError> {
        self.ctx.release_unused();
        Ok(())
    }

    fn fill_heap(&mut self, heap: u32, leave: u64) -> Result<(), StepError> {
        self.ctx.fill_heap(heap, leave)?;
        Ok(())
    }

    fn counter(&self, name: &str) -> Option<u64> {
        let have = self.ctx.counters();
        Some(have.iter().find(|(n, _)| *n == name).map_or(0, |(_, g)| *g))
    }

    fn placements(&self) -> Vec<PlacementRecord> {
        self.ctx
            .stats()
            .placements()
            .iter()
            .map(PlacementRecord::from)
            .collect()
    }

    fn describe_type(&self, ty: u32) -> String {
        self.ctx.memory_table().describe_type(ty)
    }

    fn chooser(&self) -> String {
        format!("policy {}", self.ctx.policy())
    }

    fn finish(&mut self) -> Finish {
        let ctx = self.ctx;
        self.clear();
        let leaks = ctx.leak_check();
        Finish {
            leaks: (!leaks.is_empty()).then(|| leaks.to_string()),
            findings: Vec::new(),
            messages: ctx.take_validation_messages(),
        }
    }

    fn async_copies(&mut self) -> Option<&mut dyn AsyncCopies> {
        Some(self)
    }

    fn timed_copies(&mut self) -> Option<&mut dyn TimedCopies> {
        Some(self)
    }

    fn native_buffers(&mut self) -> Option<&mut dyn NativeBuffers> {
        Some(self)
    }

    fn work_in_flight(&self) -> Option<WorkInFlight> {
        let work = &self.ctx.stats().work_in_flight;
        Some(WorkInFlight {
            peak: work.peak(),
            created: work.created(),
            overlapped: self.overlapped(),
        })
    }

    fn fork(&self) -> Option<Fork<'a>> {
        let ctx = self.ctx;
        Some(Box::new(move |names| Box::new(State::new(ctx, names))))
    }
}

/// Skips the case when the device cannot run kernels on the buffer's element type.
fn supported(ctx: &Context, b: &Buffer) -> Result<(), StepError> {
    ctx.kernel_supports(b.elem())
        .map_err(|e| StepError::Unsupported(e.to_string()))
}

/// A kernel of an output and inputs.
enum Kernel<'a> {
    Add(i64),
    Map(&'a Expr),
}

/// An add or map kernel of `out` over `inputs`.
fn run_kernel(
    s: &mut State,
    out: usize,
    inputs: &[usize],
    kernel: Kernel<'_>,
) -> Result<(), StepError> {
    // Take the buffers out of their slots for disjoint borrows; put them back.
    let mut o = s.take(out)?;
    let mut ins = Vec::new();
    for &i in inputs {
        match s.take(i) {
            Ok(b) => ins.push((i, b)),
            Err(e) => {
                State::put(s, out, o);
                for (j, b) in ins {
                    State::put(s, j, b);
                }
                return Err(e);
            }
        }
    }
    let ctx = s.ctx;
    let result = supported(ctx, &o)
        .and_then(|()| ins.iter().try_for_each(|(_, b)| supported(ctx, b)))
        .and_then(|()| {
            let mut refs: Vec<&mut Buffer> = ins.iter_mut().map(|(_, b)| b).collect();
            match kernel {
                Kernel::Add(constant) => ctx.kernel_add(&mut o, &mut refs, constant),
                Kernel::Map(value) => ctx.kernel_map(&mut o, &mut refs, value),
            }
            .map_err(StepError::Runtime)
        });
    State::put(s, out, o);
    for (j, b) in ins {
        State::put(s, j, b);
    }
    result
}

impl AsyncCopies for State<'_> {
    fn start_copy_to_device(&mut self, slot: usize) -> Result<(), StepError> {
        let buf = self.take(slot)?;
        let copy = self.ctx.start_copy_to_device_owned(buf);
        self.start(slot, copy)
    }

    fn start_copy_to_host(&mut self, slot: usize) -> Result<(), StepError> {
        let buf = self.take(slot)?;
        let copy = self.ctx.start_copy_to_host_owned(buf);
        self.start(slot, copy)
    }

    fn start_buffer_copy(
        &mut self,
        from: usize,
        to: usize,
        to_device: bool,
        after: &[usize],
    ) -> Result<(), StepError> {
        let events = after
            .iter()
            .map(|a| self.event(*a))
            .collect::<Result<Vec<_>, _>>()?;
        let dst = self.take(to)?;
        let src = match self.get(from) {
            Ok(src) => src,
            Err(e) => {
                self.put(to, dst);
                return Err(e);
            }
        };
        let copy = self
            .ctx
            .start_buffer_copy_owned(&events, src, dst, to_device);
        self.start(to, copy)
    }

    fn wait(&mut self, slot: usize) -> Result<(), StepError> {
        State::wait(self, slot)
    }

    fn ran(&self, slot: usize) -> Result<Option<(Instant, Instant)>, StepError> {
        Ok(self.event(slot)?.interval())
    }

    fn copying(&self) -> bool {
        State::copying(self)
    }

    fn worked_since(&mut self, from: Instant) {
        State::worked_since(self, from)
    }

    fn unwaited(&self) -> Vec<String> {
        self.in_flight()
    }
}

impl NativeBuffers for State<'_> {
    fn make(&mut self, native: usize, bytes: u64) -> Result<(), StepError> {
        let n = Native::new(self.ctx, bytes).map_err(|e| match e {
            NativeError::Unsupported(m) => StepError::Unsupported(m),
            NativeError::Failed(m) => StepError::Check(m),
        })?;
        self.natives.insert(native, n);
        Ok(())
    }

    fn wrap(&mut self, buffer: usize, native: usize, offset: u64) -> Result<(), StepError> {
        let ctx = self.ctx;
        let (handle, size) = self.native(native)?;
        let b = self.get_mut(buffer)?;
        ctx.wrap_vk_buffer_at(b, handle, offset, size)?;
        self.wrapped.insert(buffer, handle);
        Ok(())
    }

    fn detach(&mut self, buffer: usize) -> Result<(), StepError> {
        let ctx = self.ctx;
        let handle = ctx.detach_vk_buffer(self.get_mut(buffer)?)?;
        let expected = self.wrapped.remove(&buffer);
        if expected != Some(handle) {
            return Err(StepError::Check(format!(
                "detach_native: {} gave back {handle:?}, not the native buffer wrapped ({expected:?})",
                self.name(buffer)
            )));
        }
        Ok(())
    }
}
