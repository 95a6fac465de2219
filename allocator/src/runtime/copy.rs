//! Halide's copy entry points with their dirty-bit rules (`halide_buffer_copy`,
//! `copy_to_device`, `copy_to_host` in `src/runtime/device_interface.cpp`): which
//! side of the source holds valid data, which path to take, and which side of
//! the destination ends dirty.

use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::runtime::context::Context;
use crate::types::CopyPath;

fn no_valid_data(src: &Buffer) -> Error {
    Error::NoDeviceAllocation(format!(
        "{} holds no valid data: no host memory, or a stale host (device_dirty), and no device memory",
        src.name()
    ))
}

impl Context {
    /// Halide's `halide_buffer_copy` (`src/runtime/device_interface.cpp`): copies the
    /// intersection of `src` and `dst` to `dst`'s device memory (`to_device`) or
    /// host memory, from whichever side of `src` holds valid data, preferring the
    /// device for a device destination and the host for a host destination. On
    /// success `dst` is dirty on the side written and clean on the other.
    pub fn buffer_copy(&self, src: &Buffer, dst: &mut Buffer, to_device: bool) -> Result<CopyPath> {
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
        let eb = src.elem().bytes();
        let path = if to_device {
            self.device_malloc(dst)?;
            let d = dst.device.as_ref().expect("device_malloc succeeded");
            if from_device_valid {
                let s = src.device.as_ref().expect("checked");
                self.device_to_device((s, src.dims()), (d, dst.dims()), eb)?;
                CopyPath::DeviceToDevice
            } else if from_host_valid {
                let s = src.host.as_ref().expect("checked");
                self.upload((s, src.dims()), (d, dst.dims()), eb)?;
                CopyPath::HostToDevice
            } else {
                return Err(no_valid_data(src));
            }
        } else {
            let d = dst.host.as_ref().expect("checked");
            if from_host_valid {
                let s = src.host.as_ref().expect("checked");
                self.host_to_host((s, src.dims()), (d, dst.dims()), eb)?;
                CopyPath::HostToHost
            } else if from_device_valid {
                let s = src.device.as_ref().expect("checked");
                self.readback((s, src.dims()), (d, dst.dims()), eb)?;
                CopyPath::DeviceToHost
            } else {
                return Err(no_valid_data(src));
            }
        };
        // Through the setters, so that views of `dst`'s memory learn of the write.
        if to_device {
            dst.host_dirty = false;
            dst.set_device_dirty(true);
        } else {
            dst.device_dirty = false;
            dst.set_host_dirty(true);
        }
        Ok(path)
    }

    /// Halide's `copy_to_device`: allocates device memory when needed and copies the
    /// host data when the host is dirty; clears `host_dirty`. Host writes through
    /// views of the same memory count ([`Buffer::is_host_dirty`]) unless the device
    /// side is newer; `host_dirty` with a newer device side is [`Error::BothDirty`].
    pub fn copy_to_device(&self, buf: &mut Buffer) -> Result<()> {
        if buf.host_dirty && buf.is_device_dirty() {
            return Err(Error::BothDirty(buf.name().to_owned()));
        }
        self.device_malloc(buf)?;
        if buf.host_dirty || (buf.host_newer() && !buf.is_device_dirty()) {
            let host = buf
                .host
                .as_ref()
                .ok_or_else(|| Error::HostIsNull(buf.name().to_owned()))?;
            let dev = buf.device.as_ref().expect("device_malloc succeeded");
            self.upload((host, buf.dims()), (dev, buf.dims()), buf.elem().bytes())?;
            buf.synced();
        }
        Ok(())
    }

    /// Halide's `copy_to_host`: copies device data to the host when the device is
    /// dirty; clears `device_dirty`. Kernels and copies into views of the same
    /// device memory count ([`Buffer::is_device_dirty`]): after a kernel on a crop,
    /// the parent's `copy_to_host` reads the device.
    pub fn copy_to_host(&self, buf: &mut Buffer) -> Result<()> {
        if !buf.is_device_dirty() {
            return Ok(());
        }
        if buf.host_dirty {
            return Err(Error::BothDirty(buf.name().to_owned()));
        }
        let host = buf
            .host
            .as_ref()
            .ok_or_else(|| Error::HostIsNull(buf.name().to_owned()))?;
        let dev = buf
            .device
            .as_ref()
            .ok_or_else(|| Error::NoDeviceAllocation(buf.name().to_owned()))?;
        self.readback((dev, buf.dims()), (host, buf.dims()), buf.elem().bytes())?;
        buf.synced();
        Ok(())
    }
}
