//! The function tables of a context with fault injection (feature
//! `fault-injection`): the runtime's `ash::Entry` resolves every entry point of
//! [`fault::ENTRY_POINTS`] to a wrapper that counts the call in the context's
//! plan and either returns the injected result or calls the driver's function.
//!
//! The wrappers find their context by the dispatchable handle they are called
//! with: every dispatchable object starts with a pointer to its loader dispatch
//! table, the same for an instance and its physical devices, and for a device,
//! its queues and its command buffers (the key layers use too). The calls made
//! before an instance exists (`vkCreateInstance`, the instance enumerations)
//! count in the plan of the context being created on the calling thread.

// The wrappers carry the names of the Vulkan functions they stand for.
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use ash::vk::{self, Handle};

use crate::error::Result;
use crate::fault::{self, Plan, ENTRY_POINTS};

/// The driver's functions behind the wrappers of one instance or device.
struct Hooked {
    plan: Arc<Plan>,
    real: Vec<AtomicUsize>,
    /// The driver's `vkGetDeviceProcAddr`.
    gdpa: AtomicUsize,
    /// The driver's `vkDestroyInstance` or `vkDestroyDevice`.
    destroy: AtomicUsize,
}

impl Hooked {
    fn new(plan: Arc<Plan>) -> Arc<Self> {
        Arc::new(Hooked {
            plan,
            real: ENTRY_POINTS.iter().map(|_| AtomicUsize::new(0)).collect(),
            gdpa: AtomicUsize::new(0),
            destroy: AtomicUsize::new(0),
        })
    }

    fn real(&self, i: usize) -> usize {
        self.real[i].load(Ordering::Acquire)
    }
}

/// Hooked instances and devices by dispatch key.
static REGISTRY: RwLock<Vec<(usize, Arc<Hooked>)>> = RwLock::new(Vec::new());

/// The loader's global functions (`vkCreateInstance` and the instance enumerations).
static ENTRY_REAL: [AtomicUsize; ENTRY_POINTS.len()] =
    [const { AtomicUsize::new(0) }; ENTRY_POINTS.len()];

/// The loader's `vkGetInstanceProcAddr`.
static REAL_GIPA: OnceLock<vk::PFN_vkGetInstanceProcAddr> = OnceLock::new();

thread_local! {
    /// The plan of the context being created on this thread.
    static CREATING: RefCell<Option<Arc<Plan>>> = const { RefCell::new(None) };
}

/// The loader with every entry point of [`ENTRY_POINTS`] wrapped.
pub(crate) fn entry() -> Result<&'static ash::Entry> {
    static ENTRY: OnceLock<ash::Entry> = OnceLock::new();
    let real = crate::vk::instance::load_entry()?;
    Ok(ENTRY.get_or_init(|| {
        let _ = REAL_GIPA.set(real.static_fn().get_instance_proc_addr);
        let static_fn = ash::StaticFn {
            get_instance_proc_addr,
        };
        // SAFETY: the wrapped resolver hands out the loader's functions or
        // wrappers of the same signature calling them.
        unsafe { ash::Entry::from_static_fn(static_fn) }
    }))
}

/// Runs `f` (which creates a context) with `plan` for the calls made before its
/// instance exists.
pub(crate) fn creating<T>(plan: Arc<Plan>, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CREATING.with(|c| *c.borrow_mut() = None);
        }
    }
    CREATING.with(|c| *c.borrow_mut() = Some(plan));
    let _reset = Reset;
    f()
}

/// The plan of the context being created on this thread, if any.
pub(crate) fn creating_plan() -> Option<Arc<Plan>> {
    CREATING.with(|c| c.borrow().clone())
}

/// The dispatch key of a dispatchable handle.
fn key(handle: u64) -> usize {
    if handle == 0 {
        return 0;
    }
    // SAFETY: a dispatchable handle points to an object that starts with the
    // pointer to its dispatch table (the loader-driver interface); the runtime
    // only calls with live handles.
    unsafe { *(handle as usize as *const usize) }
}

fn hooked(handle: u64) -> Option<Arc<Hooked>> {
    let k = key(handle);
    let r = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    r.iter().find(|(x, _)| *x == k).map(|(_, h)| h.clone())
}

fn register(handle: u64, h: Arc<Hooked>) {
    let k = key(handle);
    let mut r = REGISTRY.write().unwrap_or_else(|p| p.into_inner());
    r.retain(|(x, _)| *x != k);
    r.push((k, h));
}

fn unregister(handle: u64) {
    let k = key(handle);
    let mut r = REGISTRY.write().unwrap_or_else(|p| p.into_inner());
    r.retain(|(x, _)| *x != k);
}

