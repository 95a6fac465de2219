//! The function tables of a context with fault injection (feature
//! `fault-injection`): the runtime's `ash::Entry` resolves every entry point of
//! [`fault::ENTRY_POINTS`] through an interposition layer (`interpose.rs`) to a
//! wrapper that counts the call in the context's plan and either returns the
//! injected result or calls the driver's function.
//!
//! The wrappers find their context's plan by the dispatch key of the handle
//! they are called with, as the layer finds the driver's functions. The calls
//! made before an instance exists (`vkCreateInstance`, the instance
//! enumerations) count in the plan of the context being created on the calling
//! thread.

// The wrappers carry the names of the Vulkan functions they stand for.
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, OnceLock, RwLock};

use ash::vk::{self, Handle};

use crate::fault::{self, Plan};
use crate::vk::interpose::{self, Layer};

/// The layer of every context of the process; it wraps the calls of the
/// contexts that have a plan.
static LAYER: Layer = Layer::new(wraps);

/// Hooked instances and devices by dispatch key, with their context's plan.
static REGISTRY: RwLock<Vec<(usize, Arc<Plan>)>> = RwLock::new(Vec::new());

thread_local! {
    /// The plan of the context being created on this thread.
    static CREATING: RefCell<Option<Arc<Plan>>> = const { RefCell::new(None) };
}

