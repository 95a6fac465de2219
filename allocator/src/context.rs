//! The Vulkan context: loader, instance, device, one compute+transfer queue,
//! the memory allocator and the reusable command buffer.
//!
//! Mirrors `vk_create_context` in Halide's `src/runtime/vulkan_context.h`, with
//! two changes: device selection without Halide's substring quirk (see
//! [`DeviceTypeFilter`]), and validation messages collected so that a test can
//! fail on them.

use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::import::HostImport;
use crate::memory::allocator::{Allocator, DeviceLimits};
use crate::memory::config::AllocConfig;
use crate::memory::policy::Policy;
use crate::memory::stats::Stats;
use crate::memory::table::{DeviceType, MemoryHeap, MemoryTable, MemoryType};
use crate::profile::{Direction, DirectionStats, Profile};
use crate::submit::Submitter;

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Which device types `VKCOPY_DEVICE_TYPE` accepts; the meanings of Halide's
/// `HL_VK_DEVICE_TYPE`. Unlike Halide (which matches with `strstr`, so
/// "discrete-gpu" also matches integrated GPUs), each value matches exactly
/// its type; `gpu` matches integrated or discrete GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceTypeFilter {
    Cpu,
    IntegratedGpu,
    DiscreteGpu,
    VirtualGpu,
    Gpu,
}

impl DeviceTypeFilter {
    /// Parses `cpu`, `integrated-gpu`, `discrete-gpu`, `virtual-gpu` or `gpu`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Self::Cpu,
            "integrated-gpu" => Self::IntegratedGpu,
            "discrete-gpu" => Self::DiscreteGpu,
            "virtual-gpu" => Self::VirtualGpu,
            "gpu" => Self::Gpu,
            _ => return None,
        })
    }

    fn matches(self, t: vk::PhysicalDeviceType) -> bool {
        use vk::PhysicalDeviceType as T;
        match self {
            Self::Cpu => t == T::CPU,
            Self::IntegratedGpu => t == T::INTEGRATED_GPU,
            Self::DiscreteGpu => t == T::DISCRETE_GPU,
            Self::VirtualGpu => t == T::VIRTUAL_GPU,
            Self::Gpu => t == T::INTEGRATED_GPU || t == T::DISCRETE_GPU,
        }
    }
}

/// Which physical device to open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DeviceSelector {
    /// The first discrete GPU, then integrated GPU, then any device.
    #[default]
    Default,
    /// An index into `vkEnumeratePhysicalDevices`.
    Index(usize),
    /// A case-insensitive substring of the device name.
    Name(String),
    /// The first device of this type.
    Type(DeviceTypeFilter),
}

/// How to create a [`Context`].
#[derive(Clone, Debug)]
pub struct ContextOptions {
    pub device: DeviceSelector,
    /// Enables `VK_LAYER_KHRONOS_validation` with synchronization validation.
    /// Messages are collected; see [`Context::validation_messages`].
    pub validation: bool,
    /// The memory-type selection policy.
    pub policy: Policy,
    /// Present this recorded memory table to the allocator instead of the device's.
    pub simulate_memory: Option<MemoryTable>,
    /// Copy large buffers straight to and from the user's host memory when the
    /// device has `VK_EXT_external_memory_host` (`VKCOPY_IMPORT_HOST=0` turns it off).
    pub import_host: bool,
    /// Block sizes and pool limits; None reads `VKCOPY_ALLOC_CONFIG` (or the defaults).
    pub alloc_config: Option<AllocConfig>,
    /// Reintroduces known Halide runtime bugs, so that tests can prove the suite
    /// catches each of them. All off by default.
    pub emulate: Emulate,
}

/// Known bugs of Halide's Vulkan runtime (reference: Halide `src/runtime/vulkan*.h`,
/// `device_buffer_utils.h` at abbf7ff), each of which vkcopy fixes. Switching one on
/// brings the bug back; the cases in `cases/regressions/` must then fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Emulate {
    /// A crop of a crop is offset from the owner, not from its parent crop
    /// (`create_crop` in `vulkan_memory.h`).
    pub crop_offset_from_owner: bool,
    /// Staging is written in the destination's layout and read in the source's
    /// (`halide_vulkan_buffer_copy`).
    pub staging_layout_mismatch: bool,
    /// A copy covers `min(extent)` from the later min instead of the intersection
    /// of the boxes (`make_buffer_copy` in `device_buffer_utils.h`).
    pub min_extent_copy: bool,
    /// A region's use count starts at 0, so releasing the owner frees memory that a
    /// crop still uses (Halide #9237).
    pub use_count_zero: bool,
    /// Never flush or invalidate non-coherent mappings (Halide relies on coherence).
    pub no_flush_invalidate: bool,
}

