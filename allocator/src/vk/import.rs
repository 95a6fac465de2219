//! Host import (`VK_EXT_external_memory_host`): a host allocation imported as
//! device-visible memory, so the GPU copies to and from it directly, with no
//! staging buffer and no CPU copy.
//!
//! Any host memory can be imported: the import covers the page range around it
//! (start rounded down, end rounded up to `minImportedHostPointerAlignment`), and
//! copies address the bytes inside. Importing pins the pages, which costs about
//! as much as a large copy, so an import is kept until its host memory is freed
//! (as `cudaHostRegister` would be) and later copies of the same memory reuse it.
//! Two allocations that share a page get an import each.
//!
//! A small readback imports only small memory it meets again, or memory
//! imported already ([`HostImport::buffer_when_reused`]): for one copy,
//! staging's CPU copy costs less than pinning. Freeing an import retires every
//! kept recording of the device (`DeviceShared::retire`), so short-lived small
//! buffers read back twice make later copies record again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::buffer::host::HostBytes;
use crate::error::{Result, VkContext};
use crate::memory::policy::Role;
use crate::stats::Placement;
use crate::vk::device::DeviceShared;

/// One imported host allocation.
struct Import {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    /// Bytes from the start of the import to the allocation's first byte.
    offset: u64,
}

/// The page range around `len` bytes at `addr`: its start and length.
fn page_range(addr: usize, len: usize, alignment: usize) -> (usize, usize) {
    let start = addr / alignment * alignment;
    let end = (addr + len.max(1)).next_multiple_of(alignment);
    (start, end - start)
}

/// The imports of one context, by host allocation.
pub(crate) struct HostImport {
    device: Arc<DeviceShared>,
    fns: ash::ext::external_memory_host::Device,
    /// `minImportedHostPointerAlignment`, bytes.
    alignment: u64,
    imports: Mutex<HashMap<u64, Import>>,
    /// Host allocations a small copy met and did not import, newest last,
    /// and whether importing them failed (then they are not tried again).
    met: Mutex<VecDeque<(u64, bool)>>,
}

/// How many allocations [`HostImport::buffer_when_reused`] remembers.
const MET: usize = 64;

/// Small copies stop importing while this many imports of any size are live
/// (threads importing at once may pass it by one each): each is a
/// `VkDeviceMemory`, of which some drivers allow 4096.
const SMALL_IMPORTS_MAX: usize = 1024;

impl HostImport {
    /// Imports on `device`, when it has the extension enabled.
    pub(crate) fn new(device: &Arc<DeviceShared>) -> Option<Arc<Self>> {
        let (fns, alignment) = device.host_import.clone()?;
        Some(Arc::new(HostImport {
            device: device.clone(),
            fns,
            alignment,
            imports: Mutex::new(HashMap::new()),
            met: Mutex::new(VecDeque::new()),
        }))
    }

    /// Frees the import of host memory at `key`, if there is one.
    fn release(&self, key: u64) {
        let i = self
            .imports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        if let Some(i) = i {
            self.free(i);
        }
    }

    fn free(&self, i: Import) {
        self.device.settle();
        self.device.retire();
        // SAFETY: every submission that used the import was waited for (copies are
        // synchronous); nothing else holds the handles.
        unsafe {
            self.device.raw().destroy_buffer(i.buffer, None);
            self.device.raw().free_memory(i.memory, None);
        }
        self.device.stats.buffer_destroyed();
        self.device.stats.memory_freed(i.size);
    }

