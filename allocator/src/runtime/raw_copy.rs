//! The hardware's copy, as a reference for measurements: one `vkCmdCopyBuffer`
//! between memory this context allocated for the purpose, with none of the
//! runtime's planning, imports, staging or dirty bits. A perf check holds the
//! runtime's copies to a ratio of it, measured in the same run on the same queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;

use crate::error::{Error, Result};
use crate::memory::policy::Role;
use crate::runtime::context::Context;
use crate::types::CopyPath;
use crate::vk::region::Region;

/// A plain copy of `bytes` along one path, ready to run many times.
///
/// Host memory is the policy's `readback` memory for both directions: under the
/// vkcopy policy host memory the GPU reaches over the bus; under Halide's old
/// policy BAR-mapped device memory.
pub struct RawCopy<'a> {
    ctx: &'a Context,
    src: Arc<Region>,
    dst: Arc<Region>,
    bytes: u64,
    /// The host reads the destination (a readback): the copy ends with a barrier
    /// to the host stage, as the runtime's readbacks do.
    host_reads: bool,
}

impl Context {
    /// A plain copy of `bytes` along `path` (host to device, device to host or
    /// device to device) between two allocations of this context, as a reference
    /// for the runtime's own copies. Frees its memory when dropped.
    pub fn raw_copy(&self, path: CopyPath, bytes: u64) -> Result<RawCopy<'_>> {
        if bytes == 0 {
            return Err(Error::BadDimensions("a raw copy of 0 bytes".into()));
        }
        let (src, dst) = match path {
            CopyPath::HostToDevice => (Role::Readback, Role::Device),
            CopyPath::DeviceToHost => (Role::Device, Role::Readback),
            CopyPath::DeviceToDevice => (Role::Device, Role::Device),
            CopyPath::HostToHost => {
                return Err(Error::BadDimensions(
                    "a raw copy goes through the device; host to host is a memcpy".into(),
                ))
            }
        };
        Ok(RawCopy {
            ctx: self,
            src: self.allocate_region(src, bytes)?,
            dst: self.allocate_region(dst, bytes)?,
            bytes,
            host_reads: path == CopyPath::DeviceToHost,
        })
    }
}

impl RawCopy<'_> {
    /// Bytes each run copies.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Copies once on the context's compute queue and waits; the host time from
    /// recording to the end of the wait.
    pub fn run(&self) -> Result<Duration> {
        let device = &self.ctx.raw_device();
        let (src, dst) = (self.src.vk_buffer(), self.dst.vk_buffer());
        let region = [vk::BufferCopy {
            src_offset: 0,
            dst_offset: 0,
            size: self.bytes,
        }];
        let start = Instant::now();
        let copy = |cmd| {
            // SAFETY: both buffers are alive while `self` is, and hold `bytes` bytes.
            unsafe { device.cmd_copy_buffer(cmd, src, dst, &region) }
        };
        let sub = self.ctx.inner.submitters.take()?;
        match self.host_reads {
            true => sub.run_timed(false, copy)?,
            false => sub.run_on_device(false, copy)?,
        };
        Ok(start.elapsed())
    }
}
