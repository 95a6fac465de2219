//! Physical devices: which one to open, what it offers (limits, optional
//! features and extensions), and its memory table.

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::memory::table::{DeviceType, MemoryHeap, MemoryTable, MemoryType};
use crate::vk::instance::{c_name, version_string, Instance};

/// Which device types a [`DeviceSelector::Type`] accepts: the meanings of Halide's
/// `HL_VK_DEVICE_TYPE`. Unlike Halide (which matches with `strstr`, so
/// "discrete-gpu" also matches integrated GPUs), each value matches exactly its
/// type; `gpu` matches integrated or discrete GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceTypeFilter {
    /// Exactly this type.
    Is(DeviceType),
    /// An integrated or discrete GPU.
    Gpu,
}

impl DeviceTypeFilter {
    /// Parses a [`DeviceType`] name (`cpu`, `integrated-gpu`, `discrete-gpu`,
    /// `virtual-gpu`, `other`, any case) or `gpu`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        if s == "gpu" {
            return Some(Self::Gpu);
        }
        s.parse().ok().map(Self::Is)
    }

    /// Whether a device of type `t` passes.
    pub fn matches(self, t: DeviceType) -> bool {
        match self {
            Self::Is(want) => t == want,
            Self::Gpu => matches!(t, DeviceType::IntegratedGpu | DeviceType::DiscreteGpu),
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

/// What was found about the chosen device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// `deviceName`.
    pub name: String,
    /// `deviceType`.
    pub device_type: DeviceType,
    /// `vendorID`.
    pub vendor_id: u32,
    /// `deviceID`.
    pub device_id: u32,
    /// `VkPhysicalDeviceProperties::apiVersion`, as "major.minor.patch".
    pub api_version: String,
    /// `driverVersion`, as the driver encodes it.
    pub driver_version: u32,
    /// The driver name and info of `VkPhysicalDeviceDriverProperties` ("llvmpipe", "NVIDIA" ...).
    pub driver: String,
    /// `driverName` alone ("llvmpipe", "NVIDIA", "radv").
    pub driver_name: String,
    /// `minStorageBufferOffsetAlignment`.
    pub min_storage_buffer_offset_alignment: u64,
    /// `nonCoherentAtomSize`.
    pub non_coherent_atom_size: u64,
    /// `maxMemoryAllocationSize`.
    pub max_memory_allocation_size: u64,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    /// The queue family copies and kernels are submitted to.
    pub queue_family: u32,
    /// A queue family with transfer and neither graphics nor compute, which async
    /// copies use, when the device has one.
    pub transfer_family: Option<u32>,
    /// `maxStorageBufferRange`: the most bytes one storage-buffer binding may cover.
    pub max_storage_buffer_range: u32,
    /// `maxComputeWorkGroupCount`.
    pub max_compute_work_group_count: [u32; 3],
    /// `maxPerStageDescriptorStorageBuffers`.
    pub max_per_stage_descriptor_storage_buffers: u32,
    /// Optional features and extensions that were enabled because the device has
    /// them, by their Vulkan names: `shaderInt64`, `shaderFloat64`,
    /// `VK_EXT_external_memory_host`, `VK_EXT_memory_budget`,
    /// `VK_KHR_push_descriptor`.
    pub features: Vec<&'static str>,
}

impl DeviceInfo {
    /// Whether an optional feature or extension was enabled.
    pub fn has(&self, feature: &str) -> bool {
        self.features.contains(&feature)
    }
}

/// A physical device as listed by [`Context::list_devices`](crate::Context::list_devices).
#[derive(Clone, Debug)]
pub struct DeviceSummary {
    /// Index in `vkEnumeratePhysicalDevices`.
    pub index: usize,
    /// `deviceName`.
    pub name: String,
    /// `deviceType`.
    pub device_type: DeviceType,
    /// Its memory table.
    pub memory: MemoryTable,
}

/// The chosen physical device and what to enable on it.
pub(crate) struct Adapter {
    pub(crate) physical: vk::PhysicalDevice,
    pub(crate) info: DeviceInfo,
    pub(crate) memory: MemoryTable,
    /// Features to enable at device creation.
    pub(crate) enabled: vk::PhysicalDeviceFeatures,
    /// `minImportedHostPointerAlignment`, when host import is enabled.
    pub(crate) import_alignment: Option<u64>,
    pub(crate) memory_budget: bool,
    /// `VK_KHR_push_descriptor`: the copy kernel's bindings go in its command buffer.
    pub(crate) push_descriptor: bool,
    /// Queues of each family in use: (family, queues there, timestamps valid).
    pub(crate) families: Vec<QueueFamily>,
    /// Features of Vulkan 1.1 to 1.3 to enable at device creation.
    pub(crate) newer: NewerFeatures,
}

/// Features of Vulkan 1.1 to 1.3 that compute kernels compiled elsewhere use
/// (Halide's 8- and 16-bit types, `LocalSizeId` workgroup sizes), each on
/// where the device has it; timeline semaphores, which vkcopy needs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NewerFeatures {
    pub(crate) storage_buffer_16bit: bool,
    pub(crate) uniform_and_storage_buffer_16bit: bool,
    pub(crate) storage_buffer_8bit: bool,
    pub(crate) uniform_and_storage_buffer_8bit: bool,
    pub(crate) shader_int8: bool,
    pub(crate) shader_float16: bool,
    /// Vulkan 1.3's `maintenance4`; `None` on a device before 1.3.
    pub(crate) maintenance4: Option<bool>,
}

