//! Live and total counts of what the runtime creates, and the leak report.
//!
//! Plays the role of Halide's `GpuObjectLifetimeTracker`
//! (`test/common/gpu_object_lifetime_tracker.h`): every create has a matching
//! destroy, and a case fails when anything it created is still alive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::memory::policy::Role;

/// One counter: live now, the most ever live, and totals created/destroyed.
#[derive(Debug, Default)]
pub struct Counter {
    live: AtomicU64,
    peak: AtomicU64,
    created: AtomicU64,
    destroyed: AtomicU64,
}

impl Counter {
    fn inc(&self) {
        let now = self.live.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        self.created.fetch_add(1, Ordering::Relaxed);
    }
    fn dec(&self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        self.destroyed.fetch_add(1, Ordering::Relaxed);
    }
    /// Alive now.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }
    /// The most alive at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
    /// Created in total.
    pub fn created(&self) -> u64 {
        self.created.load(Ordering::Relaxed)
    }
    /// Destroyed in total.
    pub fn destroyed(&self) -> u64 {
        self.destroyed.load(Ordering::Relaxed)
    }
}

/// Where one allocation landed, for `expect_memory` and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// What the memory is for.
    pub role: Role,
    /// Memory type index in the table the allocator selects from (simulated or real).
    pub memory_type: u32,
    /// That type's property flags.
    pub flags: ash::vk::MemoryPropertyFlags,
    /// The heap of the memory type.
    pub heap: u32,
    /// Bytes.
    pub size: u64,
    /// Candidates that failed to allocate before this one ("heap full" fallbacks).
    pub fallbacks: u32,
    /// The user's host memory imported for a copy (`VK_EXT_external_memory_host`)
    /// rather than a staging buffer.
    pub imported: bool,
}

impl Placement {
    /// The flags as text, e.g. "HOST_VISIBLE|HOST_COHERENT|HOST_CACHED".
    pub fn flags_name(&self) -> String {
        crate::memory::table::property_flags_name(self.flags)
    }
}

/// How many recent placements [`Stats::placements`] keeps: enough for any case,
/// bounded for long-running programs.
pub(crate) const PLACEMENT_LOG: usize = 4096;

/// Counters of everything the runtime creates. All counts; bytes where named.
#[derive(Debug, Default)]
pub struct Stats {
    /// `VkDeviceMemory` objects.
    pub device_memories: Counter,
    /// `VkBuffer` objects.
    pub buffers: Counter,
    /// Persistent mappings.
    pub mappings: Counter,
    /// Command pools.
    pub command_pools: Counter,
    /// Command buffers.
    pub command_buffers: Counter,
    /// Fences and semaphores.
    pub fences: Counter,
    /// Device allocations handed to buffers (Halide's "Reserved memory for device
    /// region"), the context's staging chunks included.
    pub regions: Counter,
    /// The staging chunks among [`Stats::regions`]: kept by the context between
    /// copies, given back by `release_unused`; never a leak of the user's.
    pub staging_regions: Counter,
    /// `VkShaderModule`s of compute kernels.
    pub shader_modules: Counter,
    /// Compute `VkPipeline`s.
    pub pipelines: Counter,
    /// Pipeline layouts.
    pub pipeline_layouts: Counter,
    /// Descriptor set layouts.
    pub descriptor_set_layouts: Counter,
    /// Descriptor pools, one per kernel call, destroyed after its fence wait.
    pub descriptor_pools: Counter,
    /// Descriptor sets, freed with their pool.
    pub descriptor_sets: Counter,
    /// Work in flight: blocking work of each thread while the device has its
    /// submissions (until the host sees them finish), and each async stream from
    /// the start of a copy that is ready to run on it (nothing left to wait for)
    /// until it has run its ready copies, host-side staging included; copies of
    /// one stream count once. Not an object: never a leak. Its peak is how much
    /// work was in flight at once.
    pub work_in_flight: Counter,
    /// Kernel objects the context keeps in its pipeline cache (not leaks): shader
    /// modules and pipelines (one each per cached kernel), and layouts.
    kept_kernels: AtomicU64,
    kept_layouts: AtomicU64,
    /// Submitters the context keeps (a command pool and a timeline semaphore each),
    /// and their command buffers.
    kept_submitters: AtomicU64,
    kept_command_buffers: AtomicU64,
    /// Submissions of a command buffer as it was recorded for an earlier one.
    submitted_again: AtomicU64,
    device_memory_bytes: AtomicU64,
    device_memory_peak_bytes: AtomicU64,
    placements: Mutex<std::collections::VecDeque<Placement>>,
}

