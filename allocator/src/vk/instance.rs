//! The Vulkan loader and instance: the loader is loaded once per process, the
//! validation layer is enabled on request, and debug-utils messages are
//! collected so that a test can fail on them.

use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::vk::gate::{self, Guarded};

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Where a messenger puts the validation layer's findings.
pub type Findings = Mutex<Vec<String>>;

/// Held while an instance or a device is created or destroyed: the layer gate,
/// exclusive. The loader, too, keeps the devices of all instances in lists that
/// it reads under its own lock and changes without it (Vulkan-Loader issue
/// 2018), so contexts made and dropped on several threads at once must not
/// create or destroy at the same time, layers or not.
pub(crate) fn lifecycle() -> gate::Exclusive {
    gate::creating()
}

/// Layers enabled by the environment for every instance (the loader's
/// variables; the layer gate is then held around every call).
fn layers_from_environment() -> bool {
    ["VK_INSTANCE_LAYERS", "VK_LOADER_LAYERS_ENABLE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
}

static GIVEN_LOADER: std::sync::OnceLock<vk::PFN_vkGetInstanceProcAddr> =
    std::sync::OnceLock::new();

/// Makes vkcopy resolve Vulkan through `gipa` instead of loading the system
/// loader: for a host that loads the loader itself and expects every Vulkan
/// call to go through it (Halide's runtime resolves `vkGetInstanceProcAddr`
/// with `halide_get_library_symbol`, which applications and test harnesses
/// replace). Takes effect only before the first context of the process, and
/// returns whether it did.
///
/// # Safety
/// `gipa` must behave as `vkGetInstanceProcAddr` and stay callable for the
/// rest of the process.
pub unsafe fn use_loader(gipa: vk::PFN_vkGetInstanceProcAddr) -> bool {
    GIVEN_LOADER.set(gipa).is_ok() && !LOADED.load(std::sync::atomic::Ordering::Acquire)
}

static LOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The loader, loaded once per process and never unloaded, with one instance kept
/// open for the process. The loader unloads the drivers when its last instance is
/// destroyed and loads them again with the next; some drivers stop loading after a
/// few dozen such cycles, and a suite makes one context per case.
pub(crate) fn load_entry() -> Result<&'static ash::Entry> {
    struct Loader {
        entry: ash::Entry,
        _keep_drivers_loaded: Option<ash::Instance>,
    }
    static LOADER: std::sync::OnceLock<std::result::Result<Loader, String>> =
        std::sync::OnceLock::new();
    LOADER
        .get_or_init(|| {
            LOADED.store(true, std::sync::atomic::Ordering::Release);
            let entry = match GIVEN_LOADER.get() {
                // SAFETY: `use_loader`'s caller vouched for the function.
                Some(&gipa) => unsafe {
                    ash::Entry::from_static_fn(ash::StaticFn {
                        get_instance_proc_addr: gipa,
                    })
                },
                // SAFETY: loading the system Vulkan loader runs its initialisers; the
                // Entry lives in a static, so the library stays loaded for the process.
                None => unsafe { ash::Entry::load() }.map_err(|e| e.to_string())?,
            };
            let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
            let info = vk::InstanceCreateInfo::default().application_info(&app);
            let keep = {
                let _order = lifecycle();
                // SAFETY: plain instance creation; kept for the process on purpose.
                unsafe { entry.create_instance(&info, None) }.ok()
            };
            Ok(Loader {
                entry,
                _keep_drivers_loaded: keep,
            })
        })
        .as_ref()
        .map(|l| &l.entry)
        .map_err(|e| Error::LoaderMissing(e.clone()))
}

