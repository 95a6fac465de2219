//! A region: device memory holding one buffer's data, shared through an `Arc`
//! by the buffer and its crops and slices. Its use count starts at one (the fix
//! of Halide #9237); the memory goes back to the allocator when the last user
//! drops it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ash::vk;

use crate::error::{Error, Result};
use crate::memory::policy::Role;
use crate::vk::allocator::{Allocation, Allocator};
use crate::vk::device::DeviceShared;

/// Device memory holding one buffer's data.
#[derive(Debug)]
pub struct Region {
    allocator: Arc<Allocator>,
    pub(crate) alloc: Allocation,
    /// Set once the memory went back to the allocator: on drop, or early when
    /// Halide's use-count bug is emulated.
    released: AtomicBool,
    /// Kernel and copy writes into this memory through any buffer (see `buffer::sync`).
    writes: AtomicU64,
    /// A staging chunk the context keeps, not a buffer's memory: counted apart
    /// so that leak checks see only what the user made.
    staging: bool,
    /// Views of this memory count their offsets from its start rather than from
    /// the view they were made from (Halide's crop-of-crop bug; set by the runtime
    /// when it emulates it).
    pub(crate) offsets_from_owner: bool,
    /// Device writes here that ended without a barrier to the host since a
    /// readback made them available (0: none); the CPU must not write this
    /// memory while there are any (`runtime/mapped.rs`).
    writes_unavailable: AtomicU64,
}

impl Region {
    /// A region of `size` bytes placed for `role`.
    pub(crate) fn allocate(allocator: &Arc<Allocator>, role: Role, size: u64) -> Result<Self> {
        Self::allocate_as(allocator, role, size, false)
    }

    /// A staging chunk of `size` bytes placed for `role`, kept by the context.
    pub(crate) fn allocate_staging(
        allocator: &Arc<Allocator>,
        role: Role,
        size: u64,
    ) -> Result<Self> {
        Self::allocate_as(allocator, role, size, true)
    }

    fn allocate_as(
        allocator: &Arc<Allocator>,
        role: Role,
        size: u64,
        staging: bool,
    ) -> Result<Self> {
        let alloc = allocator.allocate(role, size)?;
        let stats = &allocator.device().stats;
        stats.region_created();
        if staging {
            stats.staging_region_created();
        }
        Ok(Region {
            allocator: allocator.clone(),
            alloc,
            released: AtomicBool::new(false),
            writes: AtomicU64::new(0),
            staging,
            offsets_from_owner: false,
            writes_unavailable: AtomicU64::new(0),
        })
    }

    /// A region over a `VkBuffer` the caller made and keeps owning.
    pub(crate) fn wrapped(allocator: &Arc<Allocator>, buffer: vk::Buffer, size: u64) -> Self {
        allocator.device().stats.region_created();
        Region {
            allocator: allocator.clone(),
            alloc: Allocation::wrapped(buffer, size, 0, vk::MemoryPropertyFlags::DEVICE_LOCAL),
            released: AtomicBool::new(false),
            writes: AtomicU64::new(0),
            staging: false,
            offsets_from_owner: false,
            writes_unavailable: AtomicU64::new(0),
        }
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.alloc.size
    }

    /// Memory type index in the allocator's table.
    pub fn memory_type(&self) -> u32 {
        self.alloc.memory_type
    }

    /// What the region was allocated for.
    pub fn role(&self) -> Role {
        self.alloc.role
    }

    /// The `VkBuffer` bound to this region.
    pub fn vk_buffer(&self) -> vk::Buffer {
        self.alloc.buffer
    }

    /// Whether this is a caller's `VkBuffer` (`wrap_vk_buffer`).
    pub(crate) fn is_wrapped(&self) -> bool {
        self.alloc.is_wrapped()
    }

    /// The device the memory belongs to.
    pub(crate) fn device(&self) -> &Arc<DeviceShared> {
        self.allocator.device()
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

    /// Writes into this memory through any buffer so far.
    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }

    /// Counts a write into this memory.
    /// Returns the count before this write.
    pub(crate) fn count_write(&self) -> u64 {
        self.writes.fetch_add(1, Ordering::AcqRel)
    }

    /// Whether device writes here may not be available to the host yet.
    pub(crate) fn writes_unavailable(&self) -> bool {
        self.unavailable_marks() != 0
    }

    /// Marks a device write here that ends without a barrier to the host:
    /// once before its submission and once after it is done, so that a
    /// readback that began in between does not clear it.
    pub(crate) fn mark_unavailable(&self) {
        self.writes_unavailable.fetch_add(1, Ordering::AcqRel);
    }

    /// The marks so far; read before a readback is submitted.
    pub(crate) fn unavailable_marks(&self) -> u64 {
        self.writes_unavailable.load(Ordering::Acquire)
    }

    /// After a readback (which ends with a barrier to the host) is done: clears
    /// the marks, unless a device write was marked since `seen`.
    pub(crate) fn clear_unavailable(&self, seen: u64) {
        let (ok, no) = (Ordering::AcqRel, Ordering::Acquire);
        let _ = self.writes_unavailable.compare_exchange(seen, 0, ok, no);
    }

    /// Gives the memory back to the allocator, once.
    pub(crate) fn give_back(&self) {
        if !self.released.swap(true, Ordering::AcqRel) {
            self.allocator.free(&self.alloc);
            let stats = &self.allocator.device().stats;
            stats.region_destroyed();
            if self.staging {
                stats.staging_region_destroyed();
            }
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.give_back();
    }
}