fn void(p: usize) -> vk::PFN_vkVoidFunction {
    // SAFETY: `p` is 0 or a function pointer taken from a PFN_vkVoidFunction.
    unsafe { std::mem::transmute::<usize, vk::PFN_vkVoidFunction>(p) }
}

fn addr(p: vk::PFN_vkVoidFunction) -> usize {
    p.map_or(0, |f| f as usize)
}

/// Wrappers of functions called with a dispatchable handle first.
macro_rules! dispatched {
    ($($name:ident($first:ident: $ft:ty $(, $a:ident: $t:ty)*) $(=> $failed:block)?;)*) => {
        $(
            #[allow(non_snake_case)]
            unsafe extern "system" fn $name($first: $ft $(, $a: $t)*) -> vk::Result {
                const I: usize = fault::position(stringify!($name));
                let Some(h) = hooked($first.as_raw()) else {
                    return vk::Result::ERROR_INITIALIZATION_FAILED;
                };
                if let Some(r) = h.plan.call(I) {
                    $($failed)?
                    return r;
                }
                type Pfn = unsafe extern "system" fn($ft $(, $t)*) -> vk::Result;
                // SAFETY: the driver's function of this name, stored when this
                // wrapper was handed out for the same instance or device.
                let real = unsafe { std::mem::transmute::<usize, Pfn>(h.real(I)) };
                // SAFETY: the caller's arguments, passed on unchanged.
                unsafe { real($first $(, $a)*) }
            }
        )*

        /// The wrapper of `name` with its index in [`ENTRY_POINTS`].
        fn dispatched(name: &[u8]) -> Option<(usize, usize)> {
            $(
                if name == stringify!($name).as_bytes() {
                    type Pfn = unsafe extern "system" fn($ft $(, $t)*) -> vk::Result;
                    return Some((fault::position(stringify!($name)), $name as Pfn as usize));
                }
            )*
            None
        }
    };
}

