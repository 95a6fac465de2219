//! Interposition between a Vulkan user and the loader: a [`Layer`] answers
//! `vkGetInstanceProcAddr` and `vkGetDeviceProcAddr` with a wrapper in place of
//! each entry point it wraps, and keeps the driver's function behind it for the
//! wrapper to call. vkcopy's fault injection (`hooks.rs`) is one such layer,
//! over vkcopy's own calls; the suite's Halide harness puts one between
//! Halide's runtime and the loader.
//!
//! Functions are kept by the dispatch key of the handle they were resolved
//! with: every dispatchable object starts with a pointer to its loader
//! dispatch table, the same for an instance and its physical devices, and for
//! a device, its queues and its command buffers (the key layers use too). So
//! two instances or devices in one process keep their own functions. A
//! device's calls also find what was resolved through its instance (Halide's
//! runtime resolves device functions with `vkGetInstanceProcAddr`): a layer
//! that wraps `vkCreateDevice` says which instance a device came from
//! ([`Layer::device_made`]).

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::sync::{LazyLock, OnceLock, RwLock};

use ash::vk::{self, Handle};

/// The wrapper a layer hands out for an entry point, called with the handle
/// it is resolved with (0 for the global functions) and its name; None to
/// hand out the driver's own.
pub type Wraps = fn(handle: u64, name: &[u8]) -> Option<vk::PFN_vkVoidFunction>;

/// One interposition layer: which entry points it wraps, and the driver's
/// functions behind its wrappers.
pub struct Layer {
    wraps: Wraps,
    loader: OnceLock<vk::PFN_vkGetInstanceProcAddr>,
    kept: LazyLock<RwLock<Kept>>,
}

#[derive(Default)]
struct Kept {
    /// The driver's functions by dispatch key and name.
    real: HashMap<(usize, Box<[u8]>), usize>,
    /// The instance's key of each device's key.
    parent: HashMap<usize, usize>,
}

/// The dispatch key of a dispatchable handle; 0 for the null handle.
///
/// # Safety
/// `handle` is null or a live dispatchable handle made by the loader.
pub(crate) unsafe fn key(handle: u64) -> usize {
    if handle == 0 {
        return 0;
    }
    // SAFETY: a dispatchable handle points to an object that starts with the
    // pointer to its dispatch table (the loader-driver interface).
    unsafe { *(handle as usize as *const usize) }
}

/// An extension's `KHR` alias of a core function is kept under the core name,
/// so that a wrapper finds the function whichever name was resolved.
fn core_name(name: &[u8]) -> &[u8] {
    name.strip_suffix(b"KHR").unwrap_or(name)
}

impl Layer {
    /// A layer that hands out `wraps`'s wrappers.
    pub const fn new(wraps: Wraps) -> Layer {
        Layer {
            wraps,
            loader: OnceLock::new(),
            kept: LazyLock::new(Default::default),
        }
    }

    /// Puts the layer over the loader's `vkGetInstanceProcAddr`; the first
    /// call decides.
    pub fn over(&self, gipa: vk::PFN_vkGetInstanceProcAddr) {
        let _ = self.loader.set(gipa);
    }

    /// The loader's `vkGetInstanceProcAddr` under the layer.
    pub fn loader(&self) -> Option<vk::PFN_vkGetInstanceProcAddr> {
        self.loader.get().copied()
    }

    /// `vkGetInstanceProcAddr` through the layer: the loader's function, or the
    /// layer's wrapper in its place.
    ///
    /// # Safety
    /// The arguments are valid for the loader's `vkGetInstanceProcAddr`.
    pub unsafe fn instance_proc_addr(
        &self,
        instance: vk::Instance,
        name: *const c_char,
    ) -> vk::PFN_vkVoidFunction {
        let gipa = self.loader()?;
        // SAFETY: the caller's arguments, passed on unchanged.
        let real = unsafe { gipa(instance, name) };
        // SAFETY: as above: a live handle or null, and a NUL-terminated name.
        unsafe { self.resolved(instance.as_raw(), CStr::from_ptr(name), real) }
    }

    /// `vkGetDeviceProcAddr` through the layer, by the device's own
    /// `vkGetDeviceProcAddr` as resolved through it.
    ///
    /// # Safety
    /// The arguments are valid for the driver's `vkGetDeviceProcAddr`.
    pub unsafe fn device_proc_addr(
        &self,
        device: vk::Device,
        name: *const c_char,
    ) -> vk::PFN_vkVoidFunction {
        let raw = device.as_raw();
        // SAFETY: a live device.
        let gdpa: vk::PFN_vkGetDeviceProcAddr = unsafe { self.real(raw, "vkGetDeviceProcAddr") }?;
        // SAFETY: the caller's arguments, passed on unchanged.
        let real = unsafe { gdpa(device, name) };
        // SAFETY: a live device and a NUL-terminated name.
        unsafe { self.resolved(raw, CStr::from_ptr(name), real) }
    }

