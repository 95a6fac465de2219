//! Copies straight into (or out of) the user's host memory: the host allocation
//! is imported as device-visible memory (`VK_EXT_external_memory_host`) and the
//! GPU copies to it directly, with no staging buffer and no CPU copy.
//!
//! Importing pins the pages, which costs about as much as the copy itself, so an
//! import is kept until its host memory is freed (as `cudaHostRegister` would be)
//! and later copies of the same buffer reuse it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::context::{Context, Shared};
use crate::error::{Result, VkContext};
use crate::host::HostBytes;
use crate::memory::policy::{Policy, Role};
use crate::memory::stats::Placement;

/// Copies smaller than this go through staging: importing costs an allocation and
/// a buffer, which only pays off for larger copies.
pub const IMPORT_MIN_BYTES: u64 = 1 << 20;

/// One imported host allocation.
struct Import {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
}

/// `VK_EXT_external_memory_host`, when the device has it and it is enabled, and the
/// imports made so far, by host address and size.
pub(crate) struct HostImport {
    pub(crate) fns: ash::ext::external_memory_host::Device,
    /// `minImportedHostPointerAlignment`, bytes.
    pub(crate) alignment: u64,
    imports: Mutex<HashMap<(usize, u64), Import>>,
}

impl HostImport {
    pub(crate) fn new(fns: ash::ext::external_memory_host::Device, alignment: u64) -> Self {
        HostImport {
            fns,
            alignment,
            imports: Mutex::new(HashMap::new()),
        }
    }

    /// Frees every import; with the context.
    ///
    /// # Safety
    /// The device must be idle.
    pub(crate) unsafe fn destroy(&self, s: &Shared) {
        let imports = std::mem::take(&mut *self.imports.lock().unwrap_or_else(|p| p.into_inner()));
        for (_, i) in imports {
            free(s, i);
        }
    }

    /// Frees the import of host memory at `key`, if there is one.
    fn release(&self, s: &Shared, key: (usize, u64)) {
        let i = self
            .imports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        if let Some(i) = i {
            free(s, i);
        }
    }
}

fn free(s: &Shared, i: Import) {
    // SAFETY: every submission that used the import was waited for (copies are
    // synchronous); nothing else holds the handles.
    unsafe {
        s.device.destroy_buffer(i.buffer, None);
        s.device.free_memory(i.memory, None);
    }
    s.stats.buffer_destroyed();
    s.stats.memory_freed(i.size);
}

impl Context {
    /// A buffer over all of `bytes` (the page-aligned allocation) that the GPU can
    /// copy to and from, imported now or earlier; None when this context cannot: no
    /// extension, a policy other than vkcopy (the Halide policies model Halide, which
    /// always stages), a simulated memory table (the simulation models staging), an
    /// emulated Halide bug, or a failed import (the copy then stages).
    pub(crate) fn import_host(&self, bytes: &HostBytes, role: Role) -> Option<vk::Buffer> {
        let s = &self.shared;
        let imp = s.host_import.as_ref()?;
        if s.policy != Policy::Vkcopy
            || s.allocator.is_simulated()
            || s.emulate != Default::default()
        {
            return None;
        }
        let size = bytes.capacity() as u64;
        let ptr = bytes.as_ptr();
        if !(ptr as u64).is_multiple_of(imp.alignment) || !size.is_multiple_of(imp.alignment) {
            return None;
        }
        let key = (ptr as usize, size);
        if let Some(i) = imp
            .imports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Some(i.buffer);
        }
        let import = self.try_import(imp, ptr, size, role).ok()?;
        let buffer = import.buffer;
        imp.imports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, import);
        // Free the import before the host memory goes, if the context is still there.
        let weak = Arc::downgrade(&self.shared);
        bytes.on_drop(Box::new(move || {
            if let Some(s) = weak.upgrade() {
                if let Some(imp) = s.host_import.as_ref() {
                    imp.release(&s, key);
                }
            }
        }));
        Some(buffer)
    }

    fn try_import(
        &self,
        imp: &HostImport,
        ptr: *const u8,
        size: u64,
        role: Role,
    ) -> Result<Import> {
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
        let destroy_buffer = || {
            // SAFETY: not bound, not used.
            unsafe { s.device.destroy_buffer(buffer, None) };
            s.stats.buffer_destroyed();
        };
        // SAFETY: the buffer was created from this device.
        let req = unsafe { s.device.get_buffer_memory_requirements(buffer) };
        let bits = props.memory_type_bits & req.memory_type_bits;
        let table = &s.device_memory;
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
            destroy_buffer();
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
        // SAFETY: imports a live host allocation; the import is freed before the
        // allocation (HostBytes runs its drop hooks first).
        let memory = match unsafe { s.device.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(e) => {
                destroy_buffer();
                return Err(e).vk("vkAllocateMemory (import)");
            }
        };
        s.stats.memory_allocated(size);
        let import = Import {
            buffer,
            memory,
            size,
        };
        // SAFETY: the memory type is allowed by the buffer's requirements; offset 0.
        if let Err(e) = unsafe { s.device.bind_buffer_memory(buffer, memory, 0) } {
            free(s, import);
            return Err(e).vk("vkBindBufferMemory");
        }
        let t = &table.types[ty as usize];
        s.stats.placed(Placement {
            role,
            memory_type: ty,
            flags: t.flags,
            heap: t.heap,
            size,
            fallbacks: 0,
            imported: true,
        });
        Ok(import)
    }
}
