//! The logical device, shared by everything made from it: the allocator,
//! submission, host imports, pipelines and every region. Whatever holds an
//! `Arc<DeviceShared>` keeps the device open; it is destroyed with the last one,
//! after everything made from it, and the instance after it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::memory::table::MemoryTable;
use crate::profile::StepTrace;
use crate::stats::Stats;
use crate::vk::adapter::{Adapter, DeviceInfo};
use crate::vk::gate::Guarded;
use crate::vk::instance::{lifecycle, Instance};
pub(crate) use crate::vk::queue::{Queue, QueueRole};

/// Devices of this process that are still open.
static LIVE_DEVICES: AtomicUsize = AtomicUsize::new(0);

/// Devices of this process that are still open.
pub(crate) fn live_devices() -> usize {
    LIVE_DEVICES.load(Ordering::Relaxed)
}

pub(crate) struct DeviceShared {
    table: ash::Device,
    pub(crate) physical: vk::PhysicalDevice,
    /// Queues by role: blocking work and kernels, async uploads, readbacks and
    /// device copies. Roles share a queue where the device has too few.
    queues: [Arc<Queue>; 4],
    /// Queue 0 of each transfer-only family, for small blocking copies: the
    /// transfer family's first (the async uploads' queue), then the others.
    copy_queues: Vec<Arc<Queue>>,
    /// Queue families in use: buffers are shared between them concurrently.
    pub(crate) families: Vec<u32>,
    pub(crate) info: DeviceInfo,
    /// The device's own memory table.
    pub(crate) memory: MemoryTable,
    pub(crate) stats: Stats,
    /// Where submissions spend their time, while traced.
    pub(crate) trace: StepTrace,
    /// `VK_EXT_external_memory_host` and `minImportedHostPointerAlignment`, when enabled.
    pub(crate) host_import: Option<(ash::ext::external_memory_host::Device, u64)>,
    /// `VK_EXT_memory_budget` is enabled.
    pub(crate) memory_budget: bool,
    /// `VK_KHR_push_descriptor`, when enabled.
    pub(crate) push_descriptor: Option<ash::khr::push_descriptor::Device>,
    /// The longest any wait for the device may take.
    pub(crate) timeout: Duration,
    /// How long a wait polls before it blocks.
    pub(crate) spin: Duration,
    /// `VK_ERROR_DEVICE_LOST` was returned: no further work is submitted.
    lost: AtomicBool,
    /// Waits that timed out, leaving work the runtime no longer tracks pending;
    /// and how many of them a wait for idle has covered since.
    timeouts: AtomicU64,
    settled: AtomicU64,
    /// Timeline values the host has seen reached, per submitter semaphore: later
    /// submissions on other queues wait for them, so work of one queue that the
    /// host waited for is visible to work of every other queue.
    reached: Mutex<Reached>,
    /// Buffers and pipelines destroyed, and native buffers let go: a command
    /// buffer kept for submitting again (`vk/submit.rs`) is used only while this
    /// has not moved since its recording, as a new object may take an old handle.
    retired: AtomicU64,
    /// Created here, so destroyed here; false for the caller's device.
    owned: bool,
    /// Dropped after the device.
    pub(crate) instance: Instance,
}

/// Timeline values the host saw reached, per semaphore.
#[derive(Default)]
struct Reached {
    values: Vec<(vk::Semaphore, u64)>,
    /// Semaphores forgotten so far.
    forgotten: u64,
}

impl std::fmt::Debug for DeviceShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.info.name)
    }
}