/// The loader `real` with every entry point of [`ENTRY_POINTS`] wrapped.
pub(crate) fn entry(real: &'static ash::Entry) -> &'static ash::Entry {
    static ENTRY: OnceLock<ash::Entry> = OnceLock::new();
    ENTRY.get_or_init(|| {
        LAYER.over(real.static_fn().get_instance_proc_addr);
        let static_fn = ash::StaticFn {
            get_instance_proc_addr,
        };
        // SAFETY: the wrapped resolver hands out the loader's functions or
        // wrappers of the same signature calling them.
        unsafe { ash::Entry::from_static_fn(static_fn) }
    })
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

/// The dispatch key of a dispatchable handle (`interpose::key`).
fn key(handle: u64) -> usize {
    // SAFETY: the runtime only calls with live handles, or null.
    unsafe { interpose::key(handle) }
}

/// The plan of the context whose instance or device `handle` is of.
fn hooked(handle: u64) -> Option<Arc<Plan>> {
    let k = key(handle);
    let r = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    r.iter().find(|(x, _)| *x == k).map(|(_, h)| h.clone())
}

fn register(handle: u64, plan: Arc<Plan>) {
    let k = key(handle);
    let mut r = REGISTRY.write().unwrap_or_else(|p| p.into_inner());
    r.retain(|(x, _)| *x != k);
    r.push((k, plan));
}

/// Forgets an instance or device about to be destroyed, here and in the layer.
fn unregister(handle: u64) {
    let k = key(handle);
    let mut r = REGISTRY.write().unwrap_or_else(|p| p.into_inner());
    r.retain(|(x, _)| *x != k);
    // SAFETY: the handle is live until the caller's destroy call.
    unsafe { LAYER.forget(handle) };
}

/// The driver's function `name` for the wrapper called with `handle`.
fn real<F: Copy>(handle: u64, name: &str) -> Option<F> {
    // SAFETY: the runtime calls with live handles; each caller names `F` as
    // the entry point's type.
    unsafe { LAYER.real(handle, name) }
}

fn void(p: usize) -> vk::PFN_vkVoidFunction {
    // SAFETY: `p` is 0 or a function pointer taken from a PFN_vkVoidFunction.
    unsafe { std::mem::transmute::<usize, vk::PFN_vkVoidFunction>(p) }
}

/// Wrappers of functions called with a dispatchable handle first.
macro_rules! dispatched {
    ($($name:ident($first:ident: $ft:ty $(, $a:ident: $t:ty)*) $(=> $failed:block)?;)*) => {
        $(
            #[allow(non_snake_case)]
            unsafe extern "system" fn $name($first: $ft $(, $a: $t)*) -> vk::Result {
                const I: usize = fault::position(stringify!($name));
                let Some(plan) = hooked($first.as_raw()) else {
                    return vk::Result::ERROR_INITIALIZATION_FAILED;
                };
                if let Some(r) = plan.call(I) {
                    $($failed)?
                    return r;
                }
                type Pfn = unsafe extern "system" fn($ft $(, $t)*) -> vk::Result;
                // The driver's function of this name, kept when this wrapper
                // was handed out for the same instance or device.
                let Some(real) = real::<Pfn>($first.as_raw(), stringify!($name)) else {
                    return vk::Result::ERROR_INITIALIZATION_FAILED;
                };
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
    let (plan, fail) = creating_call(fault::position("vkCreateInstance"));
    if let Some(r) = fail {
        return r;
    }
    let Some(real) = real::<vk::PFN_vkCreateInstance>(0, "vkCreateInstance") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    let r = unsafe { real(info, alloc, out) };
    if let (vk::Result::SUCCESS, Some(plan)) = (r, plan) {
        // SAFETY: on success the loader wrote the instance to `out`.
        register(unsafe { *out }.as_raw(), plan);
    }
    r
}

unsafe extern "system" fn vkEnumerateInstanceLayerProperties(
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    const NAME: &str = "vkEnumerateInstanceLayerProperties";
    if let (_, Some(r)) = creating_call(fault::position(NAME)) {
        return r;
    }
    let Some(real) = real::<vk::PFN_vkEnumerateInstanceLayerProperties>(0, NAME) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { real(count, props) }
}

unsafe extern "system" fn vkEnumerateInstanceExtensionProperties(
    layer: *const c_char,
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    const NAME: &str = "vkEnumerateInstanceExtensionProperties";
    if let (_, Some(r)) = creating_call(fault::position(NAME)) {
        return r;
    }
    let Some(real) = real::<vk::PFN_vkEnumerateInstanceExtensionProperties>(0, NAME) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { real(layer, count, props) }
}

unsafe extern "system" fn vkDestroyInstance(
    instance: vk::Instance,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let raw = instance.as_raw();
    if let Some(real) = real::<vk::PFN_vkDestroyInstance>(raw, "vkDestroyInstance") {
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
    let Some(plan) = hooked(physical.as_raw()) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if let Some(r) = plan.call(fault::position("vkCreateDevice")) {
        return r;
    }
    let Some(real) = real::<vk::PFN_vkCreateDevice>(physical.as_raw(), "vkCreateDevice") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    let r = unsafe { real(physical, info, alloc, out) };
    if r == vk::Result::SUCCESS {
        // SAFETY: on success the driver wrote the device to `out`.
        let device = unsafe { *out };
        // SAFETY: both are live.
        unsafe { LAYER.device_made(physical, device) };
        register(device.as_raw(), plan);
    }
    r
}

unsafe extern "system" fn vkDestroyDevice(
    device: vk::Device,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let raw = device.as_raw();
    if let Some(real) = real::<vk::PFN_vkDestroyDevice>(raw, "vkDestroyDevice") {
        unregister(raw);
        // SAFETY: the caller's arguments, passed on unchanged.
        unsafe { real(device, alloc) };
    }
}

unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: the caller's arguments, as for the driver's.
    unsafe { LAYER.device_proc_addr(device, name) }
}

unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: the caller's arguments, as for the loader's.
    unsafe { LAYER.instance_proc_addr(instance, name) }
}

/// The wrapper for `name` resolved with `handle`: the global functions always
/// (they count in the plan of the context being created), the others for the
/// instances and devices of contexts with a plan.
fn wraps(handle: u64, name: &[u8]) -> Option<vk::PFN_vkVoidFunction> {
    if handle == 0 {
        type Create = vk::PFN_vkCreateInstance;
        type Layers = vk::PFN_vkEnumerateInstanceLayerProperties;
        type Exts = vk::PFN_vkEnumerateInstanceExtensionProperties;
        return Some(void(match name {
            b"vkCreateInstance" => vkCreateInstance as Create as usize,
            b"vkEnumerateInstanceLayerProperties" => {
                vkEnumerateInstanceLayerProperties as Layers as usize
            }
            b"vkEnumerateInstanceExtensionProperties" => {
                vkEnumerateInstanceExtensionProperties as Exts as usize
            }
            _ => return None,
        }));
    }
    hooked(handle)?;
    type Gdpa = vk::PFN_vkGetDeviceProcAddr;
    type DestroyInstance = vk::PFN_vkDestroyInstance;
    type CreateDevice = vk::PFN_vkCreateDevice;
    type DestroyDevice = vk::PFN_vkDestroyDevice;
    Some(void(match name {
        b"vkGetDeviceProcAddr" => get_device_proc_addr as Gdpa as usize,
        b"vkDestroyInstance" => vkDestroyInstance as DestroyInstance as usize,
        b"vkCreateDevice" => vkCreateDevice as CreateDevice as usize,
        b"vkDestroyDevice" => vkDestroyDevice as DestroyDevice as usize,
        _ => dispatched(name)?.1,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::ENTRY_POINTS;

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
