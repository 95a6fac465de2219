//! Vulkan entry points between Halide's runtime and the real driver.
//!
//! Halide resolves `vkGetInstanceProcAddr` through `halide_get_library_symbol`,
//! which the suite replaces, and every other entry point through that; so the
//! suite sees each memory allocation, buffer and mapping Halide makes. That gives
//! leak accounting and placements (which memory type each role landed in), and
//! with a recorded table it presents the table to Halide and backs each of its
//! types with a real one, as vkcopy's simulation does. Under a table it also
//! records what a real driver of that table would refuse: a buffer bound to a
//! type outside its `memoryTypeBits`, a heap over its size, and non-coherent
//! memory read or written without an invalidate or flush.

use halide_ffi::vkcopy::CopyCountsFn;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::outcome::PlacementRecord;
use crate::rt::{is_validation_finding, property_flags_name, vk, DeviceType, MemoryTable, Role};

/// The real loader, opened once.
struct Loader {
    lib: libloading::Library,
    gipa: vk::PFN_vkGetInstanceProcAddr,
}

fn loader() -> Option<&'static Loader> {
    static LOADER: OnceLock<Option<Loader>> = OnceLock::new();
    LOADER
        .get_or_init(|| {
            let name =
                std::env::var("HL_VK_LOADER_LIB").unwrap_or_else(|_| "libvulkan.so.1".into());
            // SAFETY: the Vulkan loader's initializers are safe to run.
            let lib = unsafe { libloading::Library::new(name) }.ok()?;
            // SAFETY: `vkGetInstanceProcAddr` has this type in every loader.
            let gipa =
                *unsafe { lib.get::<vk::PFN_vkGetInstanceProcAddr>(b"vkGetInstanceProcAddr\0") }
                    .ok()?;
            Some(Loader { lib, gipa })
        })
        .as_ref()
}

/// What a step asks of Halide: its buffer bindings are placements of the
/// step's role, and its `vkCmdCopyBuffer`s are copies of its direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    Malloc,
    Upload,
    Readback,
    DeviceToDevice,
    /// Device data written for a device fill or add: neither counted nor placed.
    Kernel,
}

impl StepKind {
    fn role(self) -> Option<Role> {
        match self {
            StepKind::Malloc => Some(Role::Device),
            StepKind::Upload => Some(Role::Upload),
            StepKind::Readback => Some(Role::Readback),
            // No staging between two buffers' device memory.
            StepKind::DeviceToDevice => Some(Role::Device),
            StepKind::Kernel => None,
        }
    }
}

/// A memory allocation Halide made.
struct Memory {
    /// The type Halide asked for (the table's, when one is simulated).
    ty: u32,
    size: u64,
}

/// What the shim saw since the case began.
#[derive(Default)]
struct Seen {
    /// The simulated table and the real type behind each of its types.
    table: Option<(MemoryTable, Vec<u32>)>,
    /// Real entry points by name.
    real: HashMap<String, usize>,
    memories: HashMap<u64, Memory>,
    /// Buffers: the type bits Halide was told they may use, and their size.
    buffers: HashMap<u64, (u32, u64)>,
    /// Buffers: the size they were made with (a copy may not pass it).
    buffer_sizes: HashMap<u64, u64>,
    /// Buffers made for both directions of transfer: Halide's device memory
    /// (`MemoryUsage::TransferSrcDst`), where its staging is made for one.
    both_ways: std::collections::HashSet<u64>,
    /// The placements of the current step that bound such a buffer, in order.
    step_both_ways: Vec<usize>,
    mappings: u64,
    heap_used: Vec<u64>,
    /// Per heap, what `fill_heap` says other programs hold.
    heap_taken: Vec<u64>,
    kind: Option<StepKind>,
    /// `vkCmdCopyBuffer`s and their bytes in the current step.
    step_copies: u64,
    step_bytes: u64,
    /// Copies and bytes so far: to the device, to the host, device to device.
    copies: [u64; 3],
    bytes: [u64; 3],
    /// The library's own account of its copies, where it keeps one
    /// (`vkcopy_halide_copy_counts`), and its counts when the step began.
    own_counts: Option<(CopyCountsFn, [u64; 6])>,
    fallbacks: u32,
    placements: Vec<PlacementRecord>,
    findings: Vec<String>,
    /// In the current step: non-coherent memory mapped, and flushes/invalidates.
    noncoherent_maps: u32,
    flushes: u32,
    invalidates: u32,
    device_type: Option<DeviceType>,
    /// The validation layer on Halide's next instances, its messages since the
    /// case began, and the messenger of the live instance.
    validation: bool,
    messages: Vec<String>,
    messenger: Option<(u64, vk::DebugUtilsMessengerEXT)>,
    /// Devices Halide made and has not destroyed (its context outlives cases).
    devices: u64,
    /// The real memory types, read once.
    real_types: Vec<crate::rt::MemoryType>,
}