impl DeviceShared {
    /// The device's functions, the layer gate held while in use.
    pub(crate) fn raw(&self) -> Guarded<'_, ash::Device> {
        Guarded::new(&self.table, self.instance.layered)
    }

    /// Creates the device of `adapter` with up to two queues of its compute family
    /// and of its transfer family.
    pub(crate) fn new(
        instance: Instance,
        adapter: Adapter,
        timeout: Duration,
        spin: Duration,
    ) -> Result<Self> {
        let priorities = [1.0f32; 3];
        let queue_info: Vec<_> = adapter
            .families
            .iter()
            .map(|f| {
                vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(f.index)
                    .queue_priorities(&priorities[..f.queues as usize])
            })
            .collect();
        let n = adapter.newer;
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default()
            .storage_buffer16_bit_access(n.storage_buffer_16bit)
            .uniform_and_storage_buffer16_bit_access(n.uniform_and_storage_buffer_16bit);
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default()
            .timeline_semaphore(true)
            .storage_buffer8_bit_access(n.storage_buffer_8bit)
            .uniform_and_storage_buffer8_bit_access(n.uniform_and_storage_buffer_8bit)
            .shader_int8(n.shader_int8)
            .shader_float16(n.shader_float16);
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default()
            .maintenance4(n.maintenance4 == Some(true));
        let mut extensions = Vec::new();
        if adapter.import_alignment.is_some() {
            extensions.push(ash::ext::external_memory_host::NAME.as_ptr());
        }
        if adapter.memory_budget {
            extensions.push(ash::ext::memory_budget::NAME.as_ptr());
        }
        if adapter.push_descriptor {
            extensions.push(ash::khr::push_descriptor::NAME.as_ptr());
        }
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_info)
            .enabled_extension_names(&extensions)
            .enabled_features(&adapter.enabled)
            .push_next(&mut v11)
            .push_next(&mut v12);
        if n.maintenance4.is_some() {
            info = info.push_next(&mut v13);
        }
        // Creation and the lookups of its functions and queues.
        let order = lifecycle();
        // SAFETY: valid create info referring to locals; destroyed in drop.
        let raw = unsafe { instance.raw().create_device(adapter.physical, &info, None) }
            .vk("vkCreateDevice")?;
        let queues = Queue::assign(&raw, &adapter.families);
        let d = Self::assemble(instance, adapter, raw, queues, timeout, spin, true);
        drop(order);
        Ok(d)
    }

    /// The caller's device, made on `adapter`'s physical device with `queue`
    /// of its family; not destroyed when the context goes.
    ///
    /// # Safety
    /// `device` is a live device of that physical device, with Vulkan 1.2's
    /// `timelineSemaphore` enabled, that outlives this value; `queue` is one of
    /// its queues of `adapter.families[0]`.
    pub(crate) unsafe fn borrowed(
        instance: Instance,
        adapter: Adapter,
        device: vk::Device,
        queue: vk::Queue,
        timeout: Duration,
        spin: Duration,
    ) -> Self {
        // Loading the functions asks the layers: as a creation.
        let _order = lifecycle();
        // SAFETY: the caller's promise.
        let raw = unsafe { ash::Device::load(instance.raw().fp_v1_0(), device) };
        let queues = (Queue::borrowed(queue, &adapter.families[0]), Vec::new());
        Self::assemble(instance, adapter, raw, queues, timeout, spin, false)
    }

    fn assemble(
        instance: Instance,
        adapter: Adapter,
        raw: ash::Device,
        (queues, copy_queues): ([Arc<Queue>; 4], Vec<Arc<Queue>>),
        timeout: Duration,
        spin: Duration,
        owned: bool,
    ) -> Self {
        let host_import = adapter.import_alignment.map(|a| {
            (
                ash::ext::external_memory_host::Device::new(&instance.raw(), &raw),
                a,
            )
        });
        let push_descriptor = adapter
            .push_descriptor
            .then(|| ash::khr::push_descriptor::Device::new(&instance.raw(), &raw));
        LIVE_DEVICES.fetch_add(1, Ordering::Relaxed);
        DeviceShared {
            table: raw,
            physical: adapter.physical,
            queues,
            copy_queues,
            families: adapter.families.iter().map(|f| f.index).collect(),
            info: adapter.info,
            memory: adapter.memory,
            stats: Stats::default(),
            trace: StepTrace::default(),
            host_import,
            memory_budget: adapter.memory_budget,
            push_descriptor,
            timeout,
            spin,
            lost: AtomicBool::new(false),
            timeouts: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            reached: Mutex::default(),
            retired: AtomicU64::new(0),
            owned,
            instance,
        }
    }

    /// The queue work of `role` is submitted to.
    pub(crate) fn queue(&self, role: QueueRole) -> &Arc<Queue> {
        &self.queues[role as usize]
    }

    /// The queues small blocking copies may take besides the compute queue:
    /// queue 0 of each transfer-only family; none on the caller's device.
    pub(crate) fn copy_queues(&self) -> &[Arc<Queue>] {
        &self.copy_queues
    }

    /// Whether the device was lost.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// The error for `result` of `call`; a lost device is remembered.
    pub(crate) fn error(&self, call: &'static str, result: vk::Result) -> Error {
        if result == vk::Result::ERROR_DEVICE_LOST {
            self.lost.store(true, Ordering::Release);
            return Error::DeviceLost(call.to_owned());
        }
        Error::Vulkan { call, result }
    }

    /// The error for a failed wait for the device (other than a timeout): whether
    /// its work finished is unknown, so the device is treated as lost (no further
    /// work) once it is idle, so that nothing freed afterwards is still in use.
    pub(crate) fn wait_failed(&self, call: &'static str, result: vk::Result) -> Error {
        self.lost.store(true, Ordering::Release);
        // Its result does not matter: the device is refused from now on.
        let _ = self.wait_idle();
        Error::DeviceLost(format!(
            "{call} failed: {result}; the device's work is in an unknown state"
        ))
    }

    /// `vkDeviceWaitIdle` with every queue's lock held: it uses all queues, which
    /// must not be submitted to meanwhile (another thread may be submitting).
    pub(crate) fn wait_idle(&self) -> std::result::Result<(), vk::Result> {
        let all: Vec<&Arc<Queue>> = self.queues.iter().chain(&self.copy_queues).collect();
        let mut held = Vec::with_capacity(all.len());
        for (i, q) in all.iter().enumerate() {
            // Roles that share a queue share its lock: take each lock once, in order.
            if all[..i].iter().all(|p| !Arc::ptr_eq(p, q)) {
                held.push(q.lock().1);
            }
        }
        // SAFETY: waiting for idle has no preconditions; the queues are locked.
        unsafe { self.raw().device_wait_idle() }
    }

    /// Notes that a wait timed out, leaving work pending.
    pub(crate) fn timed_out(&self) {
        self.timeouts.fetch_add(1, Ordering::AcqRel);
    }

    /// Before memory or buffers are freed, or the host touches device memory:
    /// after a timed-out wait, waits for the device to be idle, as work left
    /// pending may still use them. Marked settled only once idle, so a caller
    /// meanwhile waits too; a timeout during the wait stays unsettled.
    pub(crate) fn settle(&self) {
        let t = self.timeouts.load(Ordering::Acquire);
        if self.settled.load(Ordering::Acquire) < t && self.wait_idle().is_ok() {
            self.settled.fetch_max(t, Ordering::AcqRel);
        }
    }

    /// `r`, after [`settle`](Self::settle) when it is a timeout: for work whose
    /// objects (descriptor pools) are destroyed as soon as the call returns.
    pub(crate) fn settle_on_timeout<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(Error::Timeout { .. }) = r {
            self.settle();
        }
        r
    }

    /// Fails with `device_lost` once the device was lost.
    pub(crate) fn usable(&self, what: &str) -> Result<()> {
        match self.is_lost() {
            true => Err(Error::DeviceLost(format!(
                "{what} refused: the device was lost earlier"
            ))),
            false => Ok(()),
        }
    }

    /// Notes that the host saw `semaphore` reach `value`.
    pub(crate) fn reached(&self, semaphore: vk::Semaphore, value: u64) {
        let mut r = self.reached.lock().unwrap_or_else(|p| p.into_inner());
        match r.values.iter_mut().find(|(s, _)| *s == semaphore) {
            Some(e) => e.1 = e.1.max(value),
            None => r.values.push((semaphore, value)),
        }
    }

    /// Notes that a buffer or pipeline that recorded work may name is about to go.
    pub(crate) fn retire(&self) {
        self.retired.fetch_add(1, Ordering::AcqRel);
    }

    /// How many went so far ([`DeviceShared::retire`]).
    pub(crate) fn retired(&self) -> u64 {
        self.retired.load(Ordering::Acquire)
    }

    /// Forgets a semaphore that is about to be destroyed.
    pub(crate) fn forget(&self, semaphore: vk::Semaphore) {
        let mut r = self.reached.lock().unwrap_or_else(|p| p.into_inner());
        r.values.retain(|(s, _)| *s != semaphore);
        r.forgotten += 1;
    }

    /// The values a submission with its own `semaphore` waits for: what the host
    /// saw other semaphores reach. With them, how many semaphores were forgotten
    /// so far: a later semaphore may take a forgotten one's handle.
    pub(crate) fn waits_for(&self, semaphore: vk::Semaphore) -> (Vec<(vk::Semaphore, u64)>, u64) {
        let r = self.reached.lock().unwrap_or_else(|p| p.into_inner());
        let values = r.values.iter().filter(|(s, _)| *s != semaphore).copied();
        (values.collect(), r.forgotten)
    }

    /// A buffer create info shared concurrently by the queue families in use.
    pub(crate) fn buffer_info(
        &self,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> vk::BufferCreateInfo<'_> {
        let info = vk::BufferCreateInfo::default().size(size).usage(usage);
        match self.families.len() {
            1 => info.sharing_mode(vk::SharingMode::EXCLUSIVE),
            _ => info
                .sharing_mode(vk::SharingMode::CONCURRENT)
                .queue_family_indices(&self.families),
        }
    }
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        // SAFETY: this is the last reference: every object made from the device holds
        // one and is gone.
        unsafe {
            if self.owned {
                let _ = self.raw().device_wait_idle();
                let _order = lifecycle();
                self.raw().destroy_device(None);
            } else {
                // The caller's device: only vkcopy's work on its queue is waited for.
                let (q, _held) = self.queues[0].lock();
                let _ = self.raw().queue_wait_idle(q);
            }
        }
        LIVE_DEVICES.fetch_sub(1, Ordering::Relaxed);
    }
}
