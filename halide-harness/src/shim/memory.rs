//! Halide's memory, buffers, mappings and copies, seen on their way to the
//! driver: leak counts, placements, copies, and what a driver of the
//! presented table would refuse.

use std::ffi::c_void;

use super::real;
use super::state::{seen, Memory, StepKind};
use super::table::backing;
use vkcopy_engine::rt::{property_flags_name, vk};
use vkcopy_results::outcome::PlacementRecord;

pub(super) unsafe extern "system" fn allocate_memory(
    device: vk::Device,
    info: *const vk::MemoryAllocateInfo<'_>,
    callbacks: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::DeviceMemory,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkAllocateMemory>(device, "vkAllocateMemory") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: Halide's allocate info.
    let mut local = unsafe { *info };
    let ty = local.memory_type_index;
    let size = local.allocation_size;
    {
        let mut s = seen();
        let Some((real_ty, heap)) = backing(&s, ty) else {
            s.case.findings.push(format!(
                "vkAllocateMemory: memory type {ty} is not in the device's table"
            ));
            return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
        };
        if let (Some(h), Some((t, _))) = (heap, &s.table) {
            let heap_size = t.heaps[h as usize]
                .budget
                .unwrap_or(t.heaps[h as usize].size);
            if s.made.heap_used[h as usize] + s.made.heap_taken[h as usize] + size > heap_size {
                s.case.fallbacks += 1;
                return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
            }
        }
        local.memory_type_index = real_ty;
    }
    // SAFETY: forwarded with the real type.
    let r = unsafe { f(device, &local, callbacks, out) };
    let mut s = seen();
    if r != vk::Result::SUCCESS {
        s.case.fallbacks += 1;
        return r;
    }
    if let Some((_, Some(h))) = backing(&s, ty) {
        s.made.heap_used[h as usize] += size;
    }
    // SAFETY: written by the driver on success.
    let handle = unsafe { *out };
    s.made
        .memories
        .insert(vk::Handle::as_raw(handle), Memory { ty, size });
    r
}

pub(super) unsafe extern "system" fn free_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    callbacks: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(f) = real::<vk::PFN_vkFreeMemory>(device, "vkFreeMemory") {
        // SAFETY: forwarded.
        unsafe { f(device, memory, callbacks) };
    }
    let mut s = seen();
    if let Some(m) = s.made.memories.remove(&vk::Handle::as_raw(memory)) {
        if let Some((_, Some(h))) = backing(&s, m.ty) {
            s.made.heap_used[h as usize] -= m.size;
        }
    }
}

pub(super) unsafe extern "system" fn create_buffer(
    device: vk::Device,
    info: *const vk::BufferCreateInfo<'_>,
    callbacks: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Buffer,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkCreateBuffer>(device, "vkCreateBuffer") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: forwarded.
    let r = unsafe { f(device, info, callbacks, out) };
    if r == vk::Result::SUCCESS {
        // SAFETY: written by the driver on success.
        let b = vk::Handle::as_raw(unsafe { *out });
        // SAFETY: Halide's create info.
        let (size, usage) = unsafe { ((*info).size, (*info).usage) };
        let mut s = seen();
        s.made.buffers.insert(b, (u32::MAX, size));
        s.made.buffer_sizes.insert(b, size);
        let both = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        if usage.contains(both) {
            s.made.both_ways.insert(b);
        }
    }
    r
}

pub(super) unsafe extern "system" fn destroy_buffer(
    device: vk::Device,
    buffer: vk::Buffer,
    callbacks: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(f) = real::<vk::PFN_vkDestroyBuffer>(device, "vkDestroyBuffer") {
        // SAFETY: forwarded.
        unsafe { f(device, buffer, callbacks) };
    }
    let mut s = seen();
    s.made.buffers.remove(&vk::Handle::as_raw(buffer));
    s.made.buffer_sizes.remove(&vk::Handle::as_raw(buffer));
    s.made.both_ways.remove(&vk::Handle::as_raw(buffer));
}

pub(super) unsafe extern "system" fn get_buffer_memory_requirements(
    device: vk::Device,
    buffer: vk::Buffer,
    out: *mut vk::MemoryRequirements,
) {
    let Some(f) =
        real::<vk::PFN_vkGetBufferMemoryRequirements>(device, "vkGetBufferMemoryRequirements")
    else {
        return;
    };
    // SAFETY: forwarded; `out` is Halide's.
    unsafe { f(device, buffer, out) };
    let mut s = seen();
    // SAFETY: filled by the driver.
    let real_bits = unsafe { (*out).memory_type_bits };
    let bits = match &s.table {
        Some((t, backing)) => {
            let mut bits = t.buffer_memory_type_bits;
            for (i, r) in backing.iter().enumerate() {
                if real_bits & (1 << r) == 0 {
                    bits &= !(1 << i);
                }
            }
            bits
        }
        None => real_bits,
    };
    // SAFETY: Halide's output.
    unsafe { (*out).memory_type_bits = bits };
    // SAFETY: filled by the driver.
    let size = unsafe { (*out).size };
    s.made
        .buffers
        .insert(vk::Handle::as_raw(buffer), (bits, size));
}

