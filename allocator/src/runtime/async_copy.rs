//! The non-blocking copy API: Halide's copy entry points started on a stream and
//! waited for later.
//!
//! Rules: a copy started here sees every copy and kernel that finished before it
//! was started (blocking ones, and async ones that were waited for). It runs on
//! the stream of its path (upload, readback, device to device; host to host on
//! the device-copy stream), in order with the other copies of that stream and at
//! the same time as everything else. Until it is waited for, its destination
//! must not be read or written and its source not written, through any view;
//! the borrows of [`Pending`] enforce this for the buffers passed. A wait (or
//! the drop of the handle) makes its writes visible to the host and to every
//! later copy and kernel, and sets the destination's dirty bits as the blocking
//! call would. Host memory, device memory, imports and staging stay alive until
//! the copy is done, even if the buffers are dropped.

use std::time::Instant;

use crate::buffer::Buffer;
use crate::error::Result;
use crate::runtime::context::Context;
use crate::runtime::copy::CopyJob;
use crate::runtime::pending::{Completion, Event, InFlight, Pending};
use crate::types::CopyPath;
use crate::vk::device::QueueRole;

impl Context {
    fn start_job(&self, job: CopyJob, after: Vec<Event>) -> Result<Event> {
        let device = &self.inner.device;
        device.usable("an async copy")?;
        let role = match job.path() {
            CopyPath::HostToDevice => QueueRole::Upload,
            CopyPath::DeviceToHost => QueueRole::Readback,
            _ => QueueRole::Device,
        };
        let completion = Completion::new();
        let event = Event {
            completion: completion.clone(),
            timeout: device.timeout,
        };
        let ctx = self.clone();
        // A copy that waits for none is ready to run, and in flight, from now.
        let ready = after.is_empty();
        self.inner.streams.send(
            device,
            role,
            ready,
            Box::new(move |sub, busy| {
                let mut from = Instant::now();
                let result = after
                    .iter()
                    .try_for_each(Event::wait_dependency)
                    .and_then(|()| {
                        from = Instant::now();
                        if !ready {
                            busy.ready();
                        }
                        let ran = job.run(&ctx, sub);
                        busy.done();
                        ran
                    });
                // Whatever the copy holds is released before the waiter wakes, so that
                // a leak check right after the wait sees none of it.
                drop((job, after, ctx));
                completion.finish(result, from);
            }),
        )?;
        Ok(event)
    }

    /// Starts [`Context::buffer_copy`]; `dst`'s device memory is allocated before
    /// this returns. See [`Pending`] for what may be touched meanwhile.
    pub fn start_buffer_copy<'a>(
        &self,
        src: &'a Buffer,
        dst: &'a mut Buffer,
        to_device: bool,
    ) -> Result<Pending<'a>> {
        self.start_buffer_copy_after(&[], src, dst, to_device)
    }

    /// As [`Context::start_buffer_copy`], the copy beginning only once every event
    /// of `after` is done; it fails with `dependency_failed` if one of them failed.
    pub fn start_buffer_copy_after<'a>(
        &self,
        after: &[Event],
        src: &'a Buffer,
        dst: &'a mut Buffer,
        to_device: bool,
    ) -> Result<Pending<'a>> {
        let job = self.plan_buffer_copy(src, dst, to_device)?;
        let dirty = job.dirty;
        let event = self.start_job(job, after.to_vec())?;
        Ok(Pending::new(event, dst, dirty))
    }

    /// Starts [`Context::copy_to_device`]: device memory is allocated before this
    /// returns, and `host_dirty` is cleared by the wait.
    pub fn start_copy_to_device<'a>(&self, buf: &'a mut Buffer) -> Result<Pending<'a>> {
        match self.plan_copy_to_device(buf)? {
            Some(job) => {
                let dirty = job.dirty;
                let event = self.start_job(job, Vec::new())?;
                Ok(Pending::new(event, buf, dirty))
            }
            None => Ok(Pending::nothing(CopyPath::HostToDevice, buf)),
        }
    }

    /// Starts [`Context::copy_to_host`]; `device_dirty` is cleared by the wait.
    ///
    /// A readback and an upload in flight at the same time:
    ///
    /// ```no_run
    /// # fn main() -> vkcopy::Result<()> {
    /// use vkcopy::{Buffer, Context, ContextOptions, ElemType};
    /// let ctx = Context::new(ContextOptions::default())?;
    /// let mut a = Buffer::new("a", ElemType::F32, &[1 << 20])?;
    /// let mut b = Buffer::new("b", ElemType::F32, &[1 << 20])?;
    /// ctx.copy_to_device(&mut a)?;
    /// a.set_device_dirty(true); // say a kernel wrote it
    /// b.set_host_dirty(true);
    /// let down = ctx.start_copy_to_host(&mut a)?;
    /// let up = ctx.start_copy_to_device(&mut b)?;
    /// // ... other work: kernels, copies of other buffers ...
    /// down.wait()?;
    /// up.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn start_copy_to_host<'a>(&self, buf: &'a mut Buffer) -> Result<Pending<'a>> {
        match self.plan_copy_to_host(buf)? {
            Some(job) => {
                let dirty = job.dirty;
                let event = self.start_job(job, Vec::new())?;
                Ok(Pending::new(event, buf, dirty))
            }
            None => Ok(Pending::nothing(CopyPath::DeviceToHost, buf)),
        }
    }

    /// As [`Context::start_copy_to_device`], owning `buf` until [`InFlight::wait`].
    /// A bad request is reported by the wait ([`InFlight::failed_at_start`] says so).
    pub fn start_copy_to_device_owned(&self, mut buf: Buffer) -> InFlight {
        match self.plan_copy_to_device(&mut buf) {
            Err(e) => InFlight::failed(e, buf),
            Ok(None) => InFlight::new(Event::done(CopyPath::HostToDevice), buf, None),
            Ok(Some(job)) => self.start_owned(job, Vec::new(), buf),
        }
    }

    /// As [`Context::start_copy_to_host`], owning `buf` until [`InFlight::wait`].
    pub fn start_copy_to_host_owned(&self, buf: Buffer) -> InFlight {
        match self.plan_copy_to_host(&buf) {
            Err(e) => InFlight::failed(e, buf),
            Ok(None) => InFlight::new(Event::done(CopyPath::DeviceToHost), buf, None),
            Ok(Some(job)) => self.start_owned(job, Vec::new(), buf),
        }
    }

    /// As [`Context::start_buffer_copy_after`], owning `dst` until [`InFlight::wait`];
    /// `src` must not be written until then.
    pub fn start_buffer_copy_owned(
        &self,
        after: &[Event],
        src: &Buffer,
        mut dst: Buffer,
        to_device: bool,
    ) -> InFlight {
        match self.plan_buffer_copy(src, &mut dst, to_device) {
            Err(e) => InFlight::failed(e, dst),
            Ok(job) => self.start_owned(job, after.to_vec(), dst),
        }
    }

    fn start_owned(&self, job: CopyJob, after: Vec<Event>, buf: Buffer) -> InFlight {
        let dirty = job.dirty;
        match self.start_job(job, after) {
            Ok(event) => InFlight::new(event, buf, Some(dirty)),
            Err(e) => InFlight::failed(e, buf),
        }
    }
}