impl NewerFeatures {
    /// What the device has, and the names of those on, for [`DeviceInfo::features`].
    fn query(
        instance: &ash::Instance,
        physical: vk::PhysicalDevice,
        api_version: u32,
        names: &mut Vec<&'static str>,
    ) -> Self {
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
        let has_13 = api_version >= vk::API_VERSION_1_3;
        let mut features = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut v11)
            .push_next(&mut v12);
        if has_13 {
            features = features.push_next(&mut v13);
        }
        // SAFETY: Vulkan 1.2 core query with a valid pNext chain.
        unsafe { instance.get_physical_device_features2(physical, &mut features) };
        let on = |b: vk::Bool32, name: &'static str, names: &mut Vec<&'static str>| {
            let on = b == vk::TRUE;
            if on {
                names.push(name);
            }
            on
        };
        NewerFeatures {
            storage_buffer_16bit: on(
                v11.storage_buffer16_bit_access,
                "storageBuffer16BitAccess",
                names,
            ),
            uniform_and_storage_buffer_16bit: on(
                v11.uniform_and_storage_buffer16_bit_access,
                "uniformAndStorageBuffer16BitAccess",
                names,
            ),
            storage_buffer_8bit: on(
                v12.storage_buffer8_bit_access,
                "storageBuffer8BitAccess",
                names,
            ),
            uniform_and_storage_buffer_8bit: on(
                v12.uniform_and_storage_buffer8_bit_access,
                "uniformAndStorageBuffer8BitAccess",
                names,
            ),
            shader_int8: on(v12.shader_int8, "shaderInt8", names),
            shader_float16: on(v12.shader_float16, "shaderFloat16", names),
            maintenance4: has_13.then(|| on(v13.maintenance4, "maintenance4", names)),
        }
    }
}

/// A queue family the device is created with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueueFamily {
    pub(crate) index: u32,
    /// Queues to create: at most three (blocking work, async device copies and
    /// one per direction; on a transfer family, one per direction); one on
    /// the further families, for small copies.
    pub(crate) queues: u32,
    pub(crate) timestamps: bool,
}

impl Adapter {
    /// Picks the device `selector` names and reads what it offers; host import is
    /// enabled when `import_host` and the device has the extension.
    pub(crate) fn select(
        instance: &Instance,
        selector: &DeviceSelector,
        import_host: bool,
    ) -> Result<Self> {
        let raw = &instance.raw();
        // SAFETY: the instance is alive.
        let devices =
            unsafe { raw.enumerate_physical_devices() }.vk("vkEnumeratePhysicalDevices")?;
        if devices.is_empty() {
            return Err(Error::NoDevice);
        }
        let physical = devices[pick(raw, &devices, selector)?];
        Self::describe(instance, physical, import_host, None)
    }

    /// The caller's physical device, for a device it made with one queue of
    /// `family`: nothing is enabled here (the device exists), so vkcopy's
    /// optional extensions and features stay off.
    pub(crate) fn external(
        instance: &Instance,
        physical: vk::PhysicalDevice,
        family: u32,
    ) -> Result<Self> {
        let mut a = Self::describe(instance, physical, false, Some(family))?;
        a.enabled = vk::PhysicalDeviceFeatures::default();
        a.import_alignment = None;
        a.memory_budget = false;
        a.push_descriptor = false;
        a.newer = NewerFeatures::default();
        a.info.features = vec!["the caller's device (vkcopy enabled nothing)"];
        Ok(a)
    }

