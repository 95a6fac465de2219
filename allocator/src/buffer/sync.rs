//! Dirty state shared by a buffer and its views. Each buffer keeps Halide's own
//! `host_dirty` / `device_dirty` bits; in addition the host memory and the device
//! region count the writes made through any buffer over them, and each buffer
//! remembers the counts it has seen. A kernel on a crop thus makes its parent
//! device-dirty ([`Buffer::is_device_dirty`]), and host writes through a crop make
//! the parent host-dirty, without the caller copying bits between views.
//!
//! A buffer's own writes do not make it "newer" than itself: its own bit says
//! those, so Halide's per-buffer rules (and direct assignments of the bits) work
//! unchanged for a buffer without views. The counts are conservative: a parent may
//! upload or read back a box that a view already synchronised.

use crate::buffer::{Buffer, DeviceView};

/// After a buffer's own write (the count was `before`): a buffer that had seen
/// every earlier write has seen this one too; one that had not still has not.
pub(crate) fn seen_own_write(seen: &mut u64, before: u64) {
    if *seen == before {
        *seen = before + 1;
    }
}

impl Buffer {
    /// This buffer's own `host_dirty` bit, as Halide's `Buffer::host_dirty()`:
    /// set by writes through this buffer. [`Buffer::is_host_dirty`] also counts
    /// writes through views of the same memory.
    pub fn host_dirty(&self) -> bool {
        self.host_dirty
    }

    /// This buffer's own `device_dirty` bit, as Halide's `Buffer::device_dirty()`.
    /// [`Buffer::is_device_dirty`] also counts kernels and copies into views of the
    /// same memory.
    pub fn device_dirty(&self) -> bool {
        self.device_dirty
    }

    /// Whether the host holds data the device lacks: `host_dirty`, or host writes
    /// through another buffer over the same host memory since this buffer last
    /// synchronised ([`Context::copy_to_device`](crate::Context::copy_to_device) or
    /// [`Context::copy_to_host`](crate::Context::copy_to_host)).
    pub fn is_host_dirty(&self) -> bool {
        self.host_dirty || self.host_newer()
    }

    /// Whether the device holds data the host lacks: `device_dirty`, or a kernel or
    /// copy into the same device memory through another buffer (a crop, a slice, a
    /// view) since this buffer last synchronised.
    pub fn is_device_dirty(&self) -> bool {
        self.device_dirty || self.device_newer()
    }

    /// Sets `host_dirty`. `true` also tells every view of the same host memory;
    /// `false` says the device holds what the host does.
    pub fn set_host_dirty(&mut self, dirty: bool) {
        self.host_dirty = dirty;
        if let Some(h) = &self.host {
            let mem = h.memory.read().unwrap_or_else(|p| p.into_inner());
            if dirty {
                seen_own_write(&mut self.host_seen, mem.count_write());
            } else {
                self.host_seen = mem.writes();
            }
        }
    }

    /// Sets `device_dirty`. `true` also tells every view of the same device memory
    /// (what a kernel writing this buffer does); `false` says the host holds what
    /// the device does.
    pub fn set_device_dirty(&mut self, dirty: bool) {
        self.device_dirty = dirty;
        if let Some(d) = &self.device {
            if dirty {
                seen_own_write(&mut self.device_seen, d.region.count_write());
            } else {
                self.device_seen = d.region.writes();
            }
        }
    }

    /// Host writes through other buffers since this one last synchronised.
    pub(crate) fn host_newer(&self) -> bool {
        self.host.as_ref().is_some_and(|h| {
            h.memory.read().unwrap_or_else(|p| p.into_inner()).writes() > self.host_seen
        })
    }

    /// Device writes through other buffers since this one last synchronised.
    pub(crate) fn device_newer(&self) -> bool {
        self.device
            .as_ref()
            .is_some_and(|d| d.region.writes() > self.device_seen)
    }

    /// Both sides hold the same data in this buffer's box (after a copy of the
    /// whole box either way): clears both bits and takes the current counts.
    pub(crate) fn synced(&mut self) {
        self.host_dirty = false;
        self.device_dirty = false;
        if let Some(h) = &self.host {
            self.host_seen = h.memory.read().unwrap_or_else(|p| p.into_inner()).writes();
        }
        if let Some(d) = &self.device {
            self.device_seen = d.region.writes();
        }
    }

    /// Gives the buffer new device memory, which nothing has written yet.
    pub(crate) fn set_device(&mut self, view: DeviceView) {
        self.device_seen = view.region.writes();
        self.device = Some(view);
    }
}