fn seen() -> MutexGuard<'static, Seen> {
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    SEEN.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Starts a case: `table` is presented to Halide from the next instance on.
/// `counts`, when the library has it, is its own account of its copies.
pub fn begin_case(table: Option<&MemoryTable>, validation: bool, counts: Option<CopyCountsFn>) {
    let mut s = seen();
    let real = std::mem::take(&mut s.real);
    let (device_type, messenger, devices) = (s.device_type, s.messenger, s.devices);
    *s = Seen {
        real,
        device_type,
        messenger,
        devices,
        validation,
        ..Seen::default()
    };
    s.own_counts = counts.map(|f| (f, [0; 6]));
    s.table = table.map(|t| (t.clone(), Vec::new()));
    s.heap_used = table.map_or(Vec::new(), |t| vec![0; t.heaps.len()]);
    s.heap_taken = s.heap_used.clone();
}

/// Counts of what Halide holds now, and of the copies it made.
pub struct Live {
    pub memories: u64,
    pub memory_bytes: u64,
    pub buffers: u64,
    pub mappings: u64,
    /// Copies and bytes to the device, to the host, device to device.
    pub copies: [u64; 3],
    pub bytes: [u64; 3],
    /// Devices Halide holds: 1 while its context is up.
    pub devices: u64,
}

pub fn live() -> Live {
    let s = seen();
    Live {
        memories: s.memories.len() as u64,
        memory_bytes: s.memories.values().map(|m| m.size).sum(),
        buffers: s.buffers.len() as u64,
        mappings: s.mappings,
        copies: s.copies,
        bytes: s.bytes,
        devices: s.devices,
    }
}

/// Takes all but `leave` bytes of heap `heap` of the simulated table, as
/// vkcopy's `fill_heap` does; an error without a table.
pub fn fill_heap(heap: u32, leave: u64) -> Result<(), String> {
    let mut s = seen();
    let s = &mut *s;
    let Some((t, _)) = &s.table else {
        return Err("fill_heap on Halide's runtime needs a simulated table".into());
    };
    let h = t
        .heaps
        .get(heap as usize)
        .ok_or_else(|| format!("fill_heap: no heap {heap}"))?;
    // As vkcopy's simulation: what other programs hold is set anew, so that
    // the runtime finds `leave` bytes beside what it holds itself.
    let size = h.budget.unwrap_or(h.size);
    let h = heap as usize;
    s.heap_taken[h] = size.saturating_sub(s.heap_used[h]).saturating_sub(leave);
    Ok(())
}

/// Starts a step of `kind` (None: nothing to place or count).
pub fn begin_step(kind: Option<StepKind>) {
    let mut s = seen();
    s.kind = kind;
    s.step_copies = 0;
    s.step_bytes = 0;
    s.fallbacks = 0;
    s.noncoherent_maps = 0;
    s.flushes = 0;
    s.invalidates = 0;
    s.step_both_ways.clear();
    if let Some((f, at)) = &mut s.own_counts {
        *at = read_counts(*f);
    }
}

fn read_counts(f: CopyCountsFn) -> [u64; 6] {
    let mut out = [0u64; 6];
    // SAFETY: the library's function writes six counts.
    unsafe { f(out.as_mut_ptr()) };
    out
}

/// The current step gave a buffer its device memory: the first buffer for
/// both directions bound in the step holds it (Halide allocates a buffer's
/// device memory before any staging), so its placement is the buffer's
/// `device` memory, whichever call made it.
pub fn claim_device() {
    let mut s = seen();
    let s = &mut *s;
    if let Some(&i) = s.step_both_ways.first() {
        s.placements[i].role = Role::Device.to_string();
    }
}

/// Ends a copy step: non-coherent memory the host read without an invalidate,
/// or wrote without a flush, is a finding.
pub fn end_step(step: &str) {
    let mut s = seen();
    let s = &mut *s;
    let direction = match s.kind {
        Some(StepKind::Upload) => Some(0),
        Some(StepKind::Readback) => Some(1),
        Some(StepKind::DeviceToDevice) => Some(2),
        _ => None,
    };
    match (s.own_counts, direction) {
        // The library's account of what the step copied, in every direction
        // (a copy the CPU makes into mapped memory records no command).
        (Some((f, at)), Some(_)) => {
            let now = read_counts(f);
            for d in 0..3 {
                s.copies[d] += now[2 * d] - at[2 * d];
                s.bytes[d] += now[2 * d + 1] - at[2 * d + 1];
            }
        }
        (None, Some(d)) if s.step_copies > 0 => {
            s.copies[d] += 1;
            s.bytes[d] += s.step_bytes;
        }
        _ => {}
    }
    if s.noncoherent_maps > 0 {
        let missing = match s.kind.and_then(StepKind::role) {
            Some(Role::Readback) if s.invalidates == 0 => Some("vkInvalidateMappedMemoryRanges"),
            Some(Role::Upload) if s.flushes == 0 => Some("vkFlushMappedMemoryRanges"),
            _ => None,
        };
        if let Some(call) = missing {
            s.findings.push(format!(
                "{step}: mapped non-coherent memory without {call}: a real driver of this table may show stale data"
            ));
        }
    }
    s.kind = None;
}