impl Emulate {
    /// Parses a comma-separated list of the field names, as `VKCOPY_EMULATE` takes.
    pub fn parse(s: &str) -> std::result::Result<Emulate, String> {
        let mut e = Emulate::default();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "crop_offset_from_owner" => e.crop_offset_from_owner = true,
                "staging_layout_mismatch" => e.staging_layout_mismatch = true,
                "min_extent_copy" => e.min_extent_copy = true,
                "use_count_zero" => e.use_count_zero = true,
                "no_flush_invalidate" => e.no_flush_invalidate = true,
                _ => {
                    return Err(format!(
                        "unknown bug '{name}'; expected crop_offset_from_owner, staging_layout_mismatch, min_extent_copy, use_count_zero or no_flush_invalidate"
                    ))
                }
            }
        }
        Ok(e)
    }
}

impl Default for ContextOptions {
    /// The default device, no validation, the vkcopy policy, the device's own memory
    /// table, host import on, `VKCOPY_ALLOC_CONFIG` or default blocks, no emulated bugs.
    fn default() -> Self {
        ContextOptions {
            device: DeviceSelector::Default,
            validation: false,
            policy: Policy::default(),
            simulate_memory: None,
            import_host: true,
            alloc_config: None,
            emulate: Emulate::default(),
        }
    }
}

impl ContextOptions {
    /// Reads `VKCOPY_DEVICE` (index or name substring), `VKCOPY_DEVICE_TYPE`,
    /// `VKCOPY_VALIDATION` (1/0) and `VKCOPY_POLICY`.
    pub fn from_env() -> Result<Self> {
        let mut options = ContextOptions::default();
        if let Ok(v) = std::env::var("VKCOPY_DEVICE") {
            if !v.trim().is_empty() {
                options.device = match v.trim().parse::<usize>() {
                    Ok(i) => DeviceSelector::Index(i),
                    Err(_) => DeviceSelector::Name(v.trim().to_owned()),
                };
            }
        } else if let Ok(v) = std::env::var("VKCOPY_DEVICE_TYPE") {
            if !v.trim().is_empty() {
                let t = DeviceTypeFilter::parse(&v).ok_or_else(|| Error::BadSetting {
                    name: "VKCOPY_DEVICE_TYPE",
                    value: v.clone(),
                    reason: "expected cpu, integrated-gpu, discrete-gpu, virtual-gpu or gpu".into(),
                })?;
                options.device = DeviceSelector::Type(t);
            }
        }
        if let Ok(v) = std::env::var("VKCOPY_VALIDATION") {
            options.validation = match v.trim() {
                "" | "0" | "false" | "no" | "off" => false,
                "1" | "true" | "yes" | "on" => true,
                _ => {
                    return Err(Error::BadSetting {
                        name: "VKCOPY_VALIDATION",
                        value: v,
                        reason: "expected 1 or 0".into(),
                    })
                }
            };
        }
        if let Ok(v) = std::env::var("VKCOPY_SIMULATE_MEMORY") {
            if !v.trim().is_empty() {
                let table = MemoryTable::from_yaml_file(std::path::Path::new(v.trim()))?;
                options.simulate_memory = Some(table);
            }
        }
        if let Ok(v) = std::env::var("VKCOPY_IMPORT_HOST") {
            options.import_host = match v.trim() {
                "0" | "false" | "no" | "off" => false,
                "" | "1" | "true" | "yes" | "on" => true,
                _ => {
                    return Err(Error::BadSetting {
                        name: "VKCOPY_IMPORT_HOST",
                        value: v,
                        reason: "expected 1 or 0".into(),
                    })
                }
            };
        }
        if let Ok(v) = std::env::var("VKCOPY_EMULATE") {
            options.emulate = Emulate::parse(&v).map_err(|reason| Error::BadSetting {
                name: "VKCOPY_EMULATE",
                value: v.clone(),
                reason,
            })?;
        }
        if let Ok(v) = std::env::var("VKCOPY_POLICY") {
            if !v.trim().is_empty() {
                options.policy = v.trim().parse().map_err(|_| Error::BadSetting {
                    name: "VKCOPY_POLICY",
                    value: v.clone(),
                    reason: "expected vkcopy, halide or halide-legacy".into(),
                })?;
            }
        }
        Ok(options)
    }
}

