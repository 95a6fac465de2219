//! The context: a thin composition of what one device connection needs (device,
//! allocator, submission, host imports, pipelines, copy profile), created in
//! order and dropped in reverse, as Halide's `vk_create_context` /
//! `vk_destroy_context` do. Cheap to clone; safe to share between threads.

use std::sync::{Arc, OnceLock};

use ash::vk;

use crate::error::Result;
use crate::memory::config::AllocConfig;
use crate::memory::policy::Policy;
use crate::memory::table::MemoryTable;
use crate::profile::{CopyStats, Profile, SubmitSteps};
use crate::runtime::copy_choice::DeviceCopies;
use crate::runtime::copy_queue::CopyQueue;
use crate::runtime::emulate::Emulate;
use crate::runtime::mapped_choice::MappedChoices;
use crate::runtime::options::{ContextOptions, CopyModel, DeviceCopy, MappedCopy, SmallCopyQueue};
use crate::runtime::ring::Staging;
use crate::runtime::route::{self, HostRoutes, RouteCounts};
use crate::runtime::streams::Streams;
use crate::stats::{LeakReport, Stats};
use crate::types::CopyPath;
use crate::vk::adapter::{Adapter, DeviceInfo, DeviceSummary};
use crate::vk::allocator::Allocator;
use crate::vk::device::{self, DeviceShared, QueueRole};
use crate::vk::gate::Guarded;
use crate::vk::import::HostImport;
use crate::vk::instance::Instance;
use crate::vk::pipelines::PipelineCache;
use crate::vk::submitters::Submitters;

/// One device connection: the device, its allocator and queue. Cheap to clone;
/// safe to share between threads.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<Inner>,
}

/// What a context owns. Fields drop in order, after `Drop::drop` waited for the
/// device: pipelines and imports before the submitters, the allocator (kept alive
/// by regions that outlive the context) and the device last.
pub(crate) struct Inner {
    /// Async copy streams; their threads end when this is dropped.
    pub(crate) streams: Streams,
    pub(crate) pipelines: PipelineCache,
    /// Host imports, when the device has the extension and copies may use them.
    pub(crate) host_import: Option<Arc<HostImport>>,
    /// Staging chunks, reused by every copy; dropped before the submitters.
    pub(crate) staging: Staging,
    /// Submitters of blocking work (kernels and blocking copies), one per thread
    /// submitting at once.
    pub(crate) submitters: Submitters,
    /// Submitters for small copies on queues besides the compute one: the
    /// transfer family's first (else a further queue of the compute family, or
    /// the compute queue itself as submissions of their own), then one per
    /// further transfer-only family; none where small copies stay with the
    /// blocking work.
    pub(crate) copy_submitters: Vec<Submitters>,
    /// Which queue takes small copies by the GPU.
    pub(crate) copy_queue: CopyQueue,
    pub(crate) profile: Profile,
    /// How device-to-device copies are made, and what was measured to choose.
    pub(crate) device_copies: DeviceCopies,
    /// What uploads and readbacks may use.
    pub(crate) host_routes: HostRoutes,
    /// Whether uploads into host-visible device memory are written by the CPU,
    /// and what was measured to choose.
    pub(crate) mapped_uploads: MappedChoices,
    /// Whether readbacks from host-visible device memory are read by the CPU,
    /// and what was measured to choose.
    pub(crate) mapped_readbacks: MappedChoices,
    /// Copies and bytes per route.
    pub(crate) routes: RouteCounts,
    /// Whose copies the context makes.
    pub(crate) model: CopyModel,
    /// Halide bugs brought back; read by the runtime alone.
    pub(crate) emulate: Emulate,
    pub(crate) allocator: Arc<Allocator>,
    pub(crate) device: Arc<DeviceShared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.device.wait_idle();
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.device.info.name)
            .field("policy", &self.inner.allocator.policy())
            .finish()
    }
}

/// A Vulkan device the caller made, for [`Context::on_device`].
#[derive(Clone, Copy, Debug)]
pub struct ExternalDevice {
    /// The instance the device was made from.
    pub instance: vk::Instance,
    /// Its physical device.
    pub physical_device: vk::PhysicalDevice,
    /// The device.
    pub device: vk::Device,
    /// The queue every copy and kernel of the context is submitted to.
    pub queue: vk::Queue,
    /// The queue's family; it has compute.
    pub queue_family: u32,
}

impl Context {
    /// Opens a device as `options` say.
    pub fn new(options: ContextOptions) -> Result<Self> {
        #[cfg(feature = "fault-injection")]
        return crate::vk::hooks::creating(crate::fault::plan_for_new_context()?, || {
            Self::open(options)
        });
        #[cfg(not(feature = "fault-injection"))]
        Self::open(options)
    }