pub fn placements() -> Vec<PlacementRecord> {
    seen().placements.clone()
}

/// What the validation layer said about Halide since the case began.
pub fn take_validation_messages() -> Vec<String> {
    std::mem::take(&mut seen().messages)
}

pub fn take_findings() -> Vec<String> {
    std::mem::take(&mut seen().findings)
}

/// The device type Halide's instance reported, once it made one.
pub fn device_type() -> Option<DeviceType> {
    seen().device_type
}

/// The table presented to Halide, for messages.
pub fn describe_type(ty: u32) -> String {
    match &seen().table {
        Some((t, _)) => t.describe_type(ty),
        None => format!("type {ty}"),
    }
}

fn real<F: Copy>(name: &str) -> Option<F> {
    let p = *seen().real.get(name)?;
    // SAFETY: stored from the loader under this name, so of this function type;
    // function pointers and usize have the same size.
    Some(unsafe { std::mem::transmute_copy::<usize, F>(&p) })
}

/// Replaces `halide_get_library_symbol`: hands out the suite's
/// `vkGetInstanceProcAddr`, and the real symbol for everything else.
///
/// # Safety
/// `name` is a NUL-terminated string and `lib` null or a `dlopen` handle, as
/// Halide passes them.
pub unsafe extern "C" fn get_library_symbol(lib: *mut c_void, name: *const c_char) -> *mut c_void {
    // SAFETY: Halide passes a NUL-terminated name.
    let n = unsafe { CStr::from_ptr(name) };
    let found = if lib.is_null() {
        loader().and_then(|l| {
            // SAFETY: a lookup by name; the caller casts to the symbol's type.
            unsafe { l.lib.get::<*mut c_void>(n.to_bytes_with_nul()) }
                .ok()
                .map(|s| *s)
        })
    } else {
        // SAFETY: `lib` is a handle from Halide's `dlopen`.
        Some(unsafe { libc::dlsym(lib, name) })
    };
    let Some(found) = found.filter(|f| !f.is_null()) else {
        return std::ptr::null_mut();
    };
    // SAFETY: a non-null entry point of the loader.
    let f = Some(unsafe { std::mem::transmute::<*mut c_void, unsafe extern "system" fn()>(found) });
    match remember(n, f) {
        Some(ours) if ours as usize != found as usize => ours as *mut c_void,
        _ => found,
    }
}

/// The suite's entry point for `name`, or None to hand out the real one.
fn ours(name: &[u8]) -> Option<*mut c_void> {
    Some(match name {
        b"vkGetInstanceProcAddr" => get_instance_proc_addr as *mut c_void,
        b"vkCreateInstance" => create_instance as *mut c_void,
        b"vkDestroyInstance" => destroy_instance as *mut c_void,
        b"vkCreateDevice" => create_device as *mut c_void,
        b"vkDestroyDevice" => destroy_device as *mut c_void,
        b"vkGetDeviceProcAddr" => get_device_proc_addr as *mut c_void,
        b"vkGetPhysicalDeviceProperties" => get_physical_device_properties as *mut c_void,
        b"vkEnumerateDeviceExtensionProperties" => enumerate_device_extensions as *mut c_void,
        b"vkGetPhysicalDeviceProperties2" | b"vkGetPhysicalDeviceProperties2KHR" => {
            get_physical_device_properties2 as *mut c_void
        }
        b"vkGetPhysicalDeviceMemoryProperties" => get_memory_properties as *mut c_void,
        b"vkGetPhysicalDeviceMemoryProperties2" | b"vkGetPhysicalDeviceMemoryProperties2KHR" => {
            get_memory_properties2 as *mut c_void
        }
        b"vkAllocateMemory" => allocate_memory as *mut c_void,
        b"vkFreeMemory" => free_memory as *mut c_void,
        b"vkCreateBuffer" => create_buffer as *mut c_void,
        b"vkDestroyBuffer" => destroy_buffer as *mut c_void,
        b"vkGetBufferMemoryRequirements" => get_buffer_memory_requirements as *mut c_void,
        b"vkBindBufferMemory" => bind_buffer_memory as *mut c_void,
        b"vkMapMemory" => map_memory as *mut c_void,
        b"vkCmdCopyBuffer" => cmd_copy_buffer as *mut c_void,
        b"vkUnmapMemory" => unmap_memory as *mut c_void,
        b"vkFlushMappedMemoryRanges" => flush_ranges as *mut c_void,
        b"vkInvalidateMappedMemoryRanges" => invalidate_ranges as *mut c_void,
        _ => return None,
    })
}

unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    let l = loader()?;
    // SAFETY: forwarded as Halide called it.
    let f = unsafe { (l.gipa)(instance, name) };
    // SAFETY: a NUL-terminated name.
    let n = unsafe { CStr::from_ptr(name) };
    remember(n, f)
}

unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    let gdpa = real::<vk::PFN_vkGetDeviceProcAddr>("vkGetDeviceProcAddr")?;
    // SAFETY: forwarded as Halide called it.
    let f = unsafe { gdpa(device, name) };
    // SAFETY: a NUL-terminated name.
    let n = unsafe { CStr::from_ptr(name) };
    remember(n, f)
}

/// Keeps the real `f` for `name` and hands out the suite's entry point where
/// it has one.
fn remember(name: &CStr, f: vk::PFN_vkVoidFunction) -> vk::PFN_vkVoidFunction {
    let f = f?;
    let Some(ours) = ours(name.to_bytes()) else {
        return Some(f);
    };
    let key = name.to_string_lossy().into_owned();
    let key = key.strip_suffix("KHR").map_or(key.clone(), str::to_owned);
    if key != "vkGetInstanceProcAddr" {
        seen().real.insert(key, f as usize);
    }
    // SAFETY: a function pointer of the suite with the entry point's type.
    Some(unsafe { std::mem::transmute::<*mut c_void, unsafe extern "system" fn()>(ours) })
}

unsafe extern "system" fn get_physical_device_properties(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceProperties,
) {
    let Some(f) = real::<vk::PFN_vkGetPhysicalDeviceProperties>("vkGetPhysicalDeviceProperties")
    else {
        return;
    };
    // SAFETY: forwarded; `out` is Halide's.
    unsafe { f(pd, out) };
    // SAFETY: filled by the driver just now.
    present_type(unsafe { &mut *out });
}

unsafe extern "system" fn get_physical_device_properties2(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    let Some(f) = real::<vk::PFN_vkGetPhysicalDeviceProperties2>("vkGetPhysicalDeviceProperties2")
    else {
        return;
    };
    // SAFETY: forwarded; `out` is the runtime's.
    unsafe { f(pd, out) };
    // SAFETY: filled by the driver just now.
    present_type(unsafe { &mut (*out).properties });
}

/// Extensions whose answers describe the real device's memory, hidden under a
/// simulated table (which does not record them): host import would hand out
/// the real types' bits, and the budget the real heaps'.
const MEMORY_EXTENSIONS: [&CStr; 2] = [c"VK_EXT_external_memory_host", c"VK_EXT_memory_budget"];

unsafe extern "system" fn enumerate_device_extensions(
    pd: vk::PhysicalDevice,
    layer: *const c_char,
    count: *mut u32,
    out: *mut vk::ExtensionProperties,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkEnumerateDeviceExtensionProperties>(
        "vkEnumerateDeviceExtensionProperties",
    ) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if seen().table.is_none() {
        // SAFETY: forwarded as the runtime called it.
        return unsafe { f(pd, layer, count, out) };
    }
    let mut n = 0u32;
    // SAFETY: the two-call idiom on the real function, into memory of ours.
    let mut all = unsafe {
        let r = f(pd, layer, &mut n, std::ptr::null_mut());
        if r != vk::Result::SUCCESS {
            return r;
        }
        let mut all = vec![vk::ExtensionProperties::default(); n as usize];
        let r = f(pd, layer, &mut n, all.as_mut_ptr());
        if r != vk::Result::SUCCESS && r != vk::Result::INCOMPLETE {
            return r;
        }
        all.truncate(n as usize);
        all
    };
    all.retain(|e| {
        // SAFETY: the driver NUL-terminates extension names.
        let name = unsafe { CStr::from_ptr(e.extension_name.as_ptr()) };
        !MEMORY_EXTENSIONS.contains(&name)
    });
    // SAFETY: `count` is the runtime's; `out`, when given, holds `*count` entries.
    unsafe {
        if out.is_null() {
            *count = all.len() as u32;
            return vk::Result::SUCCESS;
        }
        let room = (*count as usize).min(all.len());
        std::ptr::copy_nonoverlapping(all.as_ptr(), out, room);
        *count = room as u32;
        if room < all.len() {
            vk::Result::INCOMPLETE
        } else {
            vk::Result::SUCCESS
        }
    }
}

