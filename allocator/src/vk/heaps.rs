//! Where the allocator's blocks come from and how much room each heap has,
//! behind one trait: [`DeviceHeaps`] allocates from the device and leaves the
//! limits to the driver and its budget; a recorded table (`vk::simulate`) wraps
//! it, allocating from the real types behind its own and enforcing its own heap
//! sizes. The allocator sees memory types and heaps of the table it selects from
//! and nothing else.

use std::ptr::NonNull;
use std::sync::Arc;

use ash::vk;

use crate::memory::room::{HeapUse, Limits, NoRoom};
use crate::vk::device::DeviceShared;

/// A failed Vulkan call: its name and result.
pub(crate) type CallError = (&'static str, vk::Result);

/// One `VkDeviceMemory`.
#[derive(Debug)]
pub(crate) struct MemoryBlock {
    pub(crate) memory: vk::DeviceMemory,
    pub(crate) size: u64,
    /// Heap of the table the allocator selects from.
    pub(crate) heap: u32,
    /// Heap of the device it was allocated from.
    device_heap: u32,
    /// What the host writes and reads: the mapping, or the shadow's cache.
    pub(crate) mapped: Option<NonNull<u8>>,
    /// For memory whose host cache is modelled: the mapping and the cache, owned
    /// by the heaps that allocated the block.
    pub(crate) shadow: Option<(NonNull<u8>, *mut [u8])>,
}

/// The source of blocks for the memory types of one table, and the room left in
/// its heaps. Calls come under the allocator's lock; indices are the table's.
pub(crate) trait Heaps: Send {
    /// Whether the table is a recorded one presented on top of the device.
    fn is_simulated(&self) -> bool;

    /// `memoryTypeBits` of the runtime's buffers in the table's indices, from
    /// those the device reports.
    fn type_bits(&self, device_bits: u32) -> u32;

    /// Least alignment of every region (1: the driver's alone).
    fn min_alignment(&self) -> u64;

    /// Whether a buffer of `size` bytes gets a block of its own, given the
    /// driver's `VkMemoryDedicatedRequirements`.
    fn wants_dedicated(&self, prefers: bool, requires: bool, size: u64) -> bool;

    /// Why a new block of `bytes` in type `ty` may not be allocated, if it may not.
    fn refuse(&self, ty: u32, bytes: u64) -> Option<NoRoom>;

    /// The device heap behind type `ty`.
    fn device_heap(&self, ty: u32) -> u32;

    /// Bytes of `heap` taken by `fill`.
    fn taken(&self, heap: u32) -> u64;

    /// Takes all of `heap` but `leave` bytes, as if other programs used it.
    /// Returns the bytes taken.
    #[cfg(feature = "simulate")]
    fn fill(&mut self, heap: u32, leave: u64) -> crate::error::Result<u64>;

    /// A block of `size` bytes of type `ty`, mapped when host-visible; for
    /// `buffer` alone (`VkMemoryDedicatedAllocateInfo`) when given.
    fn allocate(
        &mut self,
        ty: u32,
        size: u64,
        buffer: Option<vk::Buffer>,
    ) -> Result<MemoryBlock, CallError>;

    /// Frees a block of [`allocate`](Self::allocate). Nothing may be bound to it
    /// or use it any more.
    fn free(&mut self, block: MemoryBlock);
}

/// The device's own heaps.
pub(crate) struct DeviceHeaps {
    device: Arc<DeviceShared>,
    /// Bytes of `VkDeviceMemory` allocated per heap.
    used: Vec<u64>,
}

impl DeviceHeaps {
    pub(crate) fn new(device: &Arc<DeviceShared>) -> Self {
        DeviceHeaps {
            used: vec![0; device.memory.heaps.len()],
            device: device.clone(),
        }
    }

    /// The device's heap behind its memory type `ty`, with the bytes allocated.
    pub(crate) fn heap_use(&self, ty: u32) -> HeapUse {
        let heap = self.device.memory.types[ty as usize].heap as usize;
        HeapUse {
            used: self.used[heap],
            size: self.device.memory.heaps[heap].size,
        }
    }

    /// `maxMemoryAllocationSize`; 0 when not known.
    pub(crate) fn max_allocation(&self) -> u64 {
        self.device.info.max_memory_allocation_size
    }

    /// The driver's usage and budget of heap `heap` (`VK_EXT_memory_budget`).
    fn budget(&self, heap: usize) -> Option<HeapUse> {
        if !self.device.memory_budget {
            return None;
        }
        let (instance, physical) = (&self.device.instance.raw(), self.device.physical);
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        // SAFETY: the extension is enabled on the device; a valid pNext chain.
        unsafe { instance.get_physical_device_memory_properties2(physical, &mut props) };
        Some(HeapUse {
            used: budget.heap_usage[heap],
            size: budget.heap_budget[heap],
        })
    }

    /// A block of `size` bytes of the device's type `ty`, mapped when `map`.
    pub(crate) fn allocate_memory(
        &mut self,
        ty: u32,
        size: u64,
        buffer: Option<vk::Buffer>,
        map: bool,
    ) -> Result<MemoryBlock, CallError> {
        let (device, stats) = (&self.device.raw(), &self.device.stats);
        let heap = self.device.memory.types[ty as usize].heap;
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default();
        let mut info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(ty);
        if let Some(buffer) = buffer {
            dedicated = dedicated.buffer(buffer);
            info = info.push_next(&mut dedicated);
        }
        // SAFETY: valid allocate info with a memory type index of this device; a
        // dedicated buffer is unbound and `size` is its requirement.
        let memory =
            unsafe { device.allocate_memory(&info, None) }.map_err(|e| ("vkAllocateMemory", e))?;
        stats.memory_allocated(size);
        let mut block = MemoryBlock {
            memory,
            size,
            heap,
            device_heap: heap,
            mapped: None,
            shadow: None,
        };
        if map {
            // SAFETY: host-visible memory, mapped once for the block's lifetime.
            let mapped = unsafe {
                device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            };
            match mapped {
                Ok(p) => block.mapped = NonNull::new(p.cast::<u8>()),
                Err(e) => {
                    // SAFETY: not mapped, nothing bound.
                    unsafe { device.free_memory(memory, None) };
                    stats.memory_freed(size);
                    return Err(("vkMapMemory", e));
                }
            }
            stats.mapping_created();
        }
        self.used[heap as usize] += size;
        Ok(block)
    }
}

impl Heaps for DeviceHeaps {
    fn is_simulated(&self) -> bool {
        false
    }

    fn type_bits(&self, device_bits: u32) -> u32 {
        device_bits
    }

    fn min_alignment(&self) -> u64 {
        1
    }

    fn wants_dedicated(&self, prefers: bool, requires: bool, _size: u64) -> bool {
        requires || prefers
    }

    /// The driver says when a heap is full; known limits are checked first.
    fn refuse(&self, ty: u32, bytes: u64) -> Option<NoRoom> {
        let heap = self.device.memory.types[ty as usize].heap as usize;
        Limits {
            simulated: None,
            real: self.heap_use(ty),
            max_allocation: self.max_allocation(),
            budget: self.budget(heap),
        }
        .refuse(bytes)
    }

    fn device_heap(&self, ty: u32) -> u32 {
        self.device.memory.types[ty as usize].heap
    }

    fn taken(&self, _heap: u32) -> u64 {
        0
    }

    #[cfg(feature = "simulate")]
    fn fill(&mut self, heap: u32, _leave: u64) -> crate::error::Result<u64> {
        Err(crate::error::Error::BadSetting {
            name: "fill_heap",
            value: heap.to_string(),
            reason: "needs a simulated memory table (simulate_memory)".into(),
        })
    }

    fn allocate(
        &mut self,
        ty: u32,
        size: u64,
        buffer: Option<vk::Buffer>,
    ) -> Result<MemoryBlock, CallError> {
        let flags = self.device.memory.types[ty as usize].flags;
        let map = flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE);
        self.allocate_memory(ty, size, buffer, map)
    }

    fn free(&mut self, block: MemoryBlock) {
        let (device, stats) = (&self.device.raw(), &self.device.stats);
        // SAFETY: the caller guarantees nothing is bound to the memory or uses it.
        unsafe {
            if block.mapped.is_some() {
                device.unmap_memory(block.memory);
                stats.mapping_destroyed();
            }
            device.free_memory(block.memory, None);
        }
        stats.memory_freed(block.size);
        self.used[block.device_heap as usize] -= block.size;
    }
}