dispatched! {
    vkEnumeratePhysicalDevices(instance: vk::Instance, count: *mut u32, devices: *mut vk::PhysicalDevice);
    vkEnumerateDeviceExtensionProperties(physical: vk::PhysicalDevice, layer: *const c_char, count: *mut u32, props: *mut vk::ExtensionProperties);
    vkCreateDebugUtilsMessengerEXT(instance: vk::Instance, info: *const vk::DebugUtilsMessengerCreateInfoEXT<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::DebugUtilsMessengerEXT);
    vkDeviceWaitIdle(device: vk::Device);
    vkAllocateMemory(device: vk::Device, info: *const vk::MemoryAllocateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::DeviceMemory);
    vkMapMemory(device: vk::Device, memory: vk::DeviceMemory, offset: vk::DeviceSize, size: vk::DeviceSize, flags: vk::MemoryMapFlags, out: *mut *mut c_void);
    vkFlushMappedMemoryRanges(device: vk::Device, count: u32, ranges: *const vk::MappedMemoryRange<'_>);
    vkInvalidateMappedMemoryRanges(device: vk::Device, count: u32, ranges: *const vk::MappedMemoryRange<'_>);
    vkBindBufferMemory(device: vk::Device, buffer: vk::Buffer, memory: vk::DeviceMemory, offset: vk::DeviceSize);
    vkCreateBuffer(device: vk::Device, info: *const vk::BufferCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::Buffer);
    vkCreateCommandPool(device: vk::Device, info: *const vk::CommandPoolCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::CommandPool);
    vkAllocateCommandBuffers(device: vk::Device, info: *const vk::CommandBufferAllocateInfo<'_>, out: *mut vk::CommandBuffer);
    vkResetCommandBuffer(cmd: vk::CommandBuffer, flags: vk::CommandBufferResetFlags);
    vkBeginCommandBuffer(cmd: vk::CommandBuffer, info: *const vk::CommandBufferBeginInfo<'_>);
    vkEndCommandBuffer(cmd: vk::CommandBuffer);
    vkQueueSubmit(queue: vk::Queue, count: u32, submits: *const vk::SubmitInfo<'_>, fence: vk::Fence);
    vkCreateSemaphore(device: vk::Device, info: *const vk::SemaphoreCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::Semaphore);
    vkWaitSemaphores(device: vk::Device, info: *const vk::SemaphoreWaitInfo<'_>, timeout: u64);
    vkGetSemaphoreCounterValue(device: vk::Device, semaphore: vk::Semaphore, out: *mut u64);
    vkCreateQueryPool(device: vk::Device, info: *const vk::QueryPoolCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::QueryPool);
    vkGetQueryPoolResults(device: vk::Device, pool: vk::QueryPool, first: u32, count: u32, size: usize, data: *mut c_void, stride: vk::DeviceSize, flags: vk::QueryResultFlags);
    vkCreateShaderModule(device: vk::Device, info: *const vk::ShaderModuleCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::ShaderModule);
    vkCreateDescriptorSetLayout(device: vk::Device, info: *const vk::DescriptorSetLayoutCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::DescriptorSetLayout);
    vkCreatePipelineLayout(device: vk::Device, info: *const vk::PipelineLayoutCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::PipelineLayout);
    vkCreateComputePipelines(device: vk::Device, cache: vk::PipelineCache, count: u32, infos: *const vk::ComputePipelineCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::Pipeline) => {
        // As a driver does: a pipeline that failed is a null handle.
        for i in 0..count as usize {
            // SAFETY: the caller's array of `count` pipelines.
            unsafe { *out.add(i) = vk::Pipeline::null() };
        }
    };
    vkCreateDescriptorPool(device: vk::Device, info: *const vk::DescriptorPoolCreateInfo<'_>, alloc: *const vk::AllocationCallbacks<'_>, out: *mut vk::DescriptorPool);
    vkAllocateDescriptorSets(device: vk::Device, info: *const vk::DescriptorSetAllocateInfo<'_>, out: *mut vk::DescriptorSet);
    vkGetMemoryHostPointerPropertiesEXT(device: vk::Device, handle: vk::ExternalMemoryHandleTypeFlags, ptr: *const c_void, out: *mut vk::MemoryHostPointerPropertiesEXT<'_>);
}

/// Counts a call made before any instance exists, in the plan of the context
/// being created; the injected result, if it fails.
fn creating_call(i: usize) -> (Option<Arc<Plan>>, Option<vk::Result>) {
    let plan = CREATING.with(|c| c.borrow().clone());
    let fail = plan.as_ref().and_then(|p| p.call(i));
    (plan, fail)
}

unsafe extern "system" fn vkCreateInstance(
    info: *const vk::InstanceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Instance,
) -> vk::Result {
    const I: usize = fault::position("vkCreateInstance");
    let (plan, fail) = creating_call(I);
    if let Some(r) = fail {
        return r;
    }
    // SAFETY: the loader's vkCreateInstance, stored when the entry was loaded.
    let real = unsafe {
        std::mem::transmute::<usize, vk::PFN_vkCreateInstance>(
            ENTRY_REAL[I].load(Ordering::Acquire),
        )
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    let r = unsafe { real(info, alloc, out) };
    if let (vk::Result::SUCCESS, Some(plan)) = (r, plan) {
        // SAFETY: on success the loader wrote the instance to `out`.
        register(unsafe { *out }.as_raw(), Hooked::new(plan));
    }
    r
}

unsafe extern "system" fn vkEnumerateInstanceLayerProperties(
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    const I: usize = fault::position("vkEnumerateInstanceLayerProperties");
    if let (_, Some(r)) = creating_call(I) {
        return r;
    }
    type Pfn = vk::PFN_vkEnumerateInstanceLayerProperties;
    // SAFETY: the loader's function of this name.
    let real = unsafe { std::mem::transmute::<usize, Pfn>(ENTRY_REAL[I].load(Ordering::Acquire)) };
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { real(count, props) }
}

unsafe extern "system" fn vkEnumerateInstanceExtensionProperties(
    layer: *const c_char,
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    const I: usize = fault::position("vkEnumerateInstanceExtensionProperties");
    if let (_, Some(r)) = creating_call(I) {
        return r;
    }
    type Pfn = vk::PFN_vkEnumerateInstanceExtensionProperties;
    // SAFETY: the loader's function of this name.
    let real = unsafe { std::mem::transmute::<usize, Pfn>(ENTRY_REAL[I].load(Ordering::Acquire)) };
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { real(layer, count, props) }
}

unsafe extern "system" fn vkDestroyInstance(
    instance: vk::Instance,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let raw = instance.as_raw();
    if let Some(h) = hooked(raw) {
        type Pfn = vk::PFN_vkDestroyInstance;
        // SAFETY: the loader's vkDestroyInstance of this instance.
        let real = unsafe { std::mem::transmute::<usize, Pfn>(h.destroy.load(Ordering::Acquire)) };
        unregister(raw);
        // SAFETY: the caller's arguments, passed on unchanged.
        unsafe { real(instance, alloc) };
    }
}

unsafe extern "system" fn vkCreateDevice(
    physical: vk::PhysicalDevice,
    info: *const vk::DeviceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Device,
) -> vk::Result {
    const I: usize = fault::position("vkCreateDevice");
    let Some(h) = hooked(physical.as_raw()) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if let Some(r) = h.plan.call(I) {
        return r;
    }
    // SAFETY: the driver's vkCreateDevice for this instance.
    let real = unsafe { std::mem::transmute::<usize, vk::PFN_vkCreateDevice>(h.real(I)) };
    // SAFETY: the caller's arguments, passed on unchanged.
    let r = unsafe { real(physical, info, alloc, out) };
    if r == vk::Result::SUCCESS {
        let d = Hooked::new(h.plan.clone());
        d.gdpa
            .store(h.gdpa.load(Ordering::Acquire), Ordering::Release);
        // SAFETY: on success the driver wrote the device to `out`.
        register(unsafe { *out }.as_raw(), d);
    }
    r
}

unsafe extern "system" fn vkDestroyDevice(
    device: vk::Device,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let raw = device.as_raw();
    if let Some(h) = hooked(raw) {
        type Pfn = vk::PFN_vkDestroyDevice;
        // SAFETY: the driver's vkDestroyDevice of this device.
        let real = unsafe { std::mem::transmute::<usize, Pfn>(h.destroy.load(Ordering::Acquire)) };
        unregister(raw);
        // SAFETY: the caller's arguments, passed on unchanged.
        unsafe { real(device, alloc) };
    }
}

unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    let h = hooked(device.as_raw())?;
    // SAFETY: the driver's vkGetDeviceProcAddr, stored when the instance was loaded.
    let gdpa = unsafe {
        std::mem::transmute::<usize, vk::PFN_vkGetDeviceProcAddr>(h.gdpa.load(Ordering::Acquire))
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    let real = unsafe { gdpa(device, name) };
    real?;
    // SAFETY: `name` is a NUL-terminated string (the caller's).
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    if name == b"vkDestroyDevice" {
        h.destroy.store(addr(real), Ordering::Release);
        type Pfn = vk::PFN_vkDestroyDevice;
        return void(vkDestroyDevice as Pfn as usize);
    }
    match dispatched(name) {
        Some((i, wrapper)) => {
            h.real[i].store(addr(real), Ordering::Release);
            void(wrapper)
        }
        None => real,
    }
}

unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    let gipa = REAL_GIPA.get()?;
    // SAFETY: the loader's vkGetInstanceProcAddr with the caller's arguments.
    let real = unsafe { gipa(instance, name) };
    real?;
    // SAFETY: `name` is a NUL-terminated string (the caller's).
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    if instance == vk::Instance::null() {
        type Create = vk::PFN_vkCreateInstance;
        type Layers = vk::PFN_vkEnumerateInstanceLayerProperties;
        type Exts = vk::PFN_vkEnumerateInstanceExtensionProperties;
        let wrapper = match name {
            b"vkCreateInstance" => vkCreateInstance as Create as usize,
            b"vkEnumerateInstanceLayerProperties" => {
                vkEnumerateInstanceLayerProperties as Layers as usize
            }
            b"vkEnumerateInstanceExtensionProperties" => {
                vkEnumerateInstanceExtensionProperties as Exts as usize
            }
            _ => return real,
        };
        let i = ENTRY_POINTS
            .iter()
            .position(|e| e.as_bytes() == name)
            .unwrap_or(0);
        ENTRY_REAL[i].store(addr(real), Ordering::Release);
        return void(wrapper);
    }
    let Some(h) = hooked(instance.as_raw()) else {
        return real;
    };
    match name {
        b"vkGetDeviceProcAddr" => {
            h.gdpa.store(addr(real), Ordering::Release);
            type Pfn = vk::PFN_vkGetDeviceProcAddr;
            void(get_device_proc_addr as Pfn as usize)
        }
        b"vkDestroyInstance" => {
            h.destroy.store(addr(real), Ordering::Release);
            type Pfn = vk::PFN_vkDestroyInstance;
            void(vkDestroyInstance as Pfn as usize)
        }
        b"vkCreateDevice" => {
            h.real[fault::position("vkCreateDevice")].store(addr(real), Ordering::Release);
            type Pfn = vk::PFN_vkCreateDevice;
            void(vkCreateDevice as Pfn as usize)
        }
        _ => match dispatched(name) {
            Some((i, wrapper)) => {
                h.real[i].store(addr(real), Ordering::Release);
                void(wrapper)
            }
            None => real,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_point_has_a_wrapper() {
        let special = [
            "vkCreateInstance",
            "vkEnumerateInstanceLayerProperties",
            "vkEnumerateInstanceExtensionProperties",
            "vkCreateDevice",
        ];
        for (i, e) in ENTRY_POINTS.iter().enumerate() {
            let found = dispatched(e.as_bytes()).map(|(j, _)| j);
            match special.contains(e) {
                true => assert_eq!(found, None, "{e}"),
                false => assert_eq!(found, Some(i), "{e}"),
            }
        }
    }
}