/// Remembers the real device type, and presents the simulated table's: a
/// runtime's policy may read it (vkcopy's does, for small BAR heaps), as it
/// would on the recorded device.
fn present_type(props: &mut vk::PhysicalDeviceProperties) {
    let mut s = seen();
    s.device_type = Some(DeviceType::from(props.device_type));
    if let Some((t, _)) = &s.table {
        props.device_type = match t.device_type {
            DeviceType::Cpu => vk::PhysicalDeviceType::CPU,
            DeviceType::IntegratedGpu => vk::PhysicalDeviceType::INTEGRATED_GPU,
            DeviceType::DiscreteGpu => vk::PhysicalDeviceType::DISCRETE_GPU,
            DeviceType::VirtualGpu => vk::PhysicalDeviceType::VIRTUAL_GPU,
            DeviceType::Other => vk::PhysicalDeviceType::OTHER,
        };
    }
}

/// Presents the simulated table (when there is one) in `props`, which holds the
/// real device's; remembers the real types to back the table's.
fn present(props: &mut vk::PhysicalDeviceMemoryProperties) {
    let mut s = seen();
    let real: Vec<crate::rt::MemoryType> = props.memory_types[..props.memory_type_count as usize]
        .iter()
        .map(|t| crate::rt::MemoryType {
            heap: t.heap_index,
            flags: t.property_flags,
        })
        .collect();
    s.real_types = real.clone();
    let Some((table, backing)) = s.table.as_mut() else {
        return;
    };
    *backing = crate::rt::backing_types(&real, table);
    let mut p = vk::PhysicalDeviceMemoryProperties {
        memory_type_count: table.types.len() as u32,
        memory_heap_count: table.heaps.len() as u32,
        ..Default::default()
    };
    for (i, t) in table.types.iter().enumerate() {
        p.memory_types[i] = vk::MemoryType {
            property_flags: t.flags,
            heap_index: t.heap,
        };
    }
    for (i, h) in table.heaps.iter().enumerate() {
        p.memory_heaps[i] = vk::MemoryHeap {
            size: h.size,
            flags: h.flags,
        };
    }
    *props = p;
}

unsafe extern "system" fn get_memory_properties(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceMemoryProperties,
) {
    let Some(f) =
        real::<vk::PFN_vkGetPhysicalDeviceMemoryProperties>("vkGetPhysicalDeviceMemoryProperties")
    else {
        return;
    };
    // SAFETY: forwarded; `out` is Halide's and filled by the driver.
    unsafe {
        f(pd, out);
        present(&mut *out);
    }
}

unsafe extern "system" fn get_memory_properties2(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
) {
    let Some(f) = real::<vk::PFN_vkGetPhysicalDeviceMemoryProperties2>(
        "vkGetPhysicalDeviceMemoryProperties2",
    ) else {
        return;
    };
    // SAFETY: forwarded; `out` is Halide's and filled by the driver.
    unsafe {
        f(pd, out);
        present(&mut (*out).memory_properties);
    }
}

/// The real type behind `ty`, and the heap of `ty` in the presented table.
fn backing(s: &Seen, ty: u32) -> Option<(u32, Option<u32>)> {
    match &s.table {
        Some((t, b)) => Some((*b.get(ty as usize)?, Some(t.types.get(ty as usize)?.heap))),
        None => Some((ty, None)),
    }
}

unsafe extern "system" fn allocate_memory(
    device: vk::Device,
    info: *const vk::MemoryAllocateInfo<'_>,
    callbacks: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::DeviceMemory,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkAllocateMemory>("vkAllocateMemory") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: Halide's allocate info.
    let mut local = unsafe { *info };
    let ty = local.memory_type_index;
    let size = local.allocation_size;
    {
        let mut s = seen();
        let Some((real_ty, heap)) = backing(&s, ty) else {
            s.findings.push(format!(
                "vkAllocateMemory: memory type {ty} is not in the device's table"
            ));
            return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
        };
        if let (Some(h), Some((t, _))) = (heap, &s.table) {
            let heap_size = t.heaps[h as usize]
                .budget
                .unwrap_or(t.heaps[h as usize].size);
            if s.heap_used[h as usize] + s.heap_taken[h as usize] + size > heap_size {
                s.fallbacks += 1;
                return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
            }
        }
        local.memory_type_index = real_ty;
    }
    // SAFETY: forwarded with the real type.
    let r = unsafe { f(device, &local, callbacks, out) };
    let mut s = seen();
    if r != vk::Result::SUCCESS {
        s.fallbacks += 1;
        return r;
    }
    if let Some((_, Some(h))) = backing(&s, ty) {
        s.heap_used[h as usize] += size;
    }
    // SAFETY: written by the driver on success.
    let handle = unsafe { *out };
    s.memories
        .insert(vk::Handle::as_raw(handle), Memory { ty, size });
    r
}

