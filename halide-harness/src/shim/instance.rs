//! Halide's instance and device: made and destroyed with vkcopy's layer gate
//! held exclusive, and with the validation layer and a messenger when the case
//! runs under it.

use std::ffi::{c_char, c_void, CStr};

use super::state::{loader, seen, FINDINGS};
use super::{real, LAYER};
use vkcopy_engine::rt::vk;

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

fn messenger_info() -> vk::DebugUtilsMessengerCreateInfoEXT<'static> {
    vkcopy::messenger_info(&FINDINGS)
}

/// Halide's device, made with vkcopy's layer gate held exclusive, as vkcopy
/// makes its own: no call of another thread's context runs meanwhile.
pub(super) unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    info: *const vk::DeviceCreateInfo<'_>,
    callbacks: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Device,
) -> vk::Result {
    let Some(f) = real::<vk::PFN_vkCreateDevice>(pd, "vkCreateDevice") else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let _lifecycle = vkcopy::layer_gate::creating();
    // SAFETY: forwarded as Halide called it.
    let r = unsafe { f(pd, info, callbacks, out) };
    if r == vk::Result::SUCCESS {
        // SAFETY: both live: the device was just written to `out`.
        unsafe { LAYER.device_made(pd, *out) };
        seen().instance.devices += 1;
    }
    r
}

pub(super) unsafe extern "system" fn destroy_device(
    device: vk::Device,
    callbacks: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(f) = real::<vk::PFN_vkDestroyDevice>(device, "vkDestroyDevice") {
        let _lifecycle = vkcopy::layer_gate::creating();
        // SAFETY: live until the call below.
        unsafe { LAYER.forget(vk::Handle::as_raw(device)) };
        // SAFETY: forwarded as Halide called it.
        unsafe { f(device, callbacks) };
        let mut s = seen();
        s.instance.devices = s.instance.devices.saturating_sub(1);
    }
}

/// Halide's instance, with the validation layer (synchronization validation
/// on) and a messenger when the case runs under it, as vkcopy's contexts do.
pub(super) unsafe extern "system" fn create_instance(
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
    if !seen().instance.validation {
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
        FINDINGS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!(
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
            seen().instance.messenger = Some((vk::Handle::as_raw(instance), m));
        }
    }
    r
}

pub(super) unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    callbacks: *const vk::AllocationCallbacks<'_>,
) {
    let Some(l) = loader() else { return };
    let _lifecycle = vkcopy::layer_gate::creating();
    let mine = seen()
        .instance
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
    // SAFETY: live until the call below.
    unsafe { LAYER.forget(vk::Handle::as_raw(instance)) };
    // SAFETY: the loader's entry point for this instance.
    if let Some(f) = unsafe { (l.gipa)(instance, c"vkDestroyInstance".as_ptr()) } {
        // SAFETY: the entry point of that name has this type.
        let destroy: vk::PFN_vkDestroyInstance = unsafe { std::mem::transmute(f) };
        // SAFETY: forwarded as Halide called it.
        unsafe { destroy(instance, callbacks) };
    }
}
