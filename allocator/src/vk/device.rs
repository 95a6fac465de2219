//! The logical device, shared by everything made from it: the allocator,
//! submission, host imports, pipelines and every region. Whatever holds an
//! `Arc<DeviceShared>` keeps the device open; it is destroyed with the last one,
//! after everything made from it, and the instance after it.

use std::sync::atomic::{AtomicUsize, Ordering};

use ash::vk;

use crate::emulate::Emulate;
use crate::error::{Result, VkContext};
use crate::memory::table::MemoryTable;
use crate::stats::Stats;
use crate::vk::adapter::{Adapter, DeviceInfo};
use crate::vk::instance::Instance;

/// Devices of this process that are still open.
static LIVE_DEVICES: AtomicUsize = AtomicUsize::new(0);

/// Devices of this process that are still open.
pub(crate) fn live_devices() -> usize {
    LIVE_DEVICES.load(Ordering::Relaxed)
}

pub(crate) struct DeviceShared {
    pub(crate) raw: ash::Device,
    pub(crate) physical: vk::PhysicalDevice,
    pub(crate) queue: vk::Queue,
    pub(crate) info: DeviceInfo,
    /// The device's own memory table.
    pub(crate) memory: MemoryTable,
    pub(crate) timestamps: bool,
    pub(crate) stats: Stats,
    /// Halide bugs brought back for the suite's sensitivity tests.
    pub(crate) emulate: Emulate,
    /// `VK_EXT_external_memory_host` and `minImportedHostPointerAlignment`, when enabled.
    pub(crate) host_import: Option<(ash::ext::external_memory_host::Device, u64)>,
    /// `VK_EXT_memory_budget` is enabled.
    pub(crate) memory_budget: bool,
    /// Dropped after the device.
    pub(crate) instance: Instance,
}

impl std::fmt::Debug for DeviceShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.info.name)
    }
}

impl DeviceShared {
    /// Creates the device of `adapter` with one queue of its compute family.
    pub(crate) fn new(instance: Instance, adapter: Adapter, emulate: Emulate) -> Result<Self> {
        let priorities = [1.0f32];
        let queue_info = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(adapter.info.queue_family)
            .queue_priorities(&priorities)];
        let mut extensions = Vec::new();
        if adapter.import_alignment.is_some() {
            extensions.push(ash::ext::external_memory_host::NAME.as_ptr());
        }
        if adapter.memory_budget {
            extensions.push(ash::ext::memory_budget::NAME.as_ptr());
        }
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_info)
            .enabled_extension_names(&extensions)
            .enabled_features(&adapter.enabled);
        // SAFETY: valid create info referring to locals; destroyed in drop.
        let raw = unsafe { instance.raw.create_device(adapter.physical, &info, None) }
            .vk("vkCreateDevice")?;
        // SAFETY: one queue was requested from this family.
        let queue = unsafe { raw.get_device_queue(adapter.info.queue_family, 0) };
        let host_import = adapter.import_alignment.map(|a| {
            (
                ash::ext::external_memory_host::Device::new(&instance.raw, &raw),
                a,
            )
        });
        LIVE_DEVICES.fetch_add(1, Ordering::Relaxed);
        Ok(DeviceShared {
            raw,
            physical: adapter.physical,
            queue,
            info: adapter.info,
            memory: adapter.memory,
            timestamps: adapter.timestamps,
            stats: Stats::default(),
            emulate,
            host_import,
            memory_budget: adapter.memory_budget,
            instance,
        })
    }
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        // SAFETY: this is the last reference: every object made from the device holds
        // one and is gone.
        unsafe {
            let _ = self.raw.device_wait_idle();
            self.raw.destroy_device(None);
        }
        LIVE_DEVICES.fetch_sub(1, Ordering::Relaxed);
    }
}