unsafe extern "system" fn free_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    callbacks: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(f) = real::<vk::PFN_vkFreeMemory>("vkFreeMemory") {
        // SAFETY: forwarded.
        unsafe { f(device, memory, callbacks) };
    }
    let mut s = seen();
    if let Some(m) = s.memories.remove(&vk::Handle::as_raw(memory)) {
        if let Some((_, Some(h))) = backing(&s, m.ty) {
            s.heap_used[h as usize] -= m.size;
        }
    }
}

unsafe extern "system" fn create_buffer(
    device: vk::Device,
    info: *const vk::BufferCreateInfo<'_>,
    callbacks: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Buffer,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkCreateBuffer>("vkCreateBuffer") else {
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
        s.buffers.insert(b, (u32::MAX, size));
        s.buffer_sizes.insert(b, size);
        let both = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        if usage.contains(both) {
            s.both_ways.insert(b);
        }
    }
    r
}

unsafe extern "system" fn destroy_buffer(
    device: vk::Device,
    buffer: vk::Buffer,
    callbacks: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(f) = real::<vk::PFN_vkDestroyBuffer>("vkDestroyBuffer") {
        // SAFETY: forwarded.
        unsafe { f(device, buffer, callbacks) };
    }
    let mut s = seen();
    s.buffers.remove(&vk::Handle::as_raw(buffer));
    s.buffer_sizes.remove(&vk::Handle::as_raw(buffer));
    s.both_ways.remove(&vk::Handle::as_raw(buffer));
}

unsafe extern "system" fn get_buffer_memory_requirements(
    device: vk::Device,
    buffer: vk::Buffer,
    out: *mut vk::MemoryRequirements,
) {
    let Some(f) = real::<vk::PFN_vkGetBufferMemoryRequirements>("vkGetBufferMemoryRequirements")
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
    s.buffers.insert(vk::Handle::as_raw(buffer), (bits, size));
}

unsafe extern "system" fn bind_buffer_memory(
    device: vk::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkBindBufferMemory>("vkBindBufferMemory") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    {
        let mut s = seen();
        let s = &mut *s;
        let (bits, size) = s
            .buffers
            .get(&vk::Handle::as_raw(buffer))
            .copied()
            .unwrap_or((u32::MAX, 0));
        if let Some(m) = s.memories.get(&vk::Handle::as_raw(memory)) {
            let ty = m.ty;
            if offset.saturating_add(size) > m.size {
                // Bound past its memory, the device would write past the
                // allocation: refused, so that the process lives to say so.
                s.findings.push(format!(
                    "vkBindBufferMemory: a buffer of {size} bytes bound at offset {offset} of a {}-byte allocation (past its end; the Vulkan spec forbids it, and lavapipe writes past the allocation)",
                    m.size
                ));
                return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
            }
            if bits & (1 << ty) == 0 {
                s.findings.push(format!(
                    "vkBindBufferMemory: a buffer bound to memory type {ty}, outside its memoryTypeBits {bits:#x}: a real driver refuses this"
                ));
            }
            if let Some(role) = s.kind.and_then(StepKind::role) {
                let (flags, heap) = match &s.table {
                    Some((t, _)) => (t.types[ty as usize].flags, t.types[ty as usize].heap),
                    None => s
                        .real_types
                        .get(ty as usize)
                        .map_or((vk::MemoryPropertyFlags::empty(), 0), |t| (t.flags, t.heap)),
                };
                if s.both_ways.contains(&vk::Handle::as_raw(buffer)) {
                    s.step_both_ways.push(s.placements.len());
                }
                s.placements.push(PlacementRecord {
                    role: role.to_string(),
                    memory_type: ty,
                    flags: property_flags_name(flags),
                    heap,
                    bytes: m.size,
                    fallbacks: s.fallbacks,
                    imported: false,
                });
            }
        }
    }
    // SAFETY: forwarded.
    unsafe { f(device, buffer, memory, offset) }
}

