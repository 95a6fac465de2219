//! Device allocations of buffers: `device_malloc` and `device_free`
//! (Halide's `halide_vulkan_device_malloc` / `device_free` in `src/runtime/vulkan.cpp`).
//!
//! A [`DeviceView`] shares its [`Region`] through an `Arc`: the region's use
//! count starts at one (the fix of Halide #9237), a view retains it, and the
//! memory goes back to the allocator when the last user drops it.

use std::sync::Arc;

use ash::vk;

use crate::buffer::{Buffer, DeviceView};
use crate::error::{Error, Result};
use crate::memory::policy::Role;
use crate::runtime::context::Context;
use crate::runtime::mapped_choice::MAPPED_MAX_BYTES;
use crate::vk::region::Region;

impl Context {
    /// A region of `size` bytes placed for `role` by the context's policy: device
    /// memory for `Role::Device` (`DeviceMapped`: host-visible first), staging for
    /// `Upload` / `Readback`. It goes back to
    /// the pool when the last `Arc` drops. Buffers get theirs through `device_malloc`.
    pub fn allocate(&self, role: Role, size: u64) -> Result<Arc<Region>> {
        self.allocate_region(role, size)
    }

    pub(crate) fn allocate_region(&self, role: Role, size: u64) -> Result<Arc<Region>> {
        Region::allocate(&self.inner.allocator, role, size).map(Arc::new)
    }

    /// A region for a buffer's own device memory, addressed by its views as the
    /// emulated Halide bugs say.
    fn buffer_region(&self, mut region: Region) -> Arc<Region> {
        region.offsets_from_owner = self.inner.emulate.crop_offset_from_owner();
        Arc::new(region)
    }

    /// Gives `buf` device memory of `size_in_bytes`, zero-filled as Halide's Vulkan
    /// runtime does. Keeps an existing allocation that is large enough. Leaves the
    /// dirty bits alone: a host-dirty buffer stays host-dirty.
    pub fn device_malloc(&self, buf: &mut Buffer) -> Result<()> {
        let size = buf.size_in_bytes();
        if let Some(view) = &buf.device {
            if !self.owns(view.region.device()) {
                return Err(Error::IncompatibleBuffers(format!(
                    "{} has device memory of another context",
                    buf.name()
                )));
            }
            if view.region.size() >= view.byte_offset(buf.elem().bytes()) + size {
                return Ok(());
            }
            buf.device = None;
        }
        // Small buffers go where the CPU can write their uploads, if this context
        // has that route (`mapped.rs`).
        let role = match self.inner.host_routes.mapped && size < MAPPED_MAX_BYTES {
            true => Role::DeviceMapped,
            false => Role::Device,
        };
        let region = self.buffer_region(Region::allocate(&self.inner.allocator, role, size)?);
        self.inner.submitters.take()?.run(|cmd| {
            // SAFETY: the buffer was just created and is not in use; its size is a
            // multiple of 4 (the allocator rounds it up), so WHOLE_SIZE covers it all.
            unsafe {
                self.raw_device()
                    .cmd_fill_buffer(cmd, region.vk_buffer(), 0, vk::WHOLE_SIZE, 0);
            }
        })?;
        buf.set_device(DeviceView { region, offset: 0 });
        Ok(())
    }

    /// Gives `buf` host memory (zeros) if it has none, and device memory
    /// (Halide's `device_and_host_malloc`).
    pub fn device_and_host_malloc(&self, buf: &mut Buffer) -> Result<()> {
        buf.ensure_host()?;
        self.device_malloc(buf)
    }

    /// Frees `buf`'s device and host memory and clears both dirty bits (Halide's
    /// `device_and_host_free`).
    pub fn device_and_host_free(&self, buf: &mut Buffer) -> Result<()> {
        self.device_free(buf)?;
        buf.host = None;
        buf.host_dirty = false;
        Ok(())
    }

    /// Makes `buffer`, a `VkBuffer` the caller created on this context's device and
    /// bound to memory, `buf`'s device memory: a region like any other, so copies,
    /// crops, slices and kernels work with it (Halide's `halide_vulkan_wrap_vk_buffer`
    /// stores a raw handle where the runtime expects a region: Halide #8715). The
    /// buffer must hold at least `buf.size_in_bytes()` bytes, have usage
    /// `TRANSFER_SRC | TRANSFER_DST | STORAGE_BUFFER`, and outlive its use here; the
    /// caller destroys it after [`Context::detach_vk_buffer`].
    pub fn wrap_vk_buffer(&self, buf: &mut Buffer, buffer: vk::Buffer, size: u64) -> Result<()> {
        self.wrap_vk_buffer_at(buf, buffer, 0, size)
    }

    /// As [`Context::wrap_vk_buffer`], with `buf`'s element at its mins `offset`
    /// bytes into `buffer` (of `size` bytes): one caller buffer holding several
    /// Halide buffers, as in Halide #8715 (a sub-buffer per channel). `offset` is a
    /// multiple of the element size.
    pub fn wrap_vk_buffer_at(
        &self,
        buf: &mut Buffer,
        buffer: vk::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<()> {
        if buf.device.is_some() {
            return Err(Error::IncompatibleBuffers(format!(
                "{} already has device memory; wrap a buffer without",
                buf.name()
            )));
        }
        let elem = buf.elem().bytes() as u64;
        if !offset.is_multiple_of(elem) {
            return Err(Error::BadDimensions(format!(
                "{}: offset {offset} into the VkBuffer is not a multiple of its {elem}-byte elements",
                buf.name()
            )));
        }
        let end = offset.checked_add(buf.size_in_bytes());
        if buffer == vk::Buffer::null() || end.is_none_or(|end| end > size) {
            return Err(Error::BadDimensions(format!(
                "{}: wrapping a {size}-byte VkBuffer ({buffer:?}) for {} bytes at offset {offset}",
                buf.name(),
                buf.size_in_bytes()
            )));
        }
        buf.set_device(DeviceView {
            region: self.buffer_region(Region::wrapped(&self.inner.allocator, buffer, size)),
            offset: offset / elem,
        });
        Ok(())
    }

    /// Takes a wrapped `VkBuffer` back from `buf` (Halide's `detach_vk_buffer`). Fails
    /// if `buf`'s device memory is not a wrapped buffer, or views of it still live.
    pub fn detach_vk_buffer(&self, buf: &mut Buffer) -> Result<vk::Buffer> {
        let Some(view) = &buf.device else {
            return Err(Error::NoDeviceAllocation(buf.name().to_owned()));
        };
        if !view.region.is_wrapped() {
            return Err(Error::IncompatibleBuffers(format!(
                "{}'s device memory is vkcopy's, not a wrapped VkBuffer",
                buf.name()
            )));
        }
        if Arc::strong_count(&view.region) > 1 {
            return Err(Error::IncompatibleBuffers(format!(
                "{}: crops or views of the wrapped VkBuffer are still alive",
                buf.name()
            )));
        }
        let handle = view.region.vk_buffer();
        buf.device = None;
        buf.device_dirty = false;
        Ok(handle)
    }

    /// Drops `buf`'s device allocation (the region is freed when no view uses it)
    /// and clears `device_dirty`: device data that was never copied back is lost.
    pub fn device_free(&self, buf: &mut Buffer) -> Result<()> {
        if let Some(view) = &buf.device {
            // Halide before #9237: the owner's release frees the region even though a
            // crop still uses it.
            if self.inner.emulate.use_count_zero() && view.offset == 0 {
                view.region.give_back();
            }
        }
        buf.device = None;
        buf.device_dirty = false;
        Ok(())
    }
}