    /// A context on a device the caller made and keeps owning (Halide's
    /// `halide_vulkan_acquire_context` hands out such a device). vkcopy enables
    /// nothing on it: without `VK_EXT_external_memory_host` it stages every
    /// copy, and every role shares the one queue. `options.device` and
    /// `options.validation` do not apply: the caller chose both.
    ///
    /// # Safety
    /// `device` names live objects that outlive the context: a device of
    /// `physical_device`, made from `instance` through the loader vkcopy uses
    /// ([`use_loader`](crate::use_loader), else the system's), with Vulkan 1.2's
    /// `timelineSemaphore` enabled; `queue` one of its queues of `queue_family`,
    /// a family with compute. The caller submits nothing to that queue while a
    /// call of this context runs.
    pub unsafe fn on_device(device: ExternalDevice, options: ContextOptions) -> Result<Self> {
        Self::open_on(Some(device), options)
    }

    fn open(options: ContextOptions) -> Result<Self> {
        Self::open_on(None, options)
    }

    fn open_on(external: Option<ExternalDevice>, options: ContextOptions) -> Result<Self> {
        let (instance, adapter) = match external {
            Some(e) => {
                // SAFETY: `on_device`'s caller vouched for the handles.
                let instance = unsafe { Instance::borrowed(e.instance) }?;
                let adapter = Adapter::external(&instance, e.physical_device, e.queue_family)?;
                (instance, adapter)
            }
            None => {
                let instance = Instance::new(options.validation)?;
                let adapter = Adapter::select(&instance, &options.device, options.import_host)?;
                (instance, adapter)
            }
        };
        #[cfg(feature = "emulate")]
        let emulate = options.emulate;
        #[cfg(not(feature = "emulate"))]
        let emulate = Emulate;
        // On a CPU device the device is the host's own cores: a polling wait
        // would take one from it.
        let spin = match adapter.info.device_type {
            crate::memory::table::DeviceType::Cpu => std::time::Duration::ZERO,
            _ => options.spin,
        };
        let device = Arc::new(match external {
            // SAFETY: as above.
            Some(e) => unsafe {
                DeviceShared::borrowed(instance, adapter, e.device, e.queue, options.timeout, spin)
            },
            None => DeviceShared::new(instance, adapter, options.timeout, spin)?,
        });
        #[cfg(feature = "simulate")]
        let simulated = options.simulate_memory.clone();
        #[cfg(not(feature = "simulate"))]
        let simulated = None;
        let allocator = Arc::new(Allocator::new(
            device.clone(),
            options.policy,
            simulated,
            options.alloc_config,
        )?);
        let submitters = Submitters::new(&device, QueueRole::Compute)?;
        let other_queue = !Arc::ptr_eq(
            device.queue(QueueRole::Upload),
            device.queue(QueueRole::Compute),
        );
        let model = CopyModel::of(options.policy, emulate.any());
        let vkcopy = model == CopyModel::Vkcopy;
        let small_copy_queue = match options.small_copy_queue {
            _ if !vkcopy => SmallCopyQueue::Compute,
            SmallCopyQueue::Auto if !other_queue => SmallCopyQueue::Compute,
            q => q,
        };
        let mut copy_submitters = Vec::new();
        if small_copy_queue != SmallCopyQueue::Compute {
            copy_submitters.push(Submitters::new(&device, QueueRole::Upload)?);
        }
        if small_copy_queue == SmallCopyQueue::Auto {
            // The first copy queue is the upload role's.
            // A further family that cannot take one is left out.
            for q in device.copy_queues().iter().skip(1) {
                if let Ok(s) = Submitters::on_queue(&device, q.clone(), QueueRole::Upload) {
                    copy_submitters.push(s);
                }
            }
        }
        // A simulated table's placement cases model staging too.
        let import = vkcopy && !allocator.is_simulated();
        let device_copy = match options.device_copy {
            DeviceCopy::Auto if !vkcopy => DeviceCopy::Transfer,
            m => m,
        };
        let host_import = import.then(|| HostImport::new(&device)).flatten();
        let host_routes = HostRoutes {
            import: host_import.is_some(),
            // Per-copy staging where the copy models Halide's staging: a simulated
            // table's placement cases, Halide's staging layout bug.
            ring: !emulate.staging_layout_mismatch() && !allocator.is_simulated(),
            // vkcopy's own route too; a simulated table takes it where the
            // table has the memory for it.
            mapped: vkcopy
                && (options.mapped_upload != MappedCopy::Never
                    || options.mapped_readback != MappedCopy::Never)
                && allocator.maps_device_memory(),
        };
        Ok(Context {
            inner: Arc::new(Inner {
                streams: Streams::default(),
                pipelines: PipelineCache::new(&device),
                host_import,
                staging: Staging::default(),
                submitters,
                copy_submitters,
                copy_queue: CopyQueue::new(small_copy_queue),
                profile: Profile::default(),
                device_copies: DeviceCopies::new(device_copy),
                host_routes,
                mapped_uploads: MappedChoices::new(options.mapped_upload),
                mapped_readbacks: MappedChoices::new(options.mapped_readback),
                routes: RouteCounts::default(),
                model,
                emulate,
                allocator,
                device,
            }),
        })
    }