    /// A buffer that the GPU can copy to and from, over the pages of `bytes`, and
    /// the offset in it of `bytes[0]`; imported now or earlier. None when the
    /// import fails (the copy then stages).
    pub(crate) fn buffer(
        self: &Arc<Self>,
        bytes: &HostBytes,
        role: Role,
    ) -> Option<(vk::Buffer, u64)> {
        let key = bytes.id();
        if let Some(i) = self
            .imports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Some((i.buffer, i.offset));
        }
        let addr = bytes.as_ptr() as usize;
        let (start, size) = page_range(addr, bytes.len(), self.alignment as usize);
        let mut import = self
            .try_import(start as *const u8, size as u64, role)
            .ok()?;
        import.offset = (addr - start) as u64;
        let found = (import.buffer, import.offset);
        self.imports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, import);
        // Free the import before the host memory goes, if the context is still there.
        let weak = Arc::downgrade(self);
        bytes.on_drop(Box::new(move || {
            if let Some(imp) = weak.upgrade() {
                imp.release(key);
            }
        }));
        Some(found)
    }

    /// [`HostImport::buffer`] for a small copy: its import if there is one;
    /// else an allocation of under `max_len` bytes is imported when a small
    /// copy meets it the second time (None the first time, and after a failed
    /// import: the copy stages).
    pub(crate) fn buffer_when_reused(
        self: &Arc<Self>,
        bytes: &HostBytes,
        role: Role,
        max_len: usize,
    ) -> Option<(vk::Buffer, u64)> {
        let key = bytes.id();
        let imports = self.imports.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = imports.get(&key) {
            return Some((i.buffer, i.offset));
        }
        if bytes.len() >= max_len || imports.len() >= SMALL_IMPORTS_MAX {
            return None;
        }
        drop(imports);
        let mut met = self.met.lock().unwrap_or_else(|p| p.into_inner());
        let remember = |met: &mut VecDeque<_>, failed| {
            if met.len() == MET {
                met.pop_front();
            }
            met.push_back((key, failed));
        };
        match met.iter().position(|&(k, _)| k == key) {
            Some(at) if met[at].1 => None,
            Some(at) => {
                met.remove(at);
                drop(met);
                let found = self.buffer(bytes, role);
                if found.is_none() {
                    remember(
                        &mut self.met.lock().unwrap_or_else(|p| p.into_inner()),
                        true,
                    );
                }
                found
            }
            None => {
                remember(&mut met, false);
                None
            }
        }
    }

    fn try_import(&self, ptr: *const u8, size: u64, role: Role) -> Result<Import> {
        let s = &*self.device;
        let imp = self;
        let handle = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
        let mut props = vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: `ptr` starts a live, aligned allocation of `size` bytes.
        unsafe {
            (imp.fns.fp().get_memory_host_pointer_properties_ext)(
                s.raw().handle(),
                handle,
                ptr.cast(),
                &mut props,
            )
        }
        .result()
        .vk("vkGetMemoryHostPointerPropertiesEXT")?;
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
        let info = s
            .buffer_info(
                size,
                vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .push_next(&mut external);
        // SAFETY: valid create info; destroyed on every path below.
        let buffer = unsafe { s.raw().create_buffer(&info, None) }.vk("vkCreateBuffer")?;
        s.stats.buffer_created();
        let destroy_buffer = || {
            // SAFETY: not bound, not used.
            unsafe { s.raw().destroy_buffer(buffer, None) };
            s.stats.buffer_destroyed();
        };
        // SAFETY: the buffer was created from this device.
        let req = unsafe { s.raw().get_buffer_memory_requirements(buffer) };
        let bits = props.memory_type_bits & req.memory_type_bits;
        let table = &s.memory;
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
        let memory = match unsafe { s.raw().allocate_memory(&alloc, None) } {
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
            offset: 0,
        };
        // SAFETY: the memory type is allowed by the buffer's requirements; offset 0.
        if let Err(e) = unsafe { s.raw().bind_buffer_memory(buffer, memory, 0) } {
            self.free(import);
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

impl Drop for HostImport {
    fn drop(&mut self) {
        let imports = std::mem::take(self.imports.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (_, i) in imports {
            self.free(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::page_range;

    #[test]
    fn page_ranges_cover_the_bytes() {
        assert_eq!(page_range(4096, 4096, 4096), (4096, 4096));
        assert_eq!(page_range(4096 + 16, 4096, 4096), (4096, 8192));
        assert_eq!(page_range(8191, 1, 4096), (4096, 4096));
        assert_eq!(page_range(8191, 2, 4096), (4096, 8192));
        assert_eq!(page_range(12288, 0, 4096), (12288, 4096));
    }
}
