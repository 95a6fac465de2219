//! Halide's copy entry points with their dirty-bit rules (`halide_buffer_copy`,
//! `copy_to_device`, `copy_to_host` in `src/runtime/device_interface.cpp`): which
//! side of the source holds valid data, which path to take, and which side of
//! the destination ends dirty.

use crate::buffer::{Buffer, DeviceView, HostView};
use crate::error::{Error, Result};
use crate::runtime::context::Context;
use crate::types::{CopyPath, Dim};
use crate::vk::submit::Submitter;

fn no_valid_data(src: &Buffer) -> Error {
    Error::NoDeviceAllocation(format!(
        "{} holds no valid data: no host memory, or a stale host (device_dirty), and no device memory",
        src.name()
    ))
}

/// Sets `dst`'s dirty bits after a copy into it: `(host_dirty, device_dirty)`,
/// through the setters, so that views of its memory learn of the write; both
/// clean means the two sides now agree.
pub(crate) fn finish_dirty(dst: &mut Buffer, (host, device): (bool, bool)) {
    if device {
        dst.host_dirty = false;
        dst.set_device_dirty(true);
    } else if host {
        dst.device_dirty = false;
        dst.set_host_dirty(true);
    } else {
        dst.synced();
    }
}

/// The two sides of a planned copy.
#[derive(Clone)]
pub(crate) enum Sides {
    DeviceToDevice(DeviceView, DeviceView),
    HostToDevice(HostView, DeviceView),
    HostToHost(HostView, HostView),
    DeviceToHost(DeviceView, HostView),
}

/// A copy with its sides, shapes and the dirty bits its destination ends with:
/// everything it needs, owned, so that it can run on another thread.
#[derive(Clone)]
pub(crate) struct CopyJob {
    pub(crate) sides: Sides,
    pub(crate) src_dims: Vec<Dim>,
    pub(crate) dst_dims: Vec<Dim>,
    pub(crate) elem_bytes: usize,
    /// `host_dirty`, `device_dirty` of the destination once the copy is done.
    pub(crate) dirty: (bool, bool),
}

impl CopyJob {
    /// A copy between the two sides of `buf`, which then agree.
    fn within(buf: &Buffer, sides: Sides) -> Self {
        CopyJob {
            sides,
            src_dims: buf.dims().to_vec(),
            dst_dims: buf.dims().to_vec(),
            elem_bytes: buf.elem().bytes(),
            dirty: (false, false),
        }
    }

    /// The path the copy takes.
    pub(crate) fn path(&self) -> CopyPath {
        match self.sides {
            Sides::DeviceToDevice(..) => CopyPath::DeviceToDevice,
            Sides::HostToDevice(..) => CopyPath::HostToDevice,
            Sides::HostToHost(..) => CopyPath::HostToHost,
            Sides::DeviceToHost(..) => CopyPath::DeviceToHost,
        }
    }

    /// Makes the copy with `sub`'s queue, and waits for it.
    pub(crate) fn run(&self, ctx: &Context, sub: &Submitter) -> Result<CopyPath> {
        let (s, d, eb) = (&self.src_dims[..], &self.dst_dims[..], self.elem_bytes);
        let done = match &self.sides {
            Sides::DeviceToDevice(a, b) => ctx.device_to_device(sub, (a, s), (b, d), eb),
            Sides::HostToDevice(a, b) => ctx.host_device_copy(sub, (a, s), (b, d), eb, self.path()),
            Sides::HostToHost(a, b) => ctx.host_to_host((a, s), (b, d), eb),
            Sides::DeviceToHost(a, b) => ctx.host_device_copy(sub, (b, d), (a, s), eb, self.path()),
        };
        // After a timeout the device may still be copying: memory freed later
        // waits for it first (`DeviceShared::settle`).
        done.map(|()| self.path())
    }
}