    /// What vkcopy needs to know of `physical`; `given` is the caller's queue
    /// family, else the first with compute and a transfer-only one.
    fn describe(
        instance: &Instance,
        physical: vk::PhysicalDevice,
        import_host: bool,
        given: Option<u32>,
    ) -> Result<Self> {
        let raw = &instance.raw();
        // SAFETY: `physical` was enumerated from this instance (or is the caller's).
        let props = unsafe { raw.get_physical_device_properties(physical) };
        // SAFETY: as above.
        let families = unsafe { raw.get_physical_device_queue_family_properties(physical) };
        let has_compute = |i: usize| {
            families
                .get(i)
                .is_some_and(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
        };
        let queue_family = match given {
            Some(f) => Some(f as usize).filter(|&f| has_compute(f)),
            None => (0..families.len()).find(|&i| has_compute(i)),
        }
        .ok_or_else(|| Error::NoMatchingDevice {
            wanted: "a queue family with compute and transfer".into(),
            available: c_name(&props.device_name),
        })? as u32;
        // A transfer-only family, preferring plain transfer over video or optical flow.
        let transfer_family = families
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                given.is_none()
                    && f.queue_count > 0
                    && f.queue_flags.contains(vk::QueueFlags::TRANSFER)
                    && !f
                        .queue_flags
                        .intersects(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE)
            })
            .min_by_key(|(_, f)| f.queue_flags.as_raw().count_ones())
            .map(|(i, _)| i as u32);
        let family = |index: u32| {
            let f = &families[index as usize];
            QueueFamily {
                index,
                queues: if given.is_some() {
                    1
                } else {
                    f.queue_count.min(3)
                },
                timestamps: f.timestamp_valid_bits > 0,
            }
        };
        let mut queue_families = vec![family(queue_family)];
        queue_families.extend(transfer_family.map(family));
        // Every further transfer-only family gets one queue: such families
        // answer a small copy microseconds apart, so copies take the fastest
        // for their path and size (`runtime/copy_queue.rs`).
        if let Some(t) = transfer_family {
            let others = (0..families.len() as u32).filter(|&i| {
                let f = &families[i as usize];
                i != t
                    && f.queue_count > 0
                    && f.queue_flags.contains(vk::QueueFlags::TRANSFER)
                    && !f
                        .queue_flags
                        .intersects(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE)
            });
            queue_families.extend(others.map(|i| QueueFamily {
                queues: 1,
                ..family(i)
            }));
        }
        if props.api_version < vk::API_VERSION_1_2 || !timeline_semaphores(raw, physical) {
            return Err(Error::NoMatchingDevice {
                wanted: "Vulkan 1.2 with timeline semaphores".into(),
                available: format!(
                    "{} (Vulkan {})",
                    c_name(&props.device_name),
                    version_string(props.api_version)
                ),
            });
        }

        let mut driver_props = vk::PhysicalDeviceDriverProperties::default();
        let mut maint3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut driver_props)
            .push_next(&mut maint3);
        // SAFETY: Vulkan 1.1 core query with a valid pNext chain.
        unsafe { raw.get_physical_device_properties2(physical, &mut props2) };
        let driver_name = c_name(&driver_props.driver_name);
        let driver = format!("{} {}", driver_name, c_name(&driver_props.driver_info))
            .trim()
            .to_owned();

        // Optional features the compute kernels use, enabled when present.
        // SAFETY: `physical` was enumerated from this instance.
        let supported = unsafe { raw.get_physical_device_features(physical) };
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
        if supported.shader_int16 == vk::TRUE {
            enabled.shader_int16 = vk::TRUE;
            features.push("shaderInt16");
        }
        let newer = NewerFeatures::query(raw, physical, props.api_version, &mut features);
        // SAFETY: `physical` was enumerated from this instance.
        let device_exts = unsafe { raw.enumerate_device_extension_properties(physical) }
            .vk("vkEnumerateDeviceExtensionProperties")?;
        let has_ext = |name: &std::ffi::CStr| {
            device_exts
                .iter()
                .any(|e| c_name(&e.extension_name).as_bytes() == name.to_bytes())
        };
        let mut import_alignment = None;
        if import_host && has_ext(ash::ext::external_memory_host::NAME) {
            let mut host_props = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
            let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut host_props);
            // SAFETY: the extension is supported; valid pNext chain.
            unsafe { raw.get_physical_device_properties2(physical, &mut props2) };
            let a = host_props.min_imported_host_pointer_alignment;
            // Host memory is page-aligned; larger alignments are not worth importing for.
            if a > 0 && a <= 65536 {
                import_alignment = Some(a);
                features.push("VK_EXT_external_memory_host");
            }
        }
        // New blocks stay within the heap budget the driver reports.
        let memory_budget = has_ext(ash::ext::memory_budget::NAME);
        if memory_budget {
            features.push("VK_EXT_memory_budget");
        }
        let push_descriptor = has_ext(ash::khr::push_descriptor::NAME);
        if push_descriptor {
            features.push("VK_KHR_push_descriptor");
        }
        let info = DeviceInfo {
            name: c_name(&props.device_name),
            device_type: props.device_type.into(),
            vendor_id: props.vendor_id,
            device_id: props.device_id,
            api_version: version_string(props.api_version),
            driver_version: props.driver_version,
            driver,
            driver_name,
            min_storage_buffer_offset_alignment: props.limits.min_storage_buffer_offset_alignment,
            non_coherent_atom_size: props.limits.non_coherent_atom_size,
            max_memory_allocation_size: maint3.max_memory_allocation_size,
            timestamp_period: props.limits.timestamp_period,
            queue_family,
            transfer_family,
            max_storage_buffer_range: props.limits.max_storage_buffer_range,
            max_compute_work_group_count: props.limits.max_compute_work_group_count,
            max_per_stage_descriptor_storage_buffers: props
                .limits
                .max_per_stage_descriptor_storage_buffers,
            features,
        };
        Ok(Adapter {
            physical,
            memory: memory_table(raw, physical, &props),
            info,
            enabled,
            import_alignment,
            memory_budget,
            push_descriptor,
            families: queue_families,
            newer,
        })
    }
}