    /// Opens a device as the environment says ([`ContextOptions::from_env`]).
    pub fn from_env() -> Result<Self> {
        Self::new(ContextOptions::from_env()?)
    }

    /// Every physical device with its memory table.
    pub fn list_devices() -> Result<Vec<DeviceSummary>> {
        crate::vk::adapter::list_devices()
    }

    /// Devices of this process that are still open: each closes when its last
    /// context clone and the last device memory made from it are dropped.
    pub fn live_contexts() -> usize {
        device::live_devices()
    }

    /// What was found about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.device.info
    }

    /// The device's own memory table.
    pub fn device_memory(&self) -> &MemoryTable {
        &self.inner.device.memory
    }

    /// The memory table the allocator selects from: the device's, or the simulated one.
    pub fn memory_table(&self) -> &MemoryTable {
        self.inner.allocator.table()
    }

    /// The memory-type selection policy.
    pub fn policy(&self) -> Policy {
        self.inner.allocator.policy()
    }

    /// The allocator's configuration.
    pub fn alloc_config(&self) -> AllocConfig {
        *self.inner.allocator.config()
    }

    /// Whose copies this context makes: vkcopy's, or Halide's.
    pub fn copy_model(&self) -> CopyModel {
        self.inner.model
    }

    /// The Halide bugs this context brings back.
    #[cfg(feature = "emulate")]
    pub fn emulate(&self) -> Emulate {
        self.inner.emulate
    }

    /// Gives back the staging chunks, coalesces free regions, destroys their cached
    /// buffers and frees empty blocks (Halide's
    /// `halide_vulkan_release_unused_device_allocations`). Returns the number of
    /// blocks freed.
    pub fn release_unused(&self) -> usize {
        self.inner.staging.release();
        self.inner.allocator.release_unused()
    }

    /// Halide's `halide_reuse_device_allocations`: whether device allocations
    /// freed by buffers are kept for later requests of the context (on by default).
    /// Turning it off frees what is unused now, and from then on every freed
    /// region's buffer and every block left empty goes back at once. Returns the
    /// blocks freed now.
    pub fn reuse_device_allocations(&self, on: bool) -> usize {
        if !on {
            self.inner.staging.release();
        }
        self.inner.allocator.set_reuse(on)
    }

    /// Whether freed device allocations are kept for reuse; see
    /// [`Context::reuse_device_allocations`].
    pub fn reuses_device_allocations(&self) -> bool {
        self.inner.allocator.reuses()
    }

    /// Halide's `device_release`: frees every unused block and the cached pipelines.
    /// Memory still held by buffers stays valid.
    pub fn device_release(&self) -> usize {
        self.release_pipelines();
        self.release_unused()
    }

    /// Simulation only: takes all of simulated heap `heap` but `leave` bytes, so
    /// that "heap full" can be reproduced. Returns the bytes taken.
    #[cfg(feature = "simulate")]
    pub fn fill_heap(&self, heap: u32, leave: u64) -> Result<u64> {
        self.inner.allocator.fill_heap(heap, leave)
    }

    /// Everything alive beyond what the context keeps: runs
    /// [`Context::release_unused`], then reports what is still alive (not yet a
    /// leak: [`Context::close`] says what outlives the context). Empty when every
    /// buffer was dropped.
    pub fn leak_check(&self) -> LeakReport {
        self.release_unused();
        self.inner.device.stats.leaks()
    }

    /// Tears the context down and reports what outlived it: every object still
    /// alive then is a leak (buffers the caller kept, or clones of this context
    /// still open). Frees unused blocks and the cached pipelines first.
    pub fn close(self) -> LeakReport {
        self.device_release();
        let device = self.inner.device.clone();
        drop(self);
        let mut report = device.stats.leaks();
        report.after_teardown = true;
        report
    }

    /// Live and total counts of what the runtime created.
    pub fn stats(&self) -> &Stats {
        &self.inner.device.stats
    }

    /// Turns GPU timestamps around copies on or off (counts are always kept).
    pub fn set_profiling(&self, on: bool) {
        self.inner.profile.set_enabled(on);
    }

    /// Whether GPU timestamps are taken around copies.
    pub fn profiling(&self) -> bool {
        self.inner.profile.enabled()
    }

    /// Traces where the host time of each blocking submission goes (see
    /// [`SubmitSteps`]); turning it on or off clears the trace.
    pub fn set_step_trace(&self, on: bool) {
        let trace = &self.inner.device.trace;
        trace.set_enabled(on);
        trace.take();
    }

    /// The submissions traced since the last call, in order.
    pub fn take_step_trace(&self) -> Vec<SubmitSteps> {
        self.inner.device.trace.take()
    }

    /// Copy totals of one path so far.
    pub fn copy_stats(&self, path: CopyPath) -> CopyStats {
        self.inner.profile.get(path)
    }

    /// Every counter by name: copies and bytes per path, then per route, then
    /// live objects. The names are [`counter_names`].
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats();
        let (blocks, block_bytes) = self.inner.allocator.pool_usage();
        let mut values = Vec::with_capacity(counter_names().len());
        for p in CopyPath::ALL {
            let c = self.copy_stats(p);
            values.extend([c.copies, c.bytes]);
        }
        values.extend(self.inner.routes.values());
        values.extend([
            s.regions.created(),
            s.regions.destroyed(),
            s.user_regions(),
            s.staging_regions.live(),
            s.buffers.live(),
            s.device_memories.live(),
            s.device_memory_bytes(),
            s.mappings.live(),
            blocks as u64,
            block_bytes,
        ]);
        counter_names().iter().copied().zip(values).collect()
    }

    /// Whether the Khronos validation layer is enabled on this context.
    pub fn validation(&self) -> bool {
        self.inner.device.instance.validation
    }

    /// Validation-layer (and other debug-utils) messages so far, and clears them.
    pub fn take_validation_messages(&self) -> Vec<String> {
        self.inner.device.instance.messages(true)
    }

    /// Validation messages so far, without clearing them.
    pub fn validation_messages(&self) -> Vec<String> {
        self.inner.device.instance.messages(false)
    }

    /// The `ash` device, for callers that make raw Vulkan calls on it (to create a
    /// `VkBuffer` for [`Context::wrap_vk_buffer`], say). Make the calls while
    /// the returned value lives: under a validation layer it keeps other
    /// threads' contexts from being created or destroyed meanwhile (see
    /// [`Guarded`]).
    pub fn raw_device(&self) -> Guarded<'_, ash::Device> {
        self.inner.device.raw()
    }

    /// The `ash` instance the device was created from (held as
    /// [`Context::raw_device`]).
    pub fn raw_instance(&self) -> Guarded<'_, ash::Instance> {
        self.inner.device.instance.raw()
    }

    /// The physical device behind [`Context::raw_device`].
    pub fn raw_physical_device(&self) -> vk::PhysicalDevice {
        self.inner.device.physical
    }

    /// Whether both contexts are the same device connection.
    pub fn same(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Whether `device` is this context's device.
    pub(crate) fn owns(&self, device: &Arc<DeviceShared>) -> bool {
        Arc::ptr_eq(&self.inner.device, device)
    }
}