    /// Hands out the layer's wrapper for `name`, resolved with `handle` to
    /// `real`, and keeps `real` for it; `real` itself where the layer does not
    /// wrap it.
    ///
    /// # Safety
    /// `handle` is null or a live dispatchable handle.
    pub unsafe fn resolved(
        &self,
        handle: u64,
        name: &CStr,
        real: vk::PFN_vkVoidFunction,
    ) -> vk::PFN_vkVoidFunction {
        let f = real?;
        let name = name.to_bytes();
        let Some(wrapper) = (self.wraps)(handle, name) else {
            return Some(f);
        };
        // SAFETY: the caller's promise.
        let k = unsafe { key(handle) };
        let mut kept = self.kept.write().unwrap_or_else(|p| p.into_inner());
        kept.real.insert((k, core_name(name).into()), f as usize);
        wrapper
    }

    /// The driver's function `name` behind the wrapper called with `handle`:
    /// resolved with that handle, else with its instance (for a device's
    /// handle), else with none (the loader's exported functions, which
    /// dispatch on the handle they are called with).
    ///
    /// # Safety
    /// `handle` is null or a live dispatchable handle, and `F` is the type of
    /// the entry point `name`.
    pub unsafe fn real<F: Copy>(&self, handle: u64, name: &str) -> Option<F> {
        // SAFETY: the caller's promise.
        let k = unsafe { key(handle) };
        let name = core_name(name.as_bytes());
        let kept = self.kept.read().unwrap_or_else(|p| p.into_inner());
        let of = |k: usize| kept.real.get(&(k, name.into())).copied();
        let f = of(k)
            .or_else(|| kept.parent.get(&k).and_then(|&p| of(p)))
            .or_else(|| of(0))?;
        // SAFETY: a function pointer kept for this name, of type `F`.
        Some(unsafe { std::mem::transmute_copy::<usize, F>(&f) })
    }

    /// Says that `device` was made from `physical`, so that its calls find
    /// the functions resolved through its instance.
    ///
    /// # Safety
    /// Both are live dispatchable handles.
    pub unsafe fn device_made(&self, physical: vk::PhysicalDevice, device: vk::Device) {
        // SAFETY: the caller's promise.
        let (p, d) = unsafe { (key(physical.as_raw()), key(device.as_raw())) };
        let mut kept = self.kept.write().unwrap_or_else(|p| p.into_inner());
        kept.parent.insert(d, p);
    }

    /// Forgets what was kept for an instance or device that is about to be
    /// destroyed: a later one may get its dispatch key.
    ///
    /// # Safety
    /// `handle` is a live dispatchable handle.
    pub unsafe fn forget(&self, handle: u64) {
        // SAFETY: the caller's promise.
        let k = unsafe { key(handle) };
        let mut kept = self.kept.write().unwrap_or_else(|p| p.into_inner());
        kept.real.retain(|(x, _), _| *x != k);
        kept.parent.retain(|d, p| *d != k && *p != k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wraps(_: u64, name: &[u8]) -> Option<vk::PFN_vkVoidFunction> {
        unsafe extern "system" fn wrapper() {}
        (core_name(name) == b"vkWrapped").then_some(Some(wrapper as unsafe extern "system" fn()))
    }

    unsafe extern "system" fn driver() {}

    fn addr(f: unsafe extern "system" fn()) -> usize {
        f as *const () as usize
    }
    unsafe extern "system" fn driver_khr() {}

    /// A fake dispatchable object: its first word is its dispatch table.
    fn object(table: &usize) -> u64 {
        table as *const usize as u64
    }

    #[test]
    fn wrapped_functions_are_kept_by_key_and_found_through_the_instance() {
        let layer = Layer::new(wraps);
        let (instance_table, device_table) = (1usize, 2usize);
        let (instance, device) = (object(&instance_table), object(&device_table));
        let real: vk::PFN_vkVoidFunction = Some(driver);
        // SAFETY: the fake objects start with their tables, as the loader's do.
        unsafe {
            let handed = layer.resolved(instance, c"vkWrapped", real);
            assert_ne!(handed.map(addr), Some(addr(driver)));
            assert_eq!(
                layer.resolved(instance, c"vkOther", real).map(addr),
                Some(addr(driver))
            );
            let found = |h| layer.real::<usize>(h, "vkWrapped");
            assert_eq!(found(instance), Some(addr(driver)));
            assert_eq!(layer.real::<usize>(instance, "vkOther"), None);
            // A device finds its instance's functions once it is said to be its.
            assert_eq!(found(device), None);
            let physical = vk::PhysicalDevice::from_raw(instance);
            layer.device_made(physical, vk::Device::from_raw(device));
            assert_eq!(found(device), Some(addr(driver)));
            // The KHR alias is the core function.
            layer.resolved(instance, c"vkWrappedKHR", Some(driver_khr));
            assert_eq!(found(instance), Some(addr(driver_khr)));
            layer.forget(instance);
            assert_eq!(found(instance), None);
            assert_eq!(found(device), None);
            // What was resolved with no handle (a loader's export) serves any.
            layer.resolved(0, c"vkWrapped", real);
            assert_eq!(found(instance), Some(addr(driver)));
        }
    }
}