unsafe extern "system" fn map_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    flags: vk::MemoryMapFlags,
    out: *mut *mut c_void,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkMapMemory>("vkMapMemory") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: forwarded.
    let r = unsafe { f(device, memory, offset, size, flags, out) };
    if r == vk::Result::SUCCESS {
        let mut s = seen();
        s.mappings += 1;
        let ty = s.memories.get(&vk::Handle::as_raw(memory)).map(|m| m.ty);
        let noncoherent = match (&s.table, ty) {
            (Some((t, _)), Some(ty)) => !t.types[ty as usize]
                .flags
                .contains(vk::MemoryPropertyFlags::HOST_COHERENT),
            _ => false,
        };
        if noncoherent {
            s.noncoherent_maps += 1;
        }
    }
    r
}

unsafe extern "system" fn unmap_memory(device: vk::Device, memory: vk::DeviceMemory) {
    if let Some(f) = real::<vk::PFN_vkUnmapMemory>("vkUnmapMemory") {
        // SAFETY: forwarded.
        unsafe { f(device, memory) };
    }
    let mut s = seen();
    s.mappings = s.mappings.saturating_sub(1);
}

unsafe extern "system" fn flush_ranges(
    device: vk::Device,
    count: u32,
    ranges: *const vk::MappedMemoryRange<'_>,
) -> vk::Result {
    seen().flushes += 1;
    match real::<vk::PFN_vkFlushMappedMemoryRanges>("vkFlushMappedMemoryRanges") {
        // SAFETY: forwarded.
        Some(f) => unsafe { f(device, count, ranges) },
        None => vk::Result::ERROR_INITIALIZATION_FAILED,
    }
}

unsafe extern "system" fn invalidate_ranges(
    device: vk::Device,
    count: u32,
    ranges: *const vk::MappedMemoryRange<'_>,
) -> vk::Result {
    seen().invalidates += 1;
    match real::<vk::PFN_vkInvalidateMappedMemoryRanges>("vkInvalidateMappedMemoryRanges") {
        // SAFETY: forwarded.
        Some(f) => unsafe { f(device, count, ranges) },
        None => vk::Result::ERROR_INITIALIZATION_FAILED,
    }
}

unsafe extern "system" fn cmd_copy_buffer(
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
        s.step_copies += 1;
        s.step_bytes += r.iter().map(|c| c.size).sum::<u64>();
        // A region past the end of either buffer would have the device write
        // or read outside it: dropped, so that the process lives to say so.
        // Under the validation layer the layer says so instead.
        let size = |b: vk::Buffer| s.buffer_sizes.get(&vk::Handle::as_raw(b)).copied();
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
        if let Some(finding) = past.filter(|_| !s.validation) {
            s.findings.push(finding);
            return;
        }
    }
    if let Some(f) = real::<vk::PFN_vkCmdCopyBuffer>("vkCmdCopyBuffer") {
        // SAFETY: forwarded.
        unsafe { f(cmd, src, dst, count, regions) };
    }
}

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Where the layer's messages go: the case's list.
unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data for the call.
    let Some(d) = (unsafe { data.as_ref() }) else {
        return vk::FALSE;
    };
    let text = if d.p_message.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated message.
        unsafe { CStr::from_ptr(d.p_message) }
            .to_string_lossy()
            .into_owned()
    };
    let id: &[u8] = if d.p_message_id_name.is_null() {
        b""
    } else {
        // SAFETY: a NUL-terminated name.
        unsafe { CStr::from_ptr(d.p_message_id_name) }.to_bytes()
    };
    if is_validation_finding(id, &text) {
        seen().messages.push(format!("{severity:?}: {text}"));
    }
    vk::FALSE
}

fn messenger_info<'a>() -> vk::DebugUtilsMessengerCreateInfoEXT<'a> {
    vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE
                | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL,
        )
        .pfn_user_callback(Some(on_message))
}

/// Halide's device, made with vkcopy's layer gate held exclusive, as vkcopy
/// makes its own: no call of another thread's context runs meanwhile.
unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    info: *const vk::DeviceCreateInfo<'_>,
    callbacks: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Device,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkCreateDevice>("vkCreateDevice") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let _lifecycle = vkcopy::layer_gate::creating();
    // SAFETY: forwarded as Halide called it.
    let r = unsafe { f(pd, info, callbacks, out) };
    if r == vk::Result::SUCCESS {
        seen().devices += 1;
    }
    r
}

unsafe extern "system" fn destroy_device(
    device: vk::Device,
    callbacks: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(f) = real::<vk::PFN_vkDestroyDevice>("vkDestroyDevice") {
        let _lifecycle = vkcopy::layer_gate::creating();
        // SAFETY: forwarded as Halide called it.
        unsafe { f(device, callbacks) };
        let mut s = seen();
        s.devices = s.devices.saturating_sub(1);
    }
}

