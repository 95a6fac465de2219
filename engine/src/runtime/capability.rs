//! What a runtime can do beyond the primitives of [`super::Runtime`]. Each step
//! says which one it needs (`steps::needs`, an exhaustive match), each runtime
//! which ones it has; a case that needs one its runtime lacks is skipped with
//! it named.

/// One thing beyond the primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// A selection case: vkcopy's memory-type policies on a recorded table.
    SelectionPolicies,
    /// A case's `policy:`: vkcopy's selection policies on the device.
    Policies,
    /// A case's `mapped_upload:` or `mapped_readback:`: copies the CPU makes
    /// into or out of host-visible device memory.
    MappedCopies,
    /// A case's `small_copy_queue: other`: small copies on a second queue.
    SecondQueue,
    /// `start_*`, `wait`, `expect_order`: copies that do not block.
    AsyncCopies,
    /// `threads`: several threads on one context.
    Threads,
    /// `measure`, `profiling`: timed copies.
    TimedCopies,
    /// `native_buffer`, `wrap_native`, `detach_native`: a `VkBuffer` the case
    /// makes on the runtime's own device.
    NativeBuffers,
    /// `sum_device`: a reduction kernel.
    SumKernel,
    /// `expect_concurrent`: work-in-flight accounting.
    WorkInFlight,
    /// `expect_counters` of counters only vkcopy's accounting has.
    OwnCounters,
}

impl Capability {
    /// Every capability, in order.
    pub const ALL: [Capability; 11] = [
        Capability::SelectionPolicies,
        Capability::Policies,
        Capability::MappedCopies,
        Capability::SecondQueue,
        Capability::AsyncCopies,
        Capability::Threads,
        Capability::TimedCopies,
        Capability::NativeBuffers,
        Capability::SumKernel,
        Capability::WorkInFlight,
        Capability::OwnCounters,
    ];

    /// Its name in tables and messages.
    pub fn name(self) -> &'static str {
        match self {
            Capability::SelectionPolicies => "selection-policies",
            Capability::Policies => "policies",
            Capability::MappedCopies => "mapped-copies",
            Capability::SecondQueue => "second-queue",
            Capability::AsyncCopies => "async-copies",
            Capability::Threads => "threads",
            Capability::TimedCopies => "timed-copies",
            Capability::NativeBuffers => "native-buffers",
            Capability::SumKernel => "sum-kernel",
            Capability::WorkInFlight => "work-in-flight",
            Capability::OwnCounters => "own-counters",
        }
    }

    /// What it is, in words.
    pub fn about(self) -> &'static str {
        match self {
            Capability::SelectionPolicies => "vkcopy's memory-type policies (a selection case)",
            Capability::Policies => "a vkcopy selection policy (`policy:`)",
            Capability::MappedCopies => "vkcopy's copies made by the CPU in host-visible device memory (`mapped_upload:`, `mapped_readback:`)",
            Capability::SecondQueue => {
                "vkcopy's small copies on a second queue (`small_copy_queue:`)"
            }
            Capability::AsyncCopies => "async copies",
            Capability::Threads => "threads on one context",
            Capability::TimedCopies => "timed copies (`measure`)",
            Capability::NativeBuffers => "native Vulkan buffers on the suite's device",
            Capability::SumKernel => "a sum kernel on the runtime's device",
            Capability::WorkInFlight => "work-in-flight accounting",
            Capability::OwnCounters => "only counters of vkcopy's own accounting",
        }
    }
}

/// Counters every runtime has a meaning for: the Vulkan objects it holds, the
/// copies each step made, and the device regions that buffers hold
/// (`live_regions`: on Halide, the buffers whose `halide_buffer_t::device` is
/// a region of their own, one per buffer as Halide's runtime makes them).
/// vkcopy's other region counts (`device_mallocs`, `staging_regions`...) have
/// none on Halide, which makes a `VkBuffer` for free regions too.
pub const SHARED_COUNTERS: &[&str] = &[
    "live_regions",
    "live_device_memories",
    "blocks",
    "live_device_memory_bytes",
    "block_bytes",
    "live_mappings",
    "copies_to_device",
    "bytes_to_device",
    "copies_to_host",
    "bytes_to_host",
    "copies_device_to_device",
    "bytes_device_to_device",
    "copies_host_to_host",
    "bytes_host_to_host",
];
