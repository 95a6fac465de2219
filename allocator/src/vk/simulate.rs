//! A recorded memory table presented on top of the real device (Cargo feature
//! `simulate`), as a wrapper of the device's heaps: each type of the table is
//! backed by a compatible real type, the table's heap sizes and budgets are
//! enforced as well as the real heaps behind them, and non-coherent types of the
//! table model the CPU cache: the host sees a shadow copy that only an
//! invalidate refreshes and whose writes reach the device only through a flush.
//! Without the feature the device's heaps are used as they are, and [`Shadow`]
//! is uninhabited.

#[cfg(not(feature = "simulate"))]
use std::ptr::NonNull;
use std::sync::Arc;

use crate::memory::table::MemoryTable;
use crate::vk::device::DeviceShared;
use crate::vk::heaps::{DeviceHeaps, Heaps};

/// The heaps blocks come from: the device's, or those of `simulated` on top of
/// them. Returns the table selection runs on, and its heaps.
#[cfg(feature = "simulate")]
pub(crate) fn heaps(
    device: &Arc<DeviceShared>,
    simulated: Option<MemoryTable>,
) -> (MemoryTable, Box<dyn Heaps>) {
    match simulated {
        Some(table) => (table.clone(), Box::new(on::TableHeaps::new(device, table))),
        None => (device.memory.clone(), Box::new(DeviceHeaps::new(device))),
    }
}

/// The device's heaps: no simulation without the `simulate` feature.
#[cfg(not(feature = "simulate"))]
pub(crate) fn heaps(
    device: &Arc<DeviceShared>,
    _simulated: Option<MemoryTable>,
) -> (MemoryTable, Box<dyn Heaps>) {
    (device.memory.clone(), Box::new(DeviceHeaps::new(device)))
}

#[cfg(feature = "simulate")]
mod on {
    use std::ptr::NonNull;
    use std::sync::Arc;

    use ash::vk;

    use crate::error::{Error, Result};
    use crate::memory::room::{HeapUse, Limits, NoRoom};
    use crate::memory::table::MemoryTable;
    use crate::vk::device::DeviceShared;
    use crate::vk::heaps::{CallError, DeviceHeaps, Heaps, MemoryBlock};

    /// Least alignment of every region under a table (lavapipe's and NVIDIA's
    /// buffer alignment), so that offsets, sizes and therefore room in the
    /// table's heaps are the same on every device whose alignments are at most
    /// this; a driver with larger ones still places differently.
    const ALIGNMENT: u64 = 64;

    /// The real memory type behind each type of a table.
    #[derive(Debug)]
    pub(crate) struct Backing(Vec<u32>);

    impl Backing {
        pub(crate) fn new(real: &MemoryTable, simulated: &MemoryTable) -> Self {
            Backing(crate::memory::table::backing_types(&real.types, simulated))
        }

        /// The real type behind type `ty` of the table.
        pub(crate) fn real_type(&self, ty: u32) -> u32 {
            self.0[ty as usize]
        }

        /// The table's buffer type bits, less the types whose real backing a
        /// buffer cannot use (`real_bits`).
        pub(crate) fn type_bits(&self, table: &MemoryTable, real_bits: u32) -> u32 {
            let mut bits = table.buffer_memory_type_bits;
            for (i, real) in self.0.iter().enumerate() {
                if real_bits & (1 << real) == 0 {
                    bits &= !(1 << i);
                }
            }
            bits
        }
    }

    /// Whether a buffer of `size` bytes gets a block of its own under a table.
    /// The table's `dedicated_from` decides, not the driver's preference, so
    /// that the same table places the same way on every device (a driver that
    /// prefers dedicated blocks for large buffers would otherwise leave no
    /// pooled room where another leaves some). A requirement of the driver is
    /// always met: memory bound otherwise would be invalid.
    pub(crate) fn wants_dedicated(dedicated_from: Option<u64>, requires: bool, size: u64) -> bool {
        requires || dedicated_from.is_some_and(|from| size >= from)
    }

    /// The heaps of a recorded table, allocated from the device's.
    pub(crate) struct TableHeaps {
        device: DeviceHeaps,
        table: MemoryTable,
        backing: Backing,
        /// Bytes of `VkDeviceMemory` allocated per heap of the table.
        used: Vec<u64>,
        /// Bytes of each heap taken by `fill`.
        taken: Vec<u64>,
    }

    impl TableHeaps {
        pub(crate) fn new(device: &Arc<DeviceShared>, table: MemoryTable) -> Self {
            let heaps = table.heaps.len();
            TableHeaps {
                backing: Backing::new(&device.memory, &table),
                device: DeviceHeaps::new(device),
                table,
                used: vec![0; heaps],
                taken: vec![0; heaps],
            }
        }

        /// Bytes of `heap` allocated or taken.
        fn in_use(&self, heap: usize) -> u64 {
            self.used[heap].saturating_add(self.taken[heap])
        }
    }

    impl Heaps for TableHeaps {
        fn is_simulated(&self) -> bool {
            true
        }

        fn type_bits(&self, device_bits: u32) -> u32 {
            self.backing.type_bits(&self.table, device_bits)
        }

        fn min_alignment(&self) -> u64 {
            ALIGNMENT
        }

        fn wants_dedicated(&self, _prefers: bool, requires: bool, size: u64) -> bool {
            wants_dedicated(self.table.dedicated_from, requires, size)
        }