macro_rules! pair {
    ($create:ident, $destroy:ident, $field:ident) => {
        pub(crate) fn $create(&self) {
            self.$field.inc();
        }
        pub(crate) fn $destroy(&self) {
            self.$field.dec();
        }
    };
}

impl Stats {
    pair!(buffer_created, buffer_destroyed, buffers);
    pair!(mapping_created, mapping_destroyed, mappings);
    pair!(command_pool_created, command_pool_destroyed, command_pools);
    pair!(
        command_buffer_created,
        command_buffer_destroyed,
        command_buffers
    );
    pair!(fence_created, fence_destroyed, fences);
    pair!(region_created, region_destroyed, regions);
    pair!(
        staging_region_created,
        staging_region_destroyed,
        staging_regions
    );
    pair!(
        shader_module_created,
        shader_module_destroyed,
        shader_modules
    );
    pair!(pipeline_created, pipeline_destroyed, pipelines);
    pair!(
        pipeline_layout_created,
        pipeline_layout_destroyed,
        pipeline_layouts
    );
    pair!(
        descriptor_set_layout_created,
        descriptor_set_layout_destroyed,
        descriptor_set_layouts
    );
    pair!(
        descriptor_pool_created,
        descriptor_pool_destroyed,
        descriptor_pools
    );
    pair!(
        descriptor_set_created,
        descriptor_set_destroyed,
        descriptor_sets
    );
    pair!(work_started, work_ended, work_in_flight);

    /// How many kernels (shader module + pipeline each) and layouts (descriptor set
    /// layout + pipeline layout each) the context's cache holds now.
    pub(crate) fn kernels_kept(&self, kernels: u64, layouts: u64) {
        self.kept_kernels.store(kernels, Ordering::Relaxed);
        self.kept_layouts.store(layouts, Ordering::Relaxed);
    }

    /// A submitter with `command_buffers` was made.
    pub(crate) fn recording_submitted_again(&self) {
        self.submitted_again.fetch_add(1, Ordering::Relaxed);
    }

    /// Submissions that sent a command buffer as recorded for an earlier one
    /// (repeated copies of the same buffers and ranges), without recording it.
    pub fn submitted_again(&self) -> u64 {
        self.submitted_again.load(Ordering::Relaxed)
    }

    pub(crate) fn submitter_kept(&self, command_buffers: u64) {
        self.kept_submitters.fetch_add(1, Ordering::Relaxed);
        self.kept_command_buffers
            .fetch_add(command_buffers, Ordering::Relaxed);
    }

    /// A submitter with `command_buffers` was destroyed.
    pub(crate) fn submitter_released(&self, command_buffers: u64) {
        self.kept_submitters.fetch_sub(1, Ordering::Relaxed);
        self.kept_command_buffers
            .fetch_sub(command_buffers, Ordering::Relaxed);
    }