/// Counters of live objects, after the copy counters.
const OBJECT_COUNTERS: [&str; 10] = [
    "device_mallocs",
    "device_frees",
    "live_regions",
    "staging_regions",
    "live_buffers",
    "live_device_memories",
    "live_device_memory_bytes",
    "live_mappings",
    "blocks",
    "block_bytes",
];

/// Names of [`Context::counters`], in order: per copy path `copies_<path>` and
/// `bytes_<path>`; per route `copies_<path>_<route>` and `bytes_<path>_<route>`
/// (`imported`, `ring`, `staged` for uploads and readbacks; `transfer`, `shader`
/// for device to device); then live objects.
pub fn counter_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let paths = CopyPath::ALL.iter().flat_map(|p| {
            [
                format!("copies_{}", p.name()),
                format!("bytes_{}", p.name()),
            ]
            .map(|s| &*Box::leak(s.into_boxed_str()))
        });
        paths
            .chain(route::counter_names().iter().copied())
            .chain(OBJECT_COUNTERS)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_names_follow_copy_paths_then_routes() {
        let names = counter_names();
        for (i, p) in CopyPath::ALL.iter().enumerate() {
            assert_eq!(names[2 * i], format!("copies_{}", p.name()));
            assert_eq!(names[2 * i + 1], format!("bytes_{}", p.name()));
        }
        let n = 2 * CopyPath::ALL.len();
        assert_eq!(names[n], "copies_to_device_imported");
        assert!(names.contains(&"copies_device_to_device_shader"));
        assert_eq!(names[names.len() - 1], "block_bytes");
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
    }
}
