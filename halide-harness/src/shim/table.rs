//! A recorded memory table presented to Halide: the device's properties,
//! memory types and extensions as the table says, each type backed by a real
//! one.

use std::ffi::{c_char, CStr};

use super::real;
use super::state::{seen, Seen};
use vkcopy_engine::rt::{vk, DeviceType};

pub(super) unsafe extern "system" fn get_physical_device_properties(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceProperties,
) {
    let Some(f) =
        real::<vk::PFN_vkGetPhysicalDeviceProperties>(pd, "vkGetPhysicalDeviceProperties")
    else {
        return;
    };
    // SAFETY: forwarded; `out` is Halide's.
    unsafe { f(pd, out) };
    // SAFETY: filled by the driver just now.
    present_type(unsafe { &mut *out });
}

pub(super) unsafe extern "system" fn get_physical_device_properties2(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    let Some(f) =
        real::<vk::PFN_vkGetPhysicalDeviceProperties2>(pd, "vkGetPhysicalDeviceProperties2")
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

pub(super) unsafe extern "system" fn enumerate_device_extensions(
    pd: vk::PhysicalDevice,
    layer: *const c_char,
    count: *mut u32,
    out: *mut vk::ExtensionProperties,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkEnumerateDeviceExtensionProperties>(
        pd,
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
    s.instance.device_type = Some(DeviceType::from(props.device_type));
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
    let real: Vec<vkcopy_engine::rt::MemoryType> = props.memory_types
        [..props.memory_type_count as usize]
        .iter()
        .map(|t| vkcopy_engine::rt::MemoryType {
            heap: t.heap_index,
            flags: t.property_flags,
        })
        .collect();
    s.real_types = real.clone();
    let Some((table, backing)) = s.table.as_mut() else {
        return;
    };
    *backing = vkcopy_engine::rt::backing_types(&real, table);
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

pub(super) unsafe extern "system" fn get_memory_properties(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceMemoryProperties,
) {
    let Some(f) = real::<vk::PFN_vkGetPhysicalDeviceMemoryProperties>(
        pd,
        "vkGetPhysicalDeviceMemoryProperties",
    ) else {
        return;
    };
    // SAFETY: forwarded; `out` is Halide's and filled by the driver.
    unsafe {
        f(pd, out);
        present(&mut *out);
    }
}

pub(super) unsafe extern "system" fn get_memory_properties2(
    pd: vk::PhysicalDevice,
    out: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
) {
    let Some(f) = real::<vk::PFN_vkGetPhysicalDeviceMemoryProperties2>(
        pd,
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
pub(super) fn backing(s: &Seen, ty: u32) -> Option<(u32, Option<u32>)> {
    match &s.table {
        Some((t, b)) => Some((*b.get(ty as usize)?, Some(t.types.get(ty as usize)?.heap))),
        None => Some((ty, None)),
    }
}