/// Whether the device has `timelineSemaphore` (Vulkan 1.2 core).
fn timeline_semaphores(instance: &ash::Instance, physical: vk::PhysicalDevice) -> bool {
    let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut timeline);
    // SAFETY: Vulkan 1.1 core query with a valid pNext chain.
    unsafe { instance.get_physical_device_features2(physical, &mut features) };
    timeline.timeline_semaphore == vk::TRUE
}

/// Every physical device with its memory table.
pub(crate) fn list_devices() -> Result<Vec<DeviceSummary>> {
    let instance = Instance::new(false)?;
    let raw = &instance.raw();
    // SAFETY: the instance is alive.
    let devices = unsafe { raw.enumerate_physical_devices() }.vk("vkEnumeratePhysicalDevices")?;
    Ok(devices
        .iter()
        .enumerate()
        .map(|(index, &d)| {
            // SAFETY: `d` was enumerated from this instance.
            let props = unsafe { raw.get_physical_device_properties(d) };
            DeviceSummary {
                index,
                name: c_name(&props.device_name),
                device_type: props.device_type.into(),
                memory: memory_table(raw, d, &props),
            }
        })
        .collect())
}

/// The memory table of a live device, in the recorded-table form.
fn memory_table(
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
            budget: None,
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
        dedicated_from: None,
    }
}

fn pick(
    instance: &ash::Instance,
    devices: &[vk::PhysicalDevice],
    selector: &DeviceSelector,
) -> Result<usize> {
    let props: Vec<vk::PhysicalDeviceProperties> = devices
        .iter()
        // SAFETY: each handle was just enumerated from this instance.
        .map(|&d| unsafe { instance.get_physical_device_properties(d) })
        .collect();
    let type_of = |p: &vk::PhysicalDeviceProperties| DeviceType::from(p.device_type);
    let found = match selector {
        DeviceSelector::Default => {
            let first_of = |t| props.iter().position(|p| type_of(p) == t);
            first_of(DeviceType::DiscreteGpu)
                .or_else(|| first_of(DeviceType::IntegratedGpu))
                .or(Some(0))
        }
        DeviceSelector::Index(i) => (*i < props.len()).then_some(*i),
        DeviceSelector::Name(n) => {
            let n = n.to_lowercase();
            props
                .iter()
                .position(|p| c_name(&p.device_name).to_lowercase().contains(&n))
        }
        DeviceSelector::Type(t) => props.iter().position(|p| t.matches(type_of(p))),
    };
    found.ok_or_else(|| Error::NoMatchingDevice {
        wanted: match selector {
            DeviceSelector::Default => "any device".to_owned(),
            DeviceSelector::Index(i) => format!("index {i}"),
            DeviceSelector::Name(n) => format!("a name containing '{n}'"),
            DeviceSelector::Type(t) => format!("type {t:?}"),
        },
        available: props
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{i}: {} ({})", c_name(&p.device_name), type_of(p)))
            .collect::<Vec<_>>()
            .join(", "),
    })
}
