//! Places device allocations: asks the policy for candidate memory types and
//! tries them in order, moving on when `vkAllocateMemory` runs out of memory
//! (the "heap full" path of the seed discussion).
//!
//! Each allocation is one `VkDeviceMemory` with one `VkBuffer` bound at offset 0.

use std::sync::Mutex;

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::memory::policy::{Policy, Role};
use crate::memory::stats::{Placement, Stats};
use crate::memory::table::{property_flags_name, MemoryTable};

/// A buffer bound to device memory.
#[derive(Debug)]
pub(crate) struct Allocation {
    pub(crate) buffer: vk::Buffer,
    pub(crate) memory: vk::DeviceMemory,
    /// Bytes asked for.
    pub(crate) size: u64,
    /// Bytes of the `VkDeviceMemory`.
    pub(crate) memory_size: u64,
    /// Index in the table the allocator selects from.
    pub(crate) memory_type: u32,
    pub(crate) flags: vk::MemoryPropertyFlags,
    /// Start of the persistent mapping, when host-visible.
    pub(crate) mapped: Option<std::ptr::NonNull<u8>>,
    pub(crate) role: Role,
}

// SAFETY: the mapped pointer is only dereferenced by the runtime while it holds
// the allocation exclusively (copies) or through the region's own locking.
unsafe impl Send for Allocation {}
// SAFETY: as above.
unsafe impl Sync for Allocation {}

impl Allocation {
    pub(crate) fn coherent(&self) -> bool {
        self.flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT)
    }
}

pub(crate) struct Allocator {
    policy: Policy,
    /// The table selection runs on: the device's, or a simulated one.
    table: MemoryTable,
    /// For a simulated table: the real memory type behind each simulated one.
    backing: Option<Vec<u32>>,
    lock: Mutex<()>,
}

/// The real type that stands in for a simulated one: the first real type that has
/// at least its host-visible/coherent/cached/device-local flags, else the first
/// host-visible type for a host-visible simulated type, else type 0.
fn backing_types(real: &MemoryTable, simulated: &MemoryTable) -> Vec<u32> {
    let relevant = vk::MemoryPropertyFlags::DEVICE_LOCAL
        | vk::MemoryPropertyFlags::HOST_VISIBLE
        | vk::MemoryPropertyFlags::HOST_COHERENT
        | vk::MemoryPropertyFlags::HOST_CACHED;
    simulated
        .types
        .iter()
        .map(|t| {
            let want = t.flags & relevant;
            let hv = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
            real.types
                .iter()
                .position(|r| r.flags.contains(want))
                .or_else(|| {
                    real.types.iter().position(|r| {
                        !want.contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
                            || r.flags.contains(hv)
                    })
                })
                .unwrap_or(0) as u32
        })
        .collect()
}

impl Allocator {
    pub(crate) fn new(
        policy: Policy,
        device: &MemoryTable,
        simulated: Option<MemoryTable>,
    ) -> Self {
        match simulated {
            Some(sim) => Allocator {
                policy,
                backing: Some(backing_types(device, &sim)),
                table: sim,
                lock: Mutex::new(()),
            },
            None => Allocator {
                policy,
                table: device.clone(),
                backing: None,
                lock: Mutex::new(()),
            },
        }
    }

    pub(crate) fn table(&self) -> &MemoryTable {
        &self.table
    }