        /// The table's heap, then the real heap behind it: the driver would not
        /// refuse what fits the real heap but not the table's.
        fn refuse(&self, ty: u32, bytes: u64) -> Option<NoRoom> {
            let h = self.table.types[ty as usize].heap as usize;
            let used = self.in_use(h);
            let real = self.backing.real_type(ty);
            Limits {
                simulated: Some(HeapUse {
                    used,
                    size: self.table.heaps[h].size,
                }),
                real: self.device.heap_use(real),
                max_allocation: self.device.max_allocation(),
                budget: self.table.heaps[h]
                    .budget
                    .map(|size| HeapUse { used, size }),
            }
            .refuse(bytes)
        }

        fn device_heap(&self, ty: u32) -> u32 {
            self.device.device_heap(self.backing.real_type(ty))
        }

        fn taken(&self, heap: u32) -> u64 {
            self.taken[heap as usize]
        }

        fn fill(&mut self, heap: u32, leave: u64) -> Result<u64> {
            let Some(h) = self.table.heaps.get(heap as usize) else {
                return Err(Error::BadSetting {
                    name: "fill_heap",
                    value: heap.to_string(),
                    reason: format!("{} has {} heaps", self.table.name, self.table.heaps.len()),
                });
            };
            let taken = h
                .size
                .saturating_sub(self.used[heap as usize])
                .saturating_sub(leave);
            self.taken[heap as usize] = taken;
            Ok(taken)
        }

        /// Memory of the real type behind `ty`, mapped when `ty` is host-visible
        /// (its backing is too); a non-coherent `ty` gets a shadow.
        fn allocate(
            &mut self,
            ty: u32,
            size: u64,
            buffer: Option<vk::Buffer>,
        ) -> std::result::Result<MemoryBlock, CallError> {
            let t = self.table.types[ty as usize];
            let map = t.flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE);
            let coherent = t.flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT);
            let real = self.backing.real_type(ty);
            let mut block = self.device.allocate_memory(real, size, buffer, map)?;
            block.heap = t.heap;
            if let (Some(mapped), false) = (block.mapped, coherent) {
                let (cache, raw) = shadow_block(mapped, size);
                block.mapped = Some(cache);
                block.shadow = Some((mapped, raw));
            }
            self.used[t.heap as usize] += size;
            Ok(block)
        }

        fn free(&mut self, mut block: MemoryBlock) {
            if let Some((_, raw)) = block.shadow.take() {
                // SAFETY: made by shadow_block in `allocate`; the block goes now.
                unsafe { free_shadow(raw) };
            }
            self.used[block.heap as usize] -= block.size;
            self.device.free(block);
        }
    }

    /// The host's view of a simulated non-coherent region: `cache` is what the CPU
    /// sees, `real` the mapping of the memory the device uses; both address the
    /// region's first byte.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Shadow {
        real: NonNull<u8>,
        cache: NonNull<u8>,
    }

    impl Shadow {
        /// The shadow of a region: `at` moves a block address to the region's.
        pub(crate) fn at(
            real: NonNull<u8>,
            cache: *mut [u8],
            at: impl Fn(NonNull<u8>) -> NonNull<u8>,
        ) -> Shadow {
            Shadow {
                real: at(real),
                cache: at(NonNull::new(cache.cast::<u8>()).expect("boxed slice")),
            }
        }

        /// Copies `len` bytes at `from_region` (bytes from the region's start) from
        /// the cache to the memory (`flush`) or back (invalidate).
        ///
        /// # Safety
        /// The range lies inside the block, and no one else writes it meanwhile.
        pub(crate) unsafe fn sync(self, from_region: isize, len: usize, flush: bool) {
            // SAFETY: the caller guarantees the range; both buffers span the block.
            unsafe {
                let real = self.real.as_ptr().offset(from_region);
                let cache = self.cache.as_ptr().offset(from_region);
                if flush {
                    std::ptr::copy_nonoverlapping(cache, real, len);
                } else {
                    std::ptr::copy_nonoverlapping(real, cache, len);
                }
            }
        }
    }

    /// A CPU-cache shadow of a block mapped at `real`, starting as what memory holds.
    fn shadow_block(real: NonNull<u8>, size: u64) -> (NonNull<u8>, *mut [u8]) {
        let mut cache = vec![0u8; size as usize].into_boxed_slice();
        // SAFETY: `real` maps `size` bytes; the cache is a fresh allocation of as many.
        unsafe { std::ptr::copy_nonoverlapping(real.as_ptr(), cache.as_mut_ptr(), size as usize) };
        let raw = Box::into_raw(cache);
        (NonNull::new(raw.cast::<u8>()).expect("boxed slice"), raw)
    }

    /// Frees a shadow made by [`shadow_block`].
    ///
    /// # Safety
    /// `raw` came from `shadow_block` and is not used again.
    unsafe fn free_shadow(raw: *mut [u8]) {
        // SAFETY: made by Box::into_raw in shadow_block.
        drop(unsafe { Box::from_raw(raw) });
    }
}

#[cfg(feature = "simulate")]
pub(crate) use on::Shadow;

/// No shadow without the `simulate` feature.
#[cfg(not(feature = "simulate"))]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shadow {}

#[cfg(not(feature = "simulate"))]
impl Shadow {
    pub(crate) fn at(
        _real: NonNull<u8>,
        _cache: *mut [u8],
        _at: impl Fn(NonNull<u8>) -> NonNull<u8>,
    ) -> Shadow {
        unreachable!("no block has a shadow without the simulate feature")
    }

    pub(crate) unsafe fn sync(self, _from_region: isize, _len: usize, _flush: bool) {
        match self {}
    }
}

#[cfg(all(test, feature = "simulate"))]
mod tests;