/// Halide's instance, with the validation layer (synchronization validation
/// on) and a messenger when the case runs under it, as vkcopy's contexts do.
unsafe extern "system" fn create_instance(
    info: *const vk::InstanceCreateInfo<'_>,
    callbacks: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Instance,
) -> vk::Result {
    let Some(l) = loader() else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let _lifecycle = vkcopy::layer_gate::creating();
    // SAFETY: the loader's own entry point, looked up by name.
    let Some(f) = (unsafe { (l.gipa)(vk::Instance::null(), c"vkCreateInstance".as_ptr()) }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the entry point of that name has this type.
    let create: vk::PFN_vkCreateInstance = unsafe { std::mem::transmute(f) };
    if !seen().validation {
        // SAFETY: forwarded as Halide called it.
        return unsafe { create(info, callbacks, out) };
    }
    // SAFETY: Halide's create info, valid for the call.
    let mut local = unsafe { *info };
    // SAFETY: arrays of `count` names, as the create info says.
    let names = |p: *const *const c_char, n: u32| -> Vec<*const c_char> {
        if p.is_null() {
            Vec::new()
        } else {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec()
        }
    };
    let mut layers = names(local.pp_enabled_layer_names, local.enabled_layer_count);
    if !layers
        .iter()
        // SAFETY: each name is NUL-terminated.
        .any(|n| unsafe { CStr::from_ptr(*n) } == VALIDATION_LAYER)
    {
        layers.push(VALIDATION_LAYER.as_ptr());
    }
    let mut extensions = names(
        local.pp_enabled_extension_names,
        local.enabled_extension_count,
    );
    let debug_utils = c"VK_EXT_debug_utils";
    if !extensions
        .iter()
        // SAFETY: each name is NUL-terminated.
        .any(|n| unsafe { CStr::from_ptr(*n) } == debug_utils)
    {
        extensions.push(debug_utils.as_ptr());
    }
    let enabled = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
    let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enabled);
    let mut messenger = messenger_info();
    features.p_next = local.p_next;
    messenger.p_next = &features as *const _ as *const c_void;
    local.p_next = &messenger as *const _ as *const c_void;
    local.enabled_layer_count = layers.len() as u32;
    local.pp_enabled_layer_names = layers.as_ptr();
    local.enabled_extension_count = extensions.len() as u32;
    local.pp_enabled_extension_names = extensions.as_ptr();
    // SAFETY: Halide's create info with the layer, the extension and two more
    // structs chained in front; all outlive the call.
    let r = unsafe { create(&local, callbacks, out) };
    if r != vk::Result::SUCCESS {
        seen().messages.push(format!(
            "the validation layer could not be enabled on Halide's instance: {r:?}"
        ));
        return r;
    }
    // SAFETY: written on success.
    let instance = unsafe { *out };
    // SAFETY: an instance entry point of the extension just enabled.
    let made = unsafe { (l.gipa)(instance, c"vkCreateDebugUtilsMessengerEXT".as_ptr()) };
    if let Some(f) = made {
        // SAFETY: the entry point of that name has this type.
        let make: vk::PFN_vkCreateDebugUtilsMessengerEXT = unsafe { std::mem::transmute(f) };
        let info = messenger_info();
        let mut m = vk::DebugUtilsMessengerEXT::null();
        // SAFETY: a messenger on the new instance, destroyed before it.
        if unsafe { make(instance, &info, std::ptr::null(), &mut m) } == vk::Result::SUCCESS {
            seen().messenger = Some((vk::Handle::as_raw(instance), m));
        }
    }
    r
}

unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    callbacks: *const vk::AllocationCallbacks<'_>,
) {
    let Some(l) = loader() else { return };
    let _lifecycle = vkcopy::layer_gate::creating();
    let mine = seen()
        .messenger
        .take_if(|(i, _)| *i == vk::Handle::as_raw(instance));
    if let Some((_, m)) = mine {
        // SAFETY: the instance's own entry point.
        if let Some(f) = unsafe { (l.gipa)(instance, c"vkDestroyDebugUtilsMessengerEXT".as_ptr()) }
        {
            // SAFETY: the entry point of that name has this type.
            let destroy: vk::PFN_vkDestroyDebugUtilsMessengerEXT =
                unsafe { std::mem::transmute(f) };
            // SAFETY: the messenger made on this instance.
            unsafe { destroy(instance, m, std::ptr::null()) };
        }
    }
    // SAFETY: the loader's entry point for this instance.
    if let Some(f) = unsafe { (l.gipa)(instance, c"vkDestroyInstance".as_ptr()) } {
        // SAFETY: the entry point of that name has this type.
        let destroy: vk::PFN_vkDestroyInstance = unsafe { std::mem::transmute(f) };
        // SAFETY: forwarded as Halide called it.
        unsafe { destroy(instance, callbacks) };
    }
}
