//! Flush and invalidate of non-coherent host-visible memory, aligned to
//! `nonCoherentAtomSize` (Vulkan spec, "Host Access to Device Memory Objects").

use ash::vk;

use crate::error::{Error, Result};
use crate::vk::allocator::{Allocation, Allocator};

/// Byte range of a mapping (`offset` from the start of the memory), aligned to
/// `nonCoherentAtomSize` and clamped to the memory (VUID-VkMappedMemoryRange-size-01390).
fn atom_range(a: &Allocation, atom: u64, offset: u64, size: u64) -> (u64, u64) {
    let atom = atom.max(1);
    let start = offset / atom * atom;
    let end = (offset + size).div_ceil(atom) * atom;
    let end = end.min(a.memory_size);
    (start, end - start)
}

impl Allocator {
    /// Makes host writes to bytes `offset..offset + size` of a non-coherent region
    /// visible to the device (`vkFlushMappedMemoryRanges`).
    pub(crate) fn flush(&self, a: &Allocation, offset: u64, size: u64) -> Result<()> {
        self.sync_mapping(a, offset, size, true)
    }

    /// Makes device writes to bytes `offset..offset + size` of a non-coherent region
    /// visible to the host (`vkInvalidateMappedMemoryRanges`).
    pub(crate) fn invalidate(&self, a: &Allocation, offset: u64, size: u64) -> Result<()> {
        self.sync_mapping(a, offset, size, false)
    }

    fn sync_mapping(&self, a: &Allocation, offset: u64, size: u64, flush: bool) -> Result<()> {
        let device = self.device();
        if a.coherent() || a.mapped.is_none() {
            return Ok(());
        }
        let (start, len) = atom_range(a, self.non_coherent_atom(), a.offset + offset, size);
        if let Some(shadow) = a.shadow {
            // `start` is block-relative; the shadow addresses the region's first byte.
            let from_region = start as isize - a.offset as isize;
            // SAFETY: the range lies inside the block (clamped by atom_range); the
            // region's owner is the only writer meanwhile.
            unsafe { shadow.sync(from_region, len as usize, flush) };
        }
        let range = vk::MappedMemoryRange::default()
            .memory(a.memory)
            .offset(start)
            .size(len);
        // SAFETY: the memory is mapped for its whole size; the range is atom-aligned
        // and inside the allocation.
        let result = unsafe {
            if flush {
                device.raw().flush_mapped_memory_ranges(&[range])
            } else {
                device.raw().invalidate_mapped_memory_ranges(&[range])
            }
        };
        result.map_err(|result| Error::Vulkan {
            call: if flush {
                "vkFlushMappedMemoryRanges"
            } else {
                "vkInvalidateMappedMemoryRanges"
            },
            result,
        })
    }
}
