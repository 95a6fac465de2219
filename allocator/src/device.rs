//! Device allocations of buffers: `device_malloc` and `device_free`
//! (Halide's `halide_vulkan_device_malloc` / `device_free` in `src/runtime/vulkan.cpp`).
//!
//! A [`DeviceView`] shares its [`Region`] through an `Arc`: the region's use
//! count starts at one (the fix of Halide #9237), a view retains it, and the
//! memory goes back to the allocator when the last user drops it.

use std::sync::Arc;

use ash::vk;

use crate::buffer::Buffer;
use crate::context::{Context, Shared};
use crate::error::{Error, Result};
use crate::memory::allocator::Allocation;
use crate::memory::policy::Role;

/// Device memory holding one buffer's data.
#[derive(Debug)]
pub struct Region {
    pub(crate) shared: Arc<Shared>,
    pub(crate) alloc: Allocation,
    /// Set once the memory went back to the allocator: on drop, or early when
    /// Halide's use-count bug is emulated.
    released: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.info.name)
    }
}

impl Region {
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.alloc.size
    }

    /// Memory type index in the allocator's table.
    pub fn memory_type(&self) -> u32 {
        self.alloc.memory_type
    }

    /// The host address of the region's first byte; `size()` bytes are mapped.
    pub(crate) fn host_ptr(&self) -> Result<std::ptr::NonNull<u8>> {
        self.alloc.mapped.ok_or_else(|| {
            Error::DeviceMallocFailed(format!(
                "{} memory (type {}) is not host-visible",
                self.alloc.role, self.alloc.memory_type
            ))
        })
    }

    /// What the region was allocated for.
    pub fn role(&self) -> Role {
        self.alloc.role
    }

    /// The `VkBuffer` bound to this region.
    pub fn vk_buffer(&self) -> vk::Buffer {
        self.alloc.buffer
    }
}

impl Region {
    /// Gives the memory back to the allocator, once (a wrapped native buffer is the
    /// caller's: the allocator has nothing to take back).
    fn give_back(&self) {
        if !self
            .released
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            let s = &self.shared;
            s.allocator.free(&s.device, &s.stats, &self.alloc);
            s.stats.region_destroyed();
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// A buffer's device side: a region and the element offset of the element at
/// the buffer's mins (non-zero for crops and slices).
#[derive(Clone, Debug)]
pub struct DeviceView {
    pub region: Arc<Region>,
    /// Elements from the start of the region.
    pub offset: u64,
}

impl DeviceView {
    /// Byte offset in the region of the element at the view's mins.
    pub fn byte_offset(&self, elem_bytes: usize) -> u64 {
        self.offset * elem_bytes as u64
    }
}

impl Context {
    /// A region of `size` bytes placed for `role` by the context's policy: device
    /// memory for `Role::Device`, staging for `Upload` / `Readback`. It goes back to
    /// the pool when the last `Arc` drops. Buffers get theirs through `device_malloc`.
    pub fn allocate(&self, role: Role, size: u64) -> Result<Arc<Region>> {
        self.allocate_region(role, size)
    }

    pub(crate) fn allocate_region(&self, role: Role, size: u64) -> Result<Arc<Region>> {
        let s = &self.shared;
        let alloc = s.allocator.allocate(&s.device, &s.stats, role, size)?;
        s.stats.region_created();
        Ok(Arc::new(Region {
            shared: self.shared.clone(),
            alloc,
            released: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Gives `buf` device memory of `size_in_bytes`, zero-filled as Halide's Vulkan
    /// runtime does. Keeps an existing allocation that is large enough. Leaves the
    /// dirty bits alone: a host-dirty buffer stays host-dirty.
    pub fn device_malloc(&self, buf: &mut Buffer) -> Result<()> {
        let size = buf.size_in_bytes();
        if let Some(view) = &buf.device {
            if !Arc::ptr_eq(&view.region.shared, &self.shared) {
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
        let region = self.allocate_region(Role::Device, size)?;
        self.shared.submitter.run(&self.shared.device, |cmd| {
            // SAFETY: the buffer was just created and is not in use; its size is a
            // multiple of 4 (the allocator rounds it up), so WHOLE_SIZE covers it all.
            unsafe {
                self.shared
                    .device
                    .cmd_fill_buffer(cmd, region.alloc.buffer, 0, vk::WHOLE_SIZE, 0);
            }
        })?;
        buf.device = Some(DeviceView { region, offset: 0 });
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
        if buf.device.is_some() {
            return Err(Error::IncompatibleBuffers(format!(
                "{} already has device memory; wrap a buffer without",
                buf.name()
            )));
        }
        if buffer == vk::Buffer::null() || size < buf.size_in_bytes() {
            return Err(Error::BadDimensions(format!(
                "{}: wrapping a {size}-byte VkBuffer ({buffer:?}) for {} bytes",
                buf.name(),
                buf.size_in_bytes()
            )));
        }
        let alloc = Allocation::wrapped(buffer, size, 0, vk::MemoryPropertyFlags::DEVICE_LOCAL);
        self.shared.stats.region_created();
        buf.device = Some(DeviceView {
            region: Arc::new(Region {
                shared: self.shared.clone(),
                alloc,
                released: std::sync::atomic::AtomicBool::new(false),
            }),
            offset: 0,
        });
        Ok(())
    }

    /// Takes a wrapped `VkBuffer` back from `buf` (Halide's `detach_vk_buffer`). Fails
    /// if `buf`'s device memory is not a wrapped buffer, or views of it still live.
    pub fn detach_vk_buffer(&self, buf: &mut Buffer) -> Result<vk::Buffer> {
        let Some(view) = &buf.device else {
            return Err(Error::NoDeviceAllocation(buf.name().to_owned()));
        };
        if !view.region.alloc.is_wrapped() {
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
        let handle = view.region.alloc.buffer;
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
            if self.shared.emulate.use_count_zero && view.offset == 0 {
                view.region.give_back();
            }
        }
        buf.device = None;
        buf.device_dirty = false;
        Ok(())
    }
}