pub(super) unsafe extern "system" fn bind_buffer_memory(
    device: vk::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkBindBufferMemory>(device, "vkBindBufferMemory") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    {
        let mut s = seen();
        let s = &mut *s;
        let (bits, size) = s
            .made
            .buffers
            .get(&vk::Handle::as_raw(buffer))
            .copied()
            .unwrap_or((u32::MAX, 0));
        if let Some(m) = s.made.memories.get(&vk::Handle::as_raw(memory)) {
            let ty = m.ty;
            if offset.saturating_add(size) > m.size {
                // Bound past its memory, the device would write past the
                // allocation: refused, so that the process lives to say so.
                s.case.findings.push(format!(
                    "vkBindBufferMemory: a buffer of {size} bytes bound at offset {offset} of a {}-byte allocation (past its end; the Vulkan spec forbids it, and lavapipe writes past the allocation)",
                    m.size
                ));
                return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
            }
            if bits & (1 << ty) == 0 {
                s.case.findings.push(format!(
                    "vkBindBufferMemory: a buffer bound to memory type {ty}, outside its memoryTypeBits {bits:#x}: a real driver refuses this"
                ));
            }
            if let Some(role) = s.step.kind.and_then(StepKind::role) {
                let (flags, heap) = match &s.table {
                    Some((t, _)) => (t.types[ty as usize].flags, t.types[ty as usize].heap),
                    None => s
                        .real_types
                        .get(ty as usize)
                        .map_or((vk::MemoryPropertyFlags::empty(), 0), |t| (t.flags, t.heap)),
                };
                if s.made.both_ways.contains(&vk::Handle::as_raw(buffer)) {
                    s.step.both_ways.push(s.case.placements.len());
                }
                s.case.placements.push(PlacementRecord {
                    role: role.to_string(),
                    memory_type: ty,
                    flags: property_flags_name(flags),
                    heap,
                    bytes: m.size,
                    fallbacks: s.case.fallbacks,
                    imported: false,
                });
            }
        }
    }
    // SAFETY: forwarded.
    unsafe { f(device, buffer, memory, offset) }
}

pub(super) unsafe extern "system" fn map_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    flags: vk::MemoryMapFlags,
    out: *mut *mut c_void,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkMapMemory>(device, "vkMapMemory") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: forwarded.
    let r = unsafe { f(device, memory, offset, size, flags, out) };
    if r == vk::Result::SUCCESS {
        let mut s = seen();
        s.made.mappings += 1;
        let ty = s
            .made
            .memories
            .get(&vk::Handle::as_raw(memory))
            .map(|m| m.ty);
        let noncoherent = match (&s.table, ty) {
            (Some((t, _)), Some(ty)) => !t.types[ty as usize]
                .flags
                .contains(vk::MemoryPropertyFlags::HOST_COHERENT),
            _ => false,
        };
        if noncoherent {
            s.step.noncoherent_maps += 1;
        }
    }
    r
}

pub(super) unsafe extern "system" fn unmap_memory(device: vk::Device, memory: vk::DeviceMemory) {
    if let Some(f) = real::<vk::PFN_vkUnmapMemory>(device, "vkUnmapMemory") {
        // SAFETY: forwarded.
        unsafe { f(device, memory) };
    }
    let mut s = seen();
    s.made.mappings = s.made.mappings.saturating_sub(1);
}

pub(super) unsafe extern "system" fn flush_ranges(
    device: vk::Device,
    count: u32,
    ranges: *const vk::MappedMemoryRange<'_>,
) -> vk::Result {
    seen().step.flushes += 1;
    match real::<vk::PFN_vkFlushMappedMemoryRanges>(device, "vkFlushMappedMemoryRanges") {
        // SAFETY: forwarded.
        Some(f) => unsafe { f(device, count, ranges) },
        None => vk::Result::ERROR_INITIALIZATION_FAILED,
    }
}

pub(super) unsafe extern "system" fn invalidate_ranges(
    device: vk::Device,
    count: u32,
    ranges: *const vk::MappedMemoryRange<'_>,
) -> vk::Result {
    seen().step.invalidates += 1;
    match real::<vk::PFN_vkInvalidateMappedMemoryRanges>(device, "vkInvalidateMappedMemoryRanges") {
        // SAFETY: forwarded.
        Some(f) => unsafe { f(device, count, ranges) },
        None => vk::Result::ERROR_INITIALIZATION_FAILED,
    }
}

pub(super) unsafe extern "system" fn cmd_copy_buffer(
    cmd: vk::CommandBuffer,
    src: vk::Buffer,
    dst: vk::Buffer,
    count: u32,
    regions: *const vk::BufferCopy,
) {
    if !regions.is_null() && count > 0 {
        // SAFETY: Halide passes `count` regions.
        let r = unsafe { std::slice::from_raw_parts(regions, count as usize) };
        let mut s = seen();
        s.step.copies += 1;
        s.step.bytes += r.iter().map(|c| c.size).sum::<u64>();
        // A region past the end of either buffer would have the device write
        // or read outside it: dropped, so that the process lives to say so.
        // Under the validation layer the layer says so instead.
        let size = |b: vk::Buffer| s.made.buffer_sizes.get(&vk::Handle::as_raw(b)).copied();
        let past = r.iter().find_map(|c| {
            [(src, c.src_offset, "source"), (dst, c.dst_offset, "destination")]
                .into_iter()
                .find_map(|(b, at, which)| {
                    let n = size(b)?;
                    (at.saturating_add(c.size) > n).then(|| {
                        format!(
                            "vkCmdCopyBuffer: {} bytes at offset {at} of a {n}-byte {which} buffer (past its end; the Vulkan spec forbids it)",
                            c.size
                        )
                    })
                })
        });
        if let Some(finding) = past.filter(|_| !s.instance.validation) {
            s.case.findings.push(finding);
            return;
        }
    }
    if let Some(f) = real::<vk::PFN_vkCmdCopyBuffer>(cmd, "vkCmdCopyBuffer") {
        // SAFETY: forwarded.
        unsafe { f(cmd, src, dst, count, regions) };
    }
}