/// A fixed-size, NUL-terminated name array of a Vulkan struct, as a string.
pub(crate) fn c_name(raw: &[std::ffi::c_char]) -> String {
    // SAFETY: Vulkan fills fixed-size name arrays with NUL-terminated UTF-8 strings.
    unsafe { CStr::from_ptr(raw.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// `major.minor.patch` of a Vulkan version number.
pub(crate) fn version_string(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

/// Whether a message of the validation layer is a finding about the calls an
/// application made: not the loader's notices (a user's `VK_INSTANCE_LAYERS`,
/// say), nor the layer's note that it cannot check a device extension the
/// application enabled (layer 1.3.239 of `VK_KHR_maintenance5` on NVIDIA's
/// driver, which Halide's runtime enables). Every runtime the suite drives
/// is held to this one rule.
pub fn is_validation_finding(id_name: &[u8], message: &str) -> bool {
    let loader = id_name == b"Loader Message";
    let coverage =
        id_name == b"VUID_Undefined" && message.contains("is not supported by this layer");
    !loader && !coverage
}

/// vkcopy's messenger: warnings and errors of every kind, and of them the
/// findings ([`is_validation_finding`]), pushed onto `sink` as
/// `[severity kind] message`.
///
/// # Safety
/// `sink` outlives every messenger made from the info.
unsafe fn messenger_into<'a>(sink: *const Findings) -> vk::DebugUtilsMessengerCreateInfoEXT<'a> {
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
        .pfn_user_callback(Some(debug_callback))
        .user_data(sink as *mut c_void)
}

/// vkcopy's messenger for instances made beside vkcopy's own (a harness's
/// of Halide's runtime), into a sink that lives for the process.
pub fn messenger_info(sink: &'static Findings) -> vk::DebugUtilsMessengerCreateInfoEXT<'static> {
    // SAFETY: the sink lives for the process.
    unsafe { messenger_into(sink) }
}

unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    kind: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    if data.is_null() || user.is_null() {
        return vk::FALSE;
    }
    // SAFETY: the loader passes a valid callback-data struct for the duration of the
    // call; `user` is the `Findings` the messenger was made with, which outlives
    // it (`messenger_into`'s contract).
    let (data, sink) = unsafe { (&*data, &*(user as *const Findings)) };
    let id: &[u8] = if data.p_message_id_name.is_null() {
        b""
    } else {
        // SAFETY: a NUL-terminated string valid during the call.
        unsafe { CStr::from_ptr(data.p_message_id_name) }.to_bytes()
    };
    let message = if data.p_message.is_null() {
        String::from("(no message)")
    } else {
        // SAFETY: p_message is a NUL-terminated string valid during the call.
        unsafe { CStr::from_ptr(data.p_message) }
            .to_string_lossy()
            .into_owned()
    };
    if !is_validation_finding(id, &message) {
        return vk::FALSE;
    }
    if let Ok(mut v) = sink.lock() {
        v.push(format!("[{severity:?} {kind:?}] {message}"));
    }
    vk::FALSE
}

/// A Vulkan instance with its debug messenger; both destroyed on drop.
pub(crate) struct Instance {
    table: ash::Instance,
    /// The validation layer is enabled.
    pub(crate) validation: bool,
    /// Layers may be in its calls (vkcopy's or the environment's, or the
    /// caller's instance): its uses hold the layer gate (`vk/gate.rs`).
    pub(crate) layered: bool,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Handed to the messenger as its user data; outlives it.
    messages: Box<Findings>,
    /// Created here, so destroyed here; false for the caller's instance.
    owned: bool,
    /// The faults of the context this instance belongs to; told the messages
    /// left at teardown.
    #[cfg(feature = "fault-injection")]
    plan: Option<std::sync::Arc<crate::fault::Plan>>,
}

impl Instance {
    /// Creates an instance (Vulkan 1.1); with `validation`, the Khronos layer with
    /// synchronization validation.
    pub(crate) fn new(validation: bool) -> Result<Self> {
        #[cfg(feature = "fault-injection")]
        let entry = crate::vk::hooks::entry(load_entry()?);
        #[cfg(not(feature = "fault-injection"))]
        let entry = load_entry()?;
        // SAFETY: enumeration calls with no preconditions.
        let layers = unsafe { entry.enumerate_instance_layer_properties() }
            .vk("vkEnumerateInstanceLayerProperties")?;
        let has_validation = layers
            .iter()
            .any(|l| c_name(&l.layer_name).as_bytes() == VALIDATION_LAYER.to_bytes());
        if validation && !has_validation {
            return Err(Error::ValidationLayerMissing);
        }
        // SAFETY: as above.
        let extensions = unsafe { entry.enumerate_instance_extension_properties(None) }
            .vk("vkEnumerateInstanceExtensionProperties")?;
        let debug_utils = validation
            || extensions.iter().any(|e| {
                c_name(&e.extension_name).as_bytes() == ash::ext::debug_utils::NAME.to_bytes()
            });

        let messages: Box<Findings> = Box::default();
        let mut layer_names = Vec::new();
        let mut ext_names = Vec::new();
        if validation {
            layer_names.push(VALIDATION_LAYER.as_ptr());
            ext_names.push(ash::ext::validation_features::NAME.as_ptr());
        }
        if debug_utils {
            ext_names.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let enabled_features = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut validation_features =
            vk::ValidationFeaturesEXT::default().enabled_validation_features(&enabled_features);
        let sink: *const Findings = &*messages;
        // SAFETY: the boxed sink is the instance's, which destroys its
        // messengers before it drops the box.
        let messenger_info = || unsafe { messenger_into(sink) };
        let mut instance_messenger = messenger_info();
        // The highest version vkcopy uses: kernels compiled for Vulkan 1.3
        // (Halide's `vk_v13`) run on devices that have it.
        let app = vk::ApplicationInfo::default()
            .application_name(c"vkcopy")
            .api_version(vk::API_VERSION_1_3);
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layer_names)
            .enabled_extension_names(&ext_names);
        if validation {
            info = info.push_next(&mut validation_features);
        }
        if debug_utils {
            // Catches messages from instance creation and destruction too.
            info = info.push_next(&mut instance_messenger);
        }
        let raw = {
            let _order = lifecycle();
            // SAFETY: every pointer in `info` refers to locals alive across the call.
            unsafe { entry.create_instance(&info, None) }.vk("vkCreateInstance")?
        };
        let mut instance = Instance {
            table: raw,
            validation,
            layered: validation || layers_from_environment(),
            debug: None,
            messages,
            owned: true,
            #[cfg(feature = "fault-injection")]
            plan: crate::vk::hooks::creating_plan(),
        };
        if debug_utils {
            let _calls = gate::shared(instance.layered);
            let du = ash::ext::debug_utils::Instance::new(entry, &instance.table);
            // SAFETY: the user data (the boxed messages) outlives the messenger: both
            // belong to `instance`, whose drop destroys the messenger first. On error
            // `instance` is dropped, which destroys the instance.
            let m = unsafe { du.create_debug_utils_messenger(&messenger_info(), None) }
                .vk("vkCreateDebugUtilsMessengerEXT")?;
            instance.debug = Some((du, m));
        }
        Ok(instance)
    }

    /// The caller's instance, which it keeps owning (and destroys after the
    /// context that uses it).
    ///
    /// # Safety
    /// `raw` is a live instance made through the loader vkcopy uses.
    pub(crate) unsafe fn borrowed(raw: vk::Instance) -> Result<Self> {
        let entry = load_entry()?;
        // Loading the functions asks the layers: as a creation.
        let _order = lifecycle();
        Ok(Instance {
            // SAFETY: the caller's promise.
            table: unsafe { ash::Instance::load(entry.static_fn(), raw) },
            validation: false,
            layered: true,
            debug: None,
            messages: Box::default(),
            owned: false,
            #[cfg(feature = "fault-injection")]
            plan: None,
        })
    }

    /// The instance's functions, the layer gate held while in use.
    pub(crate) fn raw(&self) -> Guarded<'_, ash::Instance> {
        Guarded::new(&self.table, self.layered)
    }

    /// Findings so far; with `clear`, also forgets them.
    pub(crate) fn messages(&self, clear: bool) -> Vec<String> {
        self.messages
            .lock()
            .map(|mut v| match clear {
                true => std::mem::take(&mut *v),
                false => v.clone(),
            })
            .unwrap_or_default()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every object created from the instance is gone (the device holds
        // the instance and is destroyed first); the messenger goes before it.
        unsafe {
            if let Some((du, m)) = self.debug.take() {
                let _calls = gate::shared(self.layered);
                du.destroy_debug_utils_messenger(m, None);
            }
            if self.owned {
                let _order = lifecycle();
                self.table.destroy_instance(None);
            }
        }
        #[cfg(feature = "fault-injection")]
        if let Some(plan) = &self.plan {
            plan.torn_down(self.messages(true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_validation_finding;

    #[test]
    fn findings_are_about_the_calls_not_the_loader_or_the_layers_coverage() {
        let coverage = "Validation Warning: [ VUID_Undefined ] Object 0: handle = 0x1, type = VK_OBJECT_TYPE_DEVICE; | MessageID = 0x79de34d4 | Device Extension VK_KHR_maintenance5 is not supported by this layer.  Using this extension may adversely affect validation results and/or produce undefined behavior.";
        assert!(!is_validation_finding(b"VUID_Undefined", coverage));
        assert!(!is_validation_finding(b"Loader Message", "loaded layer X"));
        assert!(is_validation_finding(
            b"VUID-vkCmdCopyBuffer-size-00115",
            "pRegions[0].size (400) is greater than the source buffer size"
        ));
        // Another message without a VUID is still a finding.
        assert!(is_validation_finding(
            b"VUID_Undefined",
            "a hazard the layer names no VUID for"
        ));
    }
}
