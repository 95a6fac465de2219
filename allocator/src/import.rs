//! Copies straight into (or out of) the user's host memory: the host allocation
//! is imported as device-visible memory (`VK_EXT_external_memory_host`) and the
//! GPU copies to it directly, with no staging buffer and no CPU copy. On the lab
//! H200 that moves 51 GB/s device-to-host, against ~9 GB/s through host-cached
//! staging (see `reports/README.md`).

use ash::vk;

use crate::context::Context;
use crate::error::{Result, VkContext};
use crate::host::HostBytes;
use crate::memory::policy::Role;
use crate::memory::stats::Placement;
use crate::memory::table::property_flags_name;

/// Copies smaller than this go through staging: importing costs an allocation and
/// a buffer, which only pays off for larger copies.
pub const IMPORT_MIN_BYTES: u64 = 1 << 20;

/// `VK_EXT_external_memory_host`, when the device has it and it is enabled.
pub(crate) struct HostImport {
    pub(crate) fns: ash::ext::external_memory_host::Device,
    /// `minImportedHostPointerAlignment`, bytes.
    pub(crate) alignment: u64,
}

/// Host memory imported as a buffer; freed on drop.
pub(crate) struct Imported<'a> {
    ctx: &'a Context,
    pub(crate) buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
}

impl Drop for Imported<'_> {
    fn drop(&mut self) {
        let s = &self.ctx.shared;
        // SAFETY: every submission that used the buffer was waited for.
        unsafe {
            s.device.destroy_buffer(self.buffer, None);
            s.device.free_memory(self.memory, None);
        }
        s.stats.buffer_destroyed();
        s.stats.memory_freed(self.size);
    }
}

impl Context {
    /// Imports `bytes` (the whole page-aligned allocation) for a copy of `role`, or
    /// None when this context cannot: no extension, a simulated memory table (the
    /// simulation models staging), an emulated Halide bug, or a failed import (the
    /// copy then goes through staging).
    pub(crate) fn import_host(&self, bytes: &HostBytes, role: Role) -> Option<Imported<'_>> {
        let s = &self.shared;
        let imp = s.host_import.as_ref()?;
        if s.allocator.is_simulated() || s.emulate != Default::default() {
            return None;
        }
        let size = bytes.capacity() as u64;
        let ptr = bytes.as_ptr();
        if (ptr as u64) % imp.alignment != 0 || size % imp.alignment != 0 {
            return None;
        }
        self.try_import(imp, ptr, size, role).ok()
    }

    fn try_import(
        &self,
        imp: &HostImport,
        ptr: *const u8,
        size: u64,
        role: Role,
    ) -> Result<Imported<'_>> {
        let s = &self.shared;
        let handle = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
        let mut props = vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: `ptr` starts a live, aligned allocation of `size` bytes.
        unsafe {
            (imp.fns.fp().get_memory_host_pointer_properties_ext)(
                s.device.handle(),
                handle,
                ptr.cast(),
                &mut props,
            )
        }
        .result()
        .vk("vkGetMemoryHostPointerPropertiesEXT")?;
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: valid create info; destroyed on every path below.
        let buffer = unsafe { s.device.create_buffer(&info, None) }.vk("vkCreateBuffer")?;
        s.stats.buffer_created();
        // SAFETY: the buffer was created from this device.
        let req = unsafe { s.device.get_buffer_memory_requirements(buffer) };
        let bits = props.memory_type_bits & req.memory_type_bits;
        let table = &s.device_memory;
        // Host-cached memory first: the CPU reads it after the copy.
        // Coherent memory only: imported memory is not mapped, so it cannot be flushed
        // or invalidated. Host-cached first: the CPU reads it after the copy.
        let pick = (0..table.types.len() as u32)
            .filter(|t| bits & (1 << t) != 0)
            .filter(|&t| {
                table.types[t as usize]
                    .flags
                    .contains(vk::MemoryPropertyFlags::HOST_COHERENT)
            })
            .min_by_key(|&t| {
                !table.types[t as usize]
                    .flags
                    .contains(vk::MemoryPropertyFlags::HOST_CACHED)
            });
        let Some(ty) = pick else {
            // SAFETY: not bound, not used.
            unsafe { s.device.destroy_buffer(buffer, None) };
            s.stats.buffer_destroyed();
            return Err(crate::Error::DeviceMallocFailed(
                "no coherent memory type can import this host allocation".into(),
            ));
        };
        let mut import = vk::ImportMemoryHostPointerInfoEXT::default()
            .handle_type(handle)
            .host_pointer(ptr as *mut std::ffi::c_void);
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(ty)
            .push_next(&mut import);
        // SAFETY: imports a live host allocation that outlives the import (the caller
        // holds its lock for the whole copy).
        let memory = match unsafe { s.device.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: not bound, not used.
                unsafe { s.device.destroy_buffer(buffer, None) };
                s.stats.buffer_destroyed();
                return Err(e).vk("vkAllocateMemory (import)");
            }
        };
        s.stats.memory_allocated(size);
        let imported = Imported {
            ctx: self,
            buffer,
            memory,
            size,
        };
        // SAFETY: the memory type is allowed by the buffer's requirements; offset 0.
        unsafe { s.device.bind_buffer_memory(buffer, memory, 0) }.vk("vkBindBufferMemory")?;
        let t = &table.types[ty as usize];
        s.stats.placed(Placement {
            role,
            memory_type: ty,
            flags: property_flags_name(t.flags),
            heap: t.heap,
            size,
            fallbacks: 0,
            imported: true,
        });
        Ok(imported)
    }
}