impl Context {
    /// Plans Halide's `halide_buffer_copy` of `src` to `dst` (see
    /// [`Context::buffer_copy`]), allocating `dst`'s device memory when needed.
    pub(crate) fn plan_buffer_copy(
        &self,
        src: &Buffer,
        dst: &mut Buffer,
        to_device: bool,
    ) -> Result<CopyJob> {
        if src.elem().bytes() != dst.elem().bytes() {
            return Err(Error::IncompatibleBuffers(format!(
                "{} has {}-byte elements, {} has {}-byte elements",
                src.name(),
                src.elem().bytes(),
                dst.name(),
                dst.elem().bytes()
            )));
        }
        if src.dimensions() != dst.dimensions() {
            return Err(Error::IncompatibleBuffers(format!(
                "{} has {} dimensions, {} has {}",
                src.name(),
                src.dimensions(),
                dst.name(),
                dst.dimensions()
            )));
        }
        if !to_device && !dst.has_host() {
            return Err(Error::HostIsNull(format!(
                "buffer_copy to the host of {}, which has no host memory",
                dst.name()
            )));
        }
        let from_device_valid = src.device.is_some() && (!src.has_host() || !src.is_host_dirty());
        let from_host_valid = src.has_host() && (!src.is_device_dirty() || src.device.is_none());
        let sides = if to_device {
            self.device_malloc(dst)?;
            let d = dst.device.clone().expect("device_malloc succeeded");
            match (&src.device, &src.host) {
                (Some(s), _) if from_device_valid => Sides::DeviceToDevice(s.clone(), d),
                (_, Some(s)) if from_host_valid => Sides::HostToDevice(s.clone(), d),
                _ => return Err(no_valid_data(src)),
            }
        } else {
            let d = dst.host.clone().expect("checked");
            match (&src.host, &src.device) {
                (Some(s), _) if from_host_valid => Sides::HostToHost(s.clone(), d),
                (_, Some(s)) if from_device_valid => Sides::DeviceToHost(s.clone(), d),
                _ => return Err(no_valid_data(src)),
            }
        };
        Ok(CopyJob {
            sides,
            src_dims: src.dims().to_vec(),
            dst_dims: dst.dims().to_vec(),
            elem_bytes: src.elem().bytes(),
            dirty: (!to_device, to_device),
        })
    }

    /// Plans Halide's `copy_to_device`: None when the host is not dirty (after
    /// allocating device memory when needed). Host writes through views of the same
    /// memory count ([`Buffer::is_host_dirty`]) unless the device side is newer;
    /// `host_dirty` with a newer device side is [`Error::BothDirty`].
    pub(crate) fn plan_copy_to_device(&self, buf: &mut Buffer) -> Result<Option<CopyJob>> {
        if buf.host_dirty && buf.is_device_dirty() {
            return Err(Error::BothDirty(buf.name().to_owned()));
        }
        self.device_malloc(buf)?;
        if !(buf.host_dirty || (buf.host_newer() && !buf.is_device_dirty())) {
            return Ok(None);
        }
        let host = buf
            .host
            .clone()
            .ok_or_else(|| Error::HostIsNull(buf.name().to_owned()))?;
        let dev = buf.device.clone().expect("device_malloc succeeded");
        Ok(Some(CopyJob::within(buf, Sides::HostToDevice(host, dev))))
    }

    /// Plans Halide's `copy_to_host`: None when the device is not dirty. Kernels and
    /// copies into views of the same device memory count ([`Buffer::is_device_dirty`]).
    pub(crate) fn plan_copy_to_host(&self, buf: &Buffer) -> Result<Option<CopyJob>> {
        if !buf.is_device_dirty() {
            return Ok(None);
        }
        if buf.host_dirty {
            return Err(Error::BothDirty(buf.name().to_owned()));
        }
        let host = buf
            .host
            .clone()
            .ok_or_else(|| Error::HostIsNull(buf.name().to_owned()))?;
        let dev = buf
            .device
            .clone()
            .ok_or_else(|| Error::NoDeviceAllocation(buf.name().to_owned()))?;
        Ok(Some(CopyJob::within(buf, Sides::DeviceToHost(dev, host))))
    }

    /// Halide's `halide_buffer_copy` (`src/runtime/device_interface.cpp`): copies the
    /// intersection of `src` and `dst` to `dst`'s device memory (`to_device`) or
    /// host memory, from whichever side of `src` holds valid data, preferring the
    /// device for a device destination and the host for a host destination. On
    /// success `dst` is dirty on the side written and clean on the other.
    pub fn buffer_copy(&self, src: &Buffer, dst: &mut Buffer, to_device: bool) -> Result<CopyPath> {
        let job = self.plan_buffer_copy(src, dst, to_device)?;
        let path = job.run(self, &*self.inner.submitters.take()?)?;
        finish_dirty(dst, job.dirty);
        Ok(path)
    }

    /// Halide's `copy_to_device`: allocates device memory when needed and copies the
    /// host data when the host is dirty; clears `host_dirty`.
    pub fn copy_to_device(&self, buf: &mut Buffer) -> Result<()> {
        if let Some(job) = self.plan_copy_to_device(buf)? {
            job.run(self, &*self.inner.submitters.take()?)?;
            buf.synced();
        }
        Ok(())
    }

    /// Halide's `copy_to_host`: copies device data to the host when the device is
    /// dirty; clears `device_dirty`.
    pub fn copy_to_host(&self, buf: &mut Buffer) -> Result<()> {
        if let Some(job) = self.plan_copy_to_host(buf)? {
            job.run(self, &*self.inner.submitters.take()?)?;
            buf.synced();
        }
        Ok(())
    }
}