    pub(crate) fn memory_allocated(&self, bytes: u64) {
        self.device_memories.inc();
        let now = self.device_memory_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.device_memory_peak_bytes
            .fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn memory_freed(&self, bytes: u64) {
        self.device_memories.dec();
        self.device_memory_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    pub(crate) fn placed(&self, p: Placement) {
        if let Ok(mut v) = self.placements.lock() {
            if v.len() == PLACEMENT_LOG {
                v.pop_front();
            }
            v.push_back(p);
        }
    }

    /// Bytes of `VkDeviceMemory` alive now.
    pub fn device_memory_bytes(&self) -> u64 {
        self.device_memory_bytes.load(Ordering::Relaxed)
    }

    /// The most bytes of `VkDeviceMemory` alive at once.
    pub fn device_memory_peak_bytes(&self) -> u64 {
        self.device_memory_peak_bytes.load(Ordering::Relaxed)
    }

    /// The latest placements (at most 4096), oldest first.
    pub fn placements(&self) -> Vec<Placement> {
        self.placements
            .lock()
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Regions alive that hold buffers' data: [`Stats::regions`] without the
    /// context's staging chunks.
    pub fn user_regions(&self) -> u64 {
        self.regions
            .live()
            .saturating_sub(self.staging_regions.live())
    }

    /// What is alive beyond what the context itself keeps (its command pool,
    /// command buffer and fence, and its cached compute kernels). Empty when
    /// nothing leaked.
    pub fn leaks(&self) -> LeakReport {
        let mut alive = Vec::new();
        let mut check = |what: &'static str, n: u64, baseline: u64| {
            if n > baseline {
                alive.push((what, n - baseline));
            }
        };
        check("device regions", self.user_regions(), 0);
        check("VkBuffers", self.buffers.live(), 0);
        check("VkDeviceMemory", self.device_memories.live(), 0);
        check("mappings", self.mappings.live(), 0);
        let submitters = self.kept_submitters.load(Ordering::Relaxed);
        let buffers = self.kept_command_buffers.load(Ordering::Relaxed);
        check("command pools", self.command_pools.live(), submitters);
        check("command buffers", self.command_buffers.live(), buffers);
        check("fences and semaphores", self.fences.live(), submitters);
        let kernels = self.kept_kernels.load(Ordering::Relaxed);
        let layouts = self.kept_layouts.load(Ordering::Relaxed);
        check("VkShaderModules", self.shader_modules.live(), kernels);
        check("VkPipelines", self.pipelines.live(), kernels);
        check("VkPipelineLayouts", self.pipeline_layouts.live(), layouts);
        check(
            "VkDescriptorSetLayouts",
            self.descriptor_set_layouts.live(),
            layouts,
        );
        check("VkDescriptorPools", self.descriptor_pools.live(), 0);
        check("VkDescriptorSets", self.descriptor_sets.live(), 0);
        LeakReport {
            alive,
            bytes: self.device_memory_bytes(),
            after_teardown: false,
        }
    }
}

/// What is still alive; see [`Stats::leaks`]. Before teardown that is not yet a
/// leak (a buffer may simply be in use) and the report says "still alive"; the
/// report of [`Context::close`](crate::Context::close), made after the context is
/// gone, says "leaked".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeakReport {
    /// (object kind, count alive).
    pub alive: Vec<(&'static str, u64)>,
    /// Bytes of device memory alive.
    pub bytes: u64,
    /// Whether the report was made after the context was torn down.
    pub after_teardown: bool,
}

impl LeakReport {
    /// Nothing alive (or, after teardown, nothing leaked).
    pub fn is_empty(&self) -> bool {
        self.alive.is_empty()
    }
}

impl std::fmt::Display for LeakReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.alive.is_empty() {
            return match self.after_teardown {
                true => write!(f, "nothing leaked"),
                false => write!(f, "nothing alive"),
            };
        }
        let parts: Vec<String> = self
            .alive
            .iter()
            .map(|(what, n)| format!("{n} {what}"))
            .collect();
        write!(
            f,
            "{} {} ({} bytes of device memory)",
            match self.after_teardown {
                true => "leaked",
                false => "still alive:",
            },
            parts.join(", "),
            self.bytes
        )
    }
}