/// What was found about the chosen device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    pub device_type: DeviceType,
    pub vendor_id: u32,
    pub device_id: u32,
    /// `VkPhysicalDeviceProperties::apiVersion`, as "major.minor.patch".
    pub api_version: String,
    pub driver_version: u32,
    /// The driver name and info of `VkPhysicalDeviceDriverProperties` ("llvmpipe", "NVIDIA" ...).
    pub driver: String,
    pub min_storage_buffer_offset_alignment: u64,
    pub non_coherent_atom_size: u64,
    pub max_memory_allocation_size: u64,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    pub queue_family: u32,
    /// `maxStorageBufferRange`: the most bytes one storage-buffer binding may cover.
    pub max_storage_buffer_range: u32,
    /// `maxComputeWorkGroupCount`.
    pub max_compute_work_group_count: [u32; 3],
    /// `maxPerStageDescriptorStorageBuffers`.
    pub max_per_stage_descriptor_storage_buffers: u32,
    /// Optional device features that were enabled because the device has them, by
    /// their Vulkan names: `shaderInt64`, `shaderFloat64`. The compute kernels need
    /// them for 64-bit element types.
    pub features: Vec<&'static str>,
}

/// A physical device as listed by [`Context::list_devices`].
#[derive(Clone, Debug)]
pub struct DeviceSummary {
    pub index: usize,
    pub name: String,
    pub device_type: DeviceType,
    pub memory: MemoryTable,
}

pub(crate) struct Shared {
    pub(crate) entry: &'static ash::Entry,
    pub(crate) instance: ash::Instance,
    /// The physical device `device` was created from.
    physical: vk::PhysicalDevice,
    pub(crate) debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Owned here and handed to the messenger as its user data; outlives it.
    messages: Box<Mutex<Vec<String>>>,
    pub(crate) device: ash::Device,
    pub(crate) info: DeviceInfo,
    /// The device's own memory table.
    pub(crate) device_memory: MemoryTable,
    pub(crate) policy: Policy,
    pub(crate) emulate: Emulate,
    pub(crate) stats: Stats,
    pub(crate) profile: Profile,
    pub(crate) host_import: Option<HostImport>,
    pub(crate) allocator: Allocator,
    pub(crate) submitter: Submitter,
    /// Compiled compute kernels; destroyed before the device.
    pub(crate) kernels: crate::kernels::KernelCache,
}

/// Contexts whose device is still open, in this process.
static LIVE_CONTEXTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A Vulkan context. Cheap to clone; safe to share between threads.
#[derive(Clone)]
pub struct Context {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.shared.info.name)
            .field("policy", &self.shared.policy)
            .finish()
    }
}

/// The Vulkan loader, loaded once per process and never unloaded, with one
/// instance kept open for the process. The loader unloads the drivers when its
/// last instance is destroyed and loads them again with the next; after a few
/// dozen such cycles the NVIDIA driver fails to load ("Unable to find a Vulkan
/// driver", seen on the lab H200: a suite run makes one context per case). Halide
/// #8497 is another face of drivers unloading under a runtime.
fn load_entry() -> Result<&'static ash::Entry> {
    struct Loader {
        entry: ash::Entry,
        _keep_drivers_loaded: Option<ash::Instance>,
    }
    static LOADER: std::sync::OnceLock<std::result::Result<Loader, String>> =
        std::sync::OnceLock::new();
    LOADER
        .get_or_init(|| {
            // SAFETY: loading the system Vulkan loader runs its initialisers; the
            // Entry lives in a static, so the library stays loaded for the process.
            let entry = unsafe { ash::Entry::load() }.map_err(|e| e.to_string())?;
            let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
            let info = vk::InstanceCreateInfo::default().application_info(&app);
            // SAFETY: plain instance creation; kept for the process on purpose.
            let keep = unsafe { entry.create_instance(&info, None) }.ok();
            Ok(Loader {
                entry,
                _keep_drivers_loaded: keep,
            })
        })
        .as_ref()
        .map(|l| &l.entry)
        .map_err(|e| Error::LoaderMissing(e.clone()))
}