    /// Creates a buffer of `size` bytes for `role` and binds it to new memory.
    pub(crate) fn allocate(
        &self,
        device: &ash::Device,
        stats: &Stats,
        role: Role,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<Allocation> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let request = self.policy.request(role);
        let info = vk::BufferCreateInfo::default()
            .size(size.max(4).next_multiple_of(4))
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info; the buffer is destroyed on every path below.
        let buffer = unsafe { device.create_buffer(&info, None) }.vk("vkCreateBuffer")?;
        stats.buffer_created();
        let destroy_buffer = |stats: &Stats| {
            // SAFETY: the buffer is not bound to memory in use and not referenced elsewhere.
            unsafe { device.destroy_buffer(buffer, None) };
            stats.buffer_destroyed();
        };
        // SAFETY: the buffer was created from this device.
        let req = unsafe { device.get_buffer_memory_requirements(buffer) };
        let type_bits = match &self.backing {
            None => req.memory_type_bits,
            Some(back) => {
                // A simulated type is allowed when the real type behind it is.
                let mut bits = self.table.buffer_memory_type_bits;
                for (i, real) in back.iter().enumerate() {
                    if req.memory_type_bits & (1 << real) == 0 {
                        bits &= !(1 << i);
                    }
                }
                bits
            }
        };
        let candidates = match self.policy.candidates(&self.table, &request, type_bits) {
            Ok(c) => c,
            Err(e) => {
                destroy_buffer(stats);
                return Err(Error::DeviceMallocFailed(format!(
                    "{role} of {size} bytes: {e}"
                )));
            }
        };
        let mut fallbacks = 0;
        for &ty in &candidates {
            let real_type = self.backing.as_ref().map_or(ty, |b| b[ty as usize]);
            let alloc_info = vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(real_type);
            // SAFETY: valid allocate info with a memory type index from this device.
            let memory = match unsafe { device.allocate_memory(&alloc_info, None) } {
                Ok(m) => m,
                Err(
                    vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY,
                ) => {
                    fallbacks += 1;
                    continue;
                }
                Err(e) => {
                    destroy_buffer(stats);
                    return Err(e).vk("vkAllocateMemory");
                }
            };
            stats.memory_allocated(req.size);
            let free_memory = |stats: &Stats| {
                // SAFETY: the memory is not mapped or bound to a live buffer.
                unsafe { device.free_memory(memory, None) };
                stats.memory_freed(req.size);
            };
            // SAFETY: the memory type is allowed by the buffer's requirements; offset 0.
            if let Err(e) = unsafe { device.bind_buffer_memory(buffer, memory, 0) } {
                destroy_buffer(stats);
                free_memory(stats);
                return Err(e).vk("vkBindBufferMemory");
            }
            let flags = self.table.types[ty as usize].flags;
            let mapped = if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
                // SAFETY: host-visible memory, mapped once for its whole lifetime.
                match unsafe {
                    device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                } {
                    Ok(p) => {
                        stats.mapping_created();
                        std::ptr::NonNull::new(p.cast::<u8>())
                    }
                    Err(e) => {
                        destroy_buffer(stats);
                        free_memory(stats);
                        return Err(e).vk("vkMapMemory");
                    }
                }
            } else {
                None
            };
            let heap = self.table.types[ty as usize].heap;
            stats.placed(Placement {
                role,
                memory_type: ty,
                flags: property_flags_name(flags),
                heap,
                size,
                fallbacks,
            });
            return Ok(Allocation {
                buffer,
                memory,
                size,
                memory_size: req.size,
                memory_type: ty,
                flags,
                mapped,
                role,
            });
        }
        destroy_buffer(stats);
        Err(Error::DeviceMallocFailed(format!(
            "{role} of {size} bytes ({}): every candidate memory type ({}) ran out of memory on {}",
            request,
            candidates
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            self.table.name
        )))
    }

    /// Unmaps, destroys the buffer and frees the memory.
    pub(crate) fn free(&self, device: &ash::Device, stats: &Stats, a: &Allocation) {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the caller owns `a` and no submission that uses it is pending.
        unsafe {
            if a.mapped.is_some() {
                device.unmap_memory(a.memory);
                stats.mapping_destroyed();
            }
            device.destroy_buffer(a.buffer, None);
            stats.buffer_destroyed();
            device.free_memory(a.memory, None);
        }
        stats.memory_freed(a.memory_size);
    }

    /// Frees everything still pooled. Nothing is pooled yet.
    ///
    /// # Safety
    /// The device must be idle.
    pub(crate) unsafe fn destroy(&self, _device: &ash::Device, _stats: &Stats) {}
}