fn c_name(raw: &[std::ffi::c_char]) -> String {
    // SAFETY: Vulkan fills fixed-size name arrays with NUL-terminated UTF-8 strings.
    unsafe { CStr::from_ptr(raw.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn version_string(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
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
    // call; `user` is the Box<Mutex<..>> owned by Shared, which outlives the messenger.
    let (data, sink) = unsafe { (&*data, &*(user as *const Mutex<Vec<String>>)) };
    let message = if data.p_message.is_null() {
        String::from("(no message)")
    } else {
        // SAFETY: p_message is a NUL-terminated string valid during the call.
        unsafe { CStr::from_ptr(data.p_message) }
            .to_string_lossy()
            .into_owned()
    };
    if let Ok(mut v) = sink.lock() {
        v.push(format!("[{severity:?} {kind:?}] {message}"));
    }
    vk::FALSE
}

/// The memory table of a live device, in the recorded-table form.
fn device_memory_table(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    props: &vk::PhysicalDeviceProperties,
) -> MemoryTable {
    // SAFETY: `physical` was enumerated from this instance.
    let mem = unsafe { instance.get_physical_device_memory_properties(physical) };
    let heaps = mem.memory_heaps[..mem.memory_heap_count as usize]
        .iter()
        .map(|h| MemoryHeap {
            size: h.size,
            flags: h.flags,
        })
        .collect();
    let types: Vec<MemoryType> = mem.memory_types[..mem.memory_type_count as usize]
        .iter()
        .map(|t| MemoryType {
            heap: t.heap_index,
            flags: t.property_flags,
        })
        .collect();
    let all_types = if types.len() >= 32 {
        u32::MAX
    } else {
        (1u32 << types.len()) - 1
    };
    MemoryTable {
        name: c_name(&props.device_name),
        device_type: props.device_type.into(),
        non_coherent_atom_size: props.limits.non_coherent_atom_size,
        heaps,
        types,
        buffer_memory_type_bits: all_types,
    }
}

fn pick_device(
    instance: &ash::Instance,
    devices: &[vk::PhysicalDevice],
    selector: &DeviceSelector,
) -> Result<usize> {
    let props: Vec<vk::PhysicalDeviceProperties> = devices
        .iter()
        // SAFETY: each handle was just enumerated from this instance.
        .map(|&d| unsafe { instance.get_physical_device_properties(d) })
        .collect();
    let listing = || {
        props
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{i}: {} ({:?})", c_name(&p.device_name), p.device_type))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let found = match selector {
        DeviceSelector::Default => {
            let first_of = |t| props.iter().position(|p| p.device_type == t);
            first_of(vk::PhysicalDeviceType::DISCRETE_GPU)
                .or_else(|| first_of(vk::PhysicalDeviceType::INTEGRATED_GPU))
                .or(Some(0))
        }
        DeviceSelector::Index(i) => (*i < props.len()).then_some(*i),
        DeviceSelector::Name(n) => {
            let n = n.to_lowercase();
            props
                .iter()
                .position(|p| c_name(&p.device_name).to_lowercase().contains(&n))
        }
        DeviceSelector::Type(t) => props.iter().position(|p| t.matches(p.device_type)),
    };
    found.ok_or_else(|| Error::NoMatchingDevice {
        wanted: match selector {
            DeviceSelector::Default => "any device".to_owned(),
            DeviceSelector::Index(i) => format!("index {i}"),
            DeviceSelector::Name(n) => format!("a name containing '{n}'"),
            DeviceSelector::Type(t) => format!("type {t:?}"),
        },
        available: listing(),
    })
}

impl Context {
    /// Creates a context from the environment ([`ContextOptions::from_env`]).
    pub fn from_env() -> Result<Self> {
        Self::new(ContextOptions::from_env()?)
    }

    /// Lists every physical device with its memory table, for `vkcopy-suite devices`.
    pub fn list_devices() -> Result<Vec<DeviceSummary>> {
        let entry = load_entry()?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: plain instance creation with valid create info; destroyed below.
        let instance = unsafe { entry.create_instance(&info, None) }.vk("vkCreateInstance")?;
        // SAFETY: the instance is alive.
        let devices = unsafe { instance.enumerate_physical_devices() };
        let out = devices.vk("vkEnumeratePhysicalDevices").map(|devices| {
            devices
                .iter()
                .enumerate()
                .map(|(index, &d)| {
                    // SAFETY: `d` was enumerated from this instance.
                    let props = unsafe { instance.get_physical_device_properties(d) };
                    DeviceSummary {
                        index,
                        name: c_name(&props.device_name),
                        device_type: props.device_type.into(),
                        memory: device_memory_table(&instance, d, &props),
                    }
                })
                .collect()
        });
        // SAFETY: nothing created from the instance is alive.
        unsafe { instance.destroy_instance(None) };
        out
    }

    /// Opens a device as `options` say.
    pub fn new(options: ContextOptions) -> Result<Self> {
        let entry = load_entry()?;
        // SAFETY: enumeration calls with no preconditions.
        let layers = unsafe { entry.enumerate_instance_layer_properties() }
            .vk("vkEnumerateInstanceLayerProperties")?;
        let has_validation = layers
            .iter()
            .any(|l| c_name(&l.layer_name).as_bytes() == VALIDATION_LAYER.to_bytes());
        if options.validation && !has_validation {
            return Err(Error::ValidationLayerMissing);
        }
        // SAFETY: as above.
        let extensions = unsafe { entry.enumerate_instance_extension_properties(None) }
            .vk("vkEnumerateInstanceExtensionProperties")?;
        let has_debug_utils = extensions.iter().any(|e| {
            c_name(&e.extension_name).as_bytes() == ash::ext::debug_utils::NAME.to_bytes()
        });

        let messages: Box<Mutex<Vec<String>>> = Box::default();
        let mut layer_names = Vec::new();
        let mut ext_names = Vec::new();
        if options.validation {
            layer_names.push(VALIDATION_LAYER.as_ptr());
            ext_names.push(ash::ext::validation_features::NAME.as_ptr());
        }
        if has_debug_utils || options.validation {
            ext_names.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let enabled_features = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut validation_features =
            vk::ValidationFeaturesEXT::default().enabled_validation_features(&enabled_features);
        let user_data = &*messages as *const Mutex<Vec<String>> as *mut c_void;
        let messenger_info = || {
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
                .user_data(user_data)
        };
        let mut instance_messenger = messenger_info();

        let app = vk::ApplicationInfo::default()
            .application_name(c"vkcopy")
            .api_version(vk::API_VERSION_1_1);
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layer_names)
            .enabled_extension_names(&ext_names);
        if options.validation {
            info = info.push_next(&mut validation_features);
        }
        if has_debug_utils || options.validation {
            // Catches messages from instance creation and destruction too.
            info = info.push_next(&mut instance_messenger);
        }
        // SAFETY: every pointer in `info` refers to locals alive across the call.
        let instance = unsafe { entry.create_instance(&info, None) }.vk("vkCreateInstance")?;

        // From here on, a failure must destroy what was created: Partial does that.
        let mut partial = Partial {
            instance: Some(instance),
            debug: None,
        };
        let instance_ref = partial.instance.as_ref().expect("just set");
        if has_debug_utils || options.validation {
            let du = ash::ext::debug_utils::Instance::new(entry, instance_ref);
            // SAFETY: messenger_info's user data outlives the messenger (Shared owns both).
            let m = unsafe { du.create_debug_utils_messenger(&messenger_info(), None) }
                .vk("vkCreateDebugUtilsMessengerEXT")?;
            partial.debug = Some((du, m));
        }

        // SAFETY: the instance is alive.
        let devices = unsafe { instance_ref.enumerate_physical_devices() }
            .vk("vkEnumeratePhysicalDevices")?;
        if devices.is_empty() {
            return Err(Error::NoDevice);
        }
        let physical = devices[pick_device(instance_ref, &devices, &options.device)?];
        // SAFETY: `physical` was enumerated from this instance.
        let props = unsafe { instance_ref.get_physical_device_properties(physical) };
        // SAFETY: as above.
        let families =
            unsafe { instance_ref.get_physical_device_queue_family_properties(physical) };
        let queue_family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or_else(|| Error::NoMatchingDevice {
                wanted: "a queue family with compute and transfer".into(),
                available: c_name(&props.device_name),
            })? as u32;

        let mut driver_props = vk::PhysicalDeviceDriverProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver_props);
        // SAFETY: Vulkan 1.1 core query with a valid pNext chain.
        unsafe { instance_ref.get_physical_device_properties2(physical, &mut props2) };
        let driver = format!(
            "{} {}",
            c_name(&driver_props.driver_name),
            c_name(&driver_props.driver_info)
        )
        .trim()
        .to_owned();
        let mut maint3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut maint3);
        // SAFETY: as above.
        unsafe { instance_ref.get_physical_device_properties2(physical, &mut props2) };

        let priorities = [1.0f32];
        let queue_info = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(queue_family)
            .queue_priorities(&priorities)];
        // Optional features the compute kernels use, enabled when present.
        // SAFETY: `physical` was enumerated from this instance.
        let supported = unsafe { instance_ref.get_physical_device_features(physical) };
        let mut features = Vec::new();
        let mut enabled = vk::PhysicalDeviceFeatures::default();
        if supported.shader_int64 == vk::TRUE {
            enabled.shader_int64 = vk::TRUE;
            features.push("shaderInt64");
        }
        if supported.shader_float64 == vk::TRUE {
            enabled.shader_float64 = vk::TRUE;
            features.push("shaderFloat64");
        }
        // VK_EXT_external_memory_host lets copies use the user's host memory directly.
        // SAFETY: `physical` was enumerated from this instance.
        let device_exts = unsafe { instance_ref.enumerate_device_extension_properties(physical) }
            .vk("vkEnumerateDeviceExtensionProperties")?;
        let has_ext = |name: &CStr| {
            device_exts
                .iter()
                .any(|e| c_name(&e.extension_name).as_bytes() == name.to_bytes())
        };
        let import_host = options.import_host && has_ext(ash::ext::external_memory_host::NAME);
        // VK_EXT_memory_budget: new blocks stay within the heap budget the driver
        // reports (what other processes leave), moving on to the next memory type.
        let memory_budget = has_ext(ash::ext::memory_budget::NAME);
        let mut import_alignment = 0u64;
        if import_host {
            let mut host_props = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
            let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut host_props);
            // SAFETY: the extension is supported; valid pNext chain.
            unsafe { instance_ref.get_physical_device_properties2(physical, &mut props2) };
            import_alignment = host_props.min_imported_host_pointer_alignment;
            features.push("VK_EXT_external_memory_host");
        }
        let mut device_ext_names: Vec<*const std::ffi::c_char> = Vec::new();
        if import_host {
            device_ext_names.push(ash::ext::external_memory_host::NAME.as_ptr());
        }
        if memory_budget {
            device_ext_names.push(ash::ext::memory_budget::NAME.as_ptr());
            features.push("VK_EXT_memory_budget");
        }
        let device_info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_info)
            .enabled_extension_names(&device_ext_names)
            .enabled_features(&enabled);
        // SAFETY: valid create info referring to locals; destroyed in Shared::drop.
        let device = unsafe { instance_ref.create_device(physical, &device_info, None) }
            .vk("vkCreateDevice")?;
        // SAFETY: family and index exist: one queue was requested from `queue_family`.
        let queue = unsafe { device.get_device_queue(queue_family, 0) };
        let host_import =
            (import_host && import_alignment > 0 && import_alignment <= 65536).then(|| {
                HostImport::new(
                    ash::ext::external_memory_host::Device::new(instance_ref, &device),
                    import_alignment,
                )
            });

        let device_memory = device_memory_table(instance_ref, physical, &props);
        let info = DeviceInfo {
            name: c_name(&props.device_name),
            device_type: props.device_type.into(),
            vendor_id: props.vendor_id,
            device_id: props.device_id,
            api_version: version_string(props.api_version),
            driver_version: props.driver_version,
            driver,
            min_storage_buffer_offset_alignment: props.limits.min_storage_buffer_offset_alignment,
            non_coherent_atom_size: props.limits.non_coherent_atom_size,
            max_memory_allocation_size: maint3.max_memory_allocation_size,
            timestamp_period: props.limits.timestamp_period,
            queue_family,
            max_storage_buffer_range: props.limits.max_storage_buffer_range,
            max_compute_work_group_count: props.limits.max_compute_work_group_count,
            max_per_stage_descriptor_storage_buffers: props
                .limits
                .max_per_stage_descriptor_storage_buffers,
            features,
        };
        let timestamps = (families[queue_family as usize].timestamp_valid_bits > 0)
            .then_some(props.limits.timestamp_period);
        let submitter = match Submitter::new(&device, queue, queue_family, timestamps) {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: nothing was created from the device yet.
                unsafe { device.destroy_device(None) };
                return Err(e);
            }
        };
        let stats = Stats::default();
        stats.command_pool_created();
        stats.command_buffer_created();
        stats.fence_created();
        let config = match options.alloc_config {
            Some(c) => Ok(c),
            None => AllocConfig::from_env().map_err(|e| Error::BadSetting {
                name: "VKCOPY_ALLOC_CONFIG",
                value: std::env::var("VKCOPY_ALLOC_CONFIG").unwrap_or_default(),
                reason: e.to_string(),
            }),
        };
        let allocator = config.and_then(|config| {
            Allocator::new(
                &device,
                &stats,
                options.policy,
                &device_memory,
                options.simulate_memory.clone(),
                config,
                DeviceLimits {
                    min_storage_alignment: props.limits.min_storage_buffer_offset_alignment,
                    non_coherent_atom: props.limits.non_coherent_atom_size,
                    budget: memory_budget.then(|| (instance_ref.clone(), physical)),
                },
            )
        });
        let allocator = match allocator {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the device is idle; only the submitter was created from it.
                unsafe {
                    submitter.destroy(&device);
                    device.destroy_device(None);
                }
                return Err(e);
            }
        };
        let (instance, debug) = partial.take();
        LIVE_CONTEXTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Context {
            shared: Arc::new(Shared {
                entry,
                instance,
                physical,
                debug,
                messages,
                device,
                info,
                device_memory,
                policy: options.policy,
                emulate: options.emulate,
                stats,
                profile: Profile::default(),
                host_import,
                allocator,
                submitter,
                kernels: crate::kernels::KernelCache::default(),
            }),
        })
    }

    /// Contexts of this process whose device is still open: each closes when its
    /// last clone and the last device allocation made from it are dropped.
    pub fn live_contexts() -> usize {
        LIVE_CONTEXTS.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What was found about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// The device's own memory table.
    pub fn device_memory(&self) -> &MemoryTable {
        &self.shared.device_memory
    }

    /// The memory table the allocator selects from: the device's, or the simulated one.
    pub fn memory_table(&self) -> &MemoryTable {
        self.shared.allocator.table()
    }

    /// Coalesces free regions, destroys their cached buffers and frees empty blocks
    /// (Halide's `halide_vulkan_release_unused_device_allocations`). Returns the number
    /// of blocks freed.
    pub fn release_unused(&self) -> usize {
        let s = &self.shared;
        s.allocator.release_unused(&s.device, &s.stats)
    }

    /// Halide's `device_release`: frees every unused block and the kernel pipelines.
    /// Memory still held by buffers stays valid (they hold it through `Arc`s).
    pub fn device_release(&self) -> usize {
        self.release_kernels();
        self.release_unused()
    }

    /// Simulation only: takes all of simulated heap `heap` but `leave` bytes, so
    /// that "heap full" can be reproduced. Returns the bytes taken.
    pub fn fill_heap(&self, heap: u32, leave: u64) -> Result<u64> {
        self.shared.allocator.fill_heap(heap, leave)
    }

    /// The allocator's configuration.
    pub fn alloc_config(&self) -> AllocConfig {
        *self.shared.allocator.config()
    }

    /// Everything alive that is not in use: runs [`Context::release_unused`], then
    /// reports what is still alive. Empty when every buffer was dropped.
    pub fn leak_check(&self) -> crate::memory::stats::LeakReport {
        self.release_unused();
        self.shared.stats.leaks()
    }

    /// Turns GPU timestamps around copies on or off (counts are always kept).
    pub fn set_profiling(&self, on: bool) {
        self.shared.profile.set_enabled(on);
    }

    /// Whether GPU timestamps are taken around copies.
    pub fn profiling(&self) -> bool {
        self.shared.profile.enabled()
    }

    /// Copy totals of one direction so far.
    pub fn copy_stats(&self, d: Direction) -> DirectionStats {
        self.shared.profile.get(d)
    }

    /// Every counter a case can check with `expect_counters`, by name: copies and
    /// bytes per direction, and live objects.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = &self.shared.stats;
        let mut out = Vec::new();
        for d in Direction::ALL {
            let p = self.shared.profile.get(d);
            out.push((copies_name(d), p.copies));
            out.push((bytes_name(d), p.bytes));
        }
        out.extend([
            ("device_mallocs", s.regions.created()),
            ("device_frees", s.regions.destroyed()),
            ("live_regions", s.regions.live()),
            ("live_buffers", s.buffers.live()),
            ("live_device_memories", s.device_memories.live()),
            ("live_device_memory_bytes", s.device_memory_bytes()),
            ("live_mappings", s.mappings.live()),
            ("blocks", self.shared.allocator.pool_usage().0 as u64),
            ("block_bytes", self.shared.allocator.pool_usage().1),
        ]);
        out
    }

    /// The Halide bugs this context emulates.
    pub fn emulate(&self) -> Emulate {
        self.shared.emulate
    }

    /// The memory-type selection policy.
    pub fn policy(&self) -> Policy {
        self.shared.policy
    }

    /// Live and total counts of what the runtime created.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Validation-layer (and other debug-utils) messages so far, and clears them.
    pub fn take_validation_messages(&self) -> Vec<String> {
        self.shared
            .messages
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    /// Validation messages so far, without clearing them.
    pub fn validation_messages(&self) -> Vec<String> {
        self.shared
            .messages
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// The `ash` device, for tests that need to make raw Vulkan calls (for example to
    /// check that validation messages are caught). Not part of the stable API.
    #[doc(hidden)]
    pub fn raw_device(&self) -> &ash::Device {
        &self.shared.device
    }

    /// The `ash` instance the device was created from, for benchmarks and tests that
    /// drive another allocator on the same device. Not part of the stable API.
    #[doc(hidden)]
    pub fn raw_instance(&self) -> &ash::Instance {
        &self.shared.instance
    }

    /// The physical device behind [`Context::raw_device`]. Not part of the stable API.
    #[doc(hidden)]
    pub fn raw_physical_device(&self) -> vk::PhysicalDevice {
        self.shared.physical
    }

    /// Whether both contexts are the same device connection.
    pub fn same(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

fn copies_name(d: Direction) -> &'static str {
    match d {
        Direction::ToDevice => "copies_to_device",
        Direction::ToHost => "copies_to_host",
        Direction::DeviceToDevice => "copies_device_to_device",
        Direction::HostToHost => "copies_host_to_host",
    }
}

fn bytes_name(d: Direction) -> &'static str {
    match d {
        Direction::ToDevice => "bytes_to_device",
        Direction::ToHost => "bytes_to_host",
        Direction::DeviceToDevice => "bytes_device_to_device",
        Direction::HostToHost => "bytes_host_to_host",
    }
}

/// Names of [`Context::counters`], for checking cases before they run.
pub const COUNTER_NAMES: &[&str] = &[
    "copies_to_device",
    "bytes_to_device",
    "copies_to_host",
    "bytes_to_host",
    "copies_device_to_device",
    "bytes_device_to_device",
    "copies_host_to_host",
    "bytes_host_to_host",
    "device_mallocs",
    "device_frees",
    "live_regions",
    "live_buffers",
    "live_device_memories",
    "live_device_memory_bytes",
    "live_mappings",
    "blocks",
    "block_bytes",
];

/// Instance and messenger during construction: destroyed on early return.
struct Partial {
    instance: Option<ash::Instance>,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
}

impl Partial {
    fn take(
        &mut self,
    ) -> (
        ash::Instance,
        Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    ) {
        (
            self.instance.take().expect("instance present"),
            self.debug.take(),
        )
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if let Some((du, m)) = self.debug.take() {
            // SAFETY: created from this instance, not used after this point.
            unsafe { du.destroy_debug_utils_messenger(m, None) };
        }
        if let Some(instance) = self.instance.take() {
            // SAFETY: no device was kept; nothing else refers to the instance.
            unsafe { instance.destroy_instance(None) };
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: Shared is dropped when the last Context and the last device
        // allocation (which hold an Arc to it) are gone; nothing else uses the device.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.kernels.destroy(&self.device, &self.stats);
            if let Some(imp) = &self.host_import {
                imp.destroy(self);
            }
            self.allocator.destroy(&self.device, &self.stats);
            self.submitter.destroy(&self.device);
            self.stats.command_pool_destroyed();
            self.stats.command_buffer_destroyed();
            self.stats.fence_destroyed();
            self.device.destroy_device(None);
            if let Some((du, m)) = self.debug.take() {
                du.destroy_debug_utils_messenger(m, None);
            }
            self.instance.destroy_instance(None);
        }
        LIVE_CONTEXTS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let _ = &self.entry;
    }
}
