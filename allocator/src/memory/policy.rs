//! Memory-type selection: requests in Halide's vocabulary and three policies
//! that turn a request and a [`MemoryTable`] into memory types to try, best first.
//!
//! Pure logic: no Vulkan call. The runtime allocates from the first candidate
//! and walks the list when `vkAllocateMemory` fails.
//!
//! # Requests
//!
//! A [`MemoryRequest`] is Halide's `MemoryProperties` triple
//! (`src/runtime/internal/memory_resources.h`): a [`MemoryVisibility`], a
//! [`MemoryCaching`] and a [`MemoryUsage`]. Usage picks buffer usage flags in
//! the runtime; no policy looks at it. The runtime asks by [`Role`], and each
//! [`Policy`] maps a role to its request:
//!
//! | role | `halide-legacy` | `halide` | `vkcopy` |
//! |---|---|---|---|
//! | readback | device_to_host/uncached_coherent | device_to_host/cached_coherent | device_to_host/cached |
//! | upload | host_to_device/uncached_coherent | same | same |
//! | device | device_only/uncached | same | same |
//! | device_mapped | device_only/uncached | same | device_only/uncached, host-visible coherent types first |
//!
//! (usages: readback `transfer_dst`, upload `transfer_src`, device and
//! device_mapped `transfer_src_dst`.)
//!
//! # `halide-legacy` and `halide`
//!
//! Halide's `VulkanMemoryAllocator` (`src/runtime/vulkan_memory.h`):
//! `required_flags_for_memory_properties`, `preferred_flags_for_memory_properties`
//! and the two passes of `allocate_block`. Pass 1 takes types with
//! required|preferred flags in index order, pass 2 types with the required
//! flags; the candidates are pass 1's types, then pass 2's others.
//! `halide-legacy` is Halide HEAD before the readback fix; `halide` is HEAD
//! with the readback fix as discussed for Halide, and both review changes:
//!
//! | | `halide-legacy` | `halide` |
//! |---|---|---|
//! | required | device_only: DEVICE_LOCAL; device_to_host, host_to_device: HOST_VISIBLE | the same, plus HOST_COHERENT for `*_coherent` caching when HOST_VISIBLE is required |
//! | preferred, visibility | host_only: HOST_VISIBLE; device_to_host: DEVICE_LOCAL | host_only: HOST_VISIBLE; device_to_host: HOST_CACHED only with `default` caching |
//! | preferred, caching (when HOST_VISIBLE is required) | cached_coherent: HOST_CACHED\|HOST_COHERENT; uncached_coherent: HOST_COHERENT; cached: HOST_CACHED | the same |
//!
//! One departure from Halide, in both: types outside `memoryTypeBits` (and
//! the table's `buffer_memory_type_bits`) are never candidates. Halide does
//! not look at `memoryTypeBits`, but binding a buffer to memory of another
//! type is invalid Vulkan (VUID-vkBindBufferMemory-memory-01035).
//!
//! # `vkcopy` (the default)
//!
//! A type is a candidate when it is in `memoryTypeBits`, has the required
//! flags, is not vendor-special (DEVICE_COHERENT_AMD, DEVICE_UNCACHED_AMD,
//! PROTECTED, LAZILY_ALLOCATED: they need features or resources that plain
//! buffers do not have) and is not on a small BAR heap
//! ([`MemoryTable::is_small_bar_heap`]: staging there competes with the driver
//! for a few hundred MiB, and reads from it run at 22 MB/s). HOST_COHERENT is
//! never required: the runtime flushes and invalidates non-coherent memory in
//! `nonCoherentAtomSize` units. Candidates are sorted by a key compared field
//! by field, `false` before `true`; ties go to the driver's order:
//!
//! | visibility | required | key |
//! |---|---|---|
//! | device_only | DEVICE_LOCAL | (HOST_VISIBLE, index) |
//! | default | none | (not DEVICE_LOCAL, HOST_VISIBLE, index) |
//! | device_to_host, host_only, host_to_device | HOST_VISIBLE | (DEVICE_LOCAL on a discrete GPU, first miss, second miss, index) |
//!
//! For host-visible memory the caching of the request sets what counts as a miss
//! and which comes first:
//!
//! | caching | cache miss | first, then |
//! |---|---|---|
//! | cached | not HOST_CACHED | cache miss, then not HOST_COHERENT |
//! | uncached | HOST_CACHED | cache miss, then not HOST_COHERENT |
//! | cached_coherent | not HOST_CACHED | not HOST_COHERENT, then cache miss |
//! | uncached_coherent | HOST_CACHED | not HOST_COHERENT, then cache miss |
//! | default | device_to_host, host_only: as cached; host_to_device: as uncached_coherent | |
//!
//! So readback (device_to_host/cached) takes cached coherent memory, then
//! cached non-coherent memory, then uncached memory, and host-visible VRAM of
//! a discrete GPU only last (the CPU reads BAR-mapped VRAM orders of magnitude
//! slower than system memory). Upload (host_to_device/uncached_coherent) takes
//! coherent uncached (write-combined) system memory as VMA does for
//! sequential writes, then coherent cached, then non-coherent, and host-visible
//! VRAM of a discrete GPU last. Device memory takes DEVICE_LOCAL types that are
//! not host-visible first.

use std::fmt;
use std::str::FromStr;

use ash::vk;

use super::table::{property_flags_name, DeviceType, MemoryTable};

/// A name that does not parse as one of this module's values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{value}`; expected one of {expected}")]
pub struct ParseError {
    /// What was being parsed, e.g. "memory visibility".
    pub what: &'static str,
    /// The text given.
    pub value: String,
    /// The accepted names, comma-separated.
    pub expected: String,
}

/// Defines `ALL`, `name()`, `Display` and `FromStr` of a fieldless enum from its names.
macro_rules! named {
    ($ty:ident, $what:literal, [$($variant:ident => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];

            /// The name used in case files and on the command line.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = ParseError;
            fn from_str(s: &str) -> Result<Self, ParseError> {
                $ty::ALL
                    .into_iter()
                    .find(|v| v.name() == s)
                    .ok_or_else(|| ParseError {
                        what: $what,
                        value: s.to_string(),
                        expected: [$($name),+].join(", "),
                    })
            }
        }
    };
}

/// Who accesses the memory and in which direction (Halide's `MemoryVisibility`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryVisibility {
    /// Host reads and writes; the device does not use it.
    HostOnly,
    /// Only the device uses it.
    DeviceOnly,
    /// The device writes, the host reads: readback staging.
    DeviceToHost,
    /// The host writes, the device reads: upload staging.
    HostToDevice,
    /// Any memory (Halide's `DefaultVisibility`).
    Default,
}

named!(MemoryVisibility, "memory visibility", [
    HostOnly => "host_only",
    DeviceOnly => "device_only",
    DeviceToHost => "device_to_host",
    HostToDevice => "host_to_device",
    Default => "default",
]);

/// Host caching and coherence asked for (Halide's `MemoryCaching`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryCaching {
    /// HOST_CACHED.
    Cached,
    /// Not HOST_CACHED (write-combined on most systems).
    Uncached,
    /// HOST_CACHED and HOST_COHERENT.
    CachedCoherent,
    /// HOST_COHERENT, not HOST_CACHED.
    UncachedCoherent,
    /// No preference (Halide's `DefaultCaching`).
    Default,
}

named!(MemoryCaching, "memory caching", [
    Cached => "cached",
    Uncached => "uncached",
    CachedCoherent => "cached_coherent",
    UncachedCoherent => "uncached_coherent",
    Default => "default",
]);

/// What a buffer is used for (Halide's `MemoryUsage`); the runtime turns it
/// into `VkBufferUsageFlags`. No policy looks at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryUsage {
    /// Storage that lives as long as its buffer.
    StaticStorage,
    /// Storage that is rewritten often.
    DynamicStorage,
    /// Uniform buffers.
    UniformStorage,
    /// The source of transfers.
    TransferSrc,
    /// The destination of transfers.
    TransferDst,
    /// Both ends of transfers.
    TransferSrcDst,
    /// Halide's `DefaultUsage`.
    Default,
}

named!(MemoryUsage, "memory usage", [
    StaticStorage => "static_storage",
    DynamicStorage => "dynamic_storage",
    UniformStorage => "uniform_storage",
    TransferSrc => "transfer_src",
    TransferDst => "transfer_dst",
    TransferSrcDst => "transfer_src_dst",
    Default => "default",
]);

/// A memory request: Halide's `MemoryProperties` without alignment.
///
/// Written `visibility/caching` or `visibility/caching/usage`, e.g.
/// `device_to_host/cached_coherent`; the usage is left out when it is `default`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryRequest {
    /// Who reads and writes the memory.
    pub visibility: MemoryVisibility,
    /// How the host caches it.
    pub caching: MemoryCaching,
    /// What it is used for.
    pub usage: MemoryUsage,
}

impl MemoryRequest {
    /// A request with the default usage.
    pub const fn new(visibility: MemoryVisibility, caching: MemoryCaching) -> Self {
        MemoryRequest {
            visibility,
            caching,
            usage: MemoryUsage::Default,
        }
    }

    /// The same request with `usage`.
    pub const fn with_usage(self, usage: MemoryUsage) -> Self {
        MemoryRequest { usage, ..self }
    }
}

impl fmt::Display for MemoryRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.visibility, self.caching)?;
        if self.usage != MemoryUsage::Default {
            write!(f, "/{}", self.usage)?;
        }
        Ok(())
    }
}

impl FromStr for MemoryRequest {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let parts: Vec<&str> = s.split('/').collect();
        let (visibility, caching, usage) = match parts[..] {
            [v, c] => (v, c, None),
            [v, c, u] => (v, c, Some(u)),
            _ => {
                return Err(ParseError {
                    what: "memory request",
                    value: s.to_string(),
                    expected: "visibility/caching or visibility/caching/usage, \
                               e.g. device_to_host/cached_coherent"
                        .to_string(),
                })
            }
        };
        Ok(MemoryRequest {
            visibility: visibility.parse()?,
            caching: caching.parse()?,
            usage: usage.map_or(Ok(MemoryUsage::Default), str::parse)?,
        })
    }
}

/// What the runtime allocates memory for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Staging for device-to-host copies: the device writes, the host reads.
    Readback,
    /// Staging for host-to-device copies: the host writes, the device reads.
    Upload,
    /// A buffer's device memory: only the device uses it.
    Device,
    /// A small buffer's device memory, which the host may also write: small
    /// uploads skip staging and the GPU. The device request, with its
    /// host-visible coherent types first ([`Policy::role_candidates`]).
    DeviceMapped,
}

named!(Role, "role", [
    Readback => "readback",
    Upload => "upload",
    Device => "device",
    DeviceMapped => "device_mapped",
]);

/// Buffers under this many bytes may be placed for mapped uploads
/// ([`Role::DeviceMapped`]), and only their uploads are measured both ways:
/// from it on, the GPU's copy wins on every device measured.
pub const MAPPED_MAX_BYTES: u64 = 4 << 20;

/// A memory-type selection policy; see the module docs for the rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Halide HEAD before the readback fix: readback prefers DEVICE_LOCAL.
    HalideLegacy,
    /// Halide with the readback fix and both review changes.
    Halide,
    /// vkcopy's own rules.
    #[default]
    Vkcopy,
}

named!(Policy, "policy", [
    HalideLegacy => "halide-legacy",
    Halide => "halide",
    Vkcopy => "vkcopy",
]);

/// No memory type can serve a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// Every type is excluded; `types` says why for each.
    #[error("no memory type for {request} on {table}; its types: {types}")]
    NoMemoryType {
        /// The request, the policy and the `memoryTypeBits` used.
        request: String,
        /// The table's name.
        table: String,
        /// Each type with its flags and why it was excluded, `; `-separated.
        types: String,
    },
}

/// Flags a vkcopy candidate must not have.
const VENDOR_SPECIAL: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::from_raw(
    vk::MemoryPropertyFlags::DEVICE_COHERENT_AMD.as_raw()
        | vk::MemoryPropertyFlags::DEVICE_UNCACHED_AMD.as_raw()
        | vk::MemoryPropertyFlags::PROTECTED.as_raw()
        | vk::MemoryPropertyFlags::LAZILY_ALLOCATED.as_raw(),
);

impl Policy {
    /// The request this policy makes for `role` (table in the module docs).
    pub fn request(self, role: Role) -> MemoryRequest {
        use MemoryCaching as C;
        use MemoryVisibility as V;
        match role {
            Role::Readback => {
                let caching = match self {
                    Policy::HalideLegacy => C::UncachedCoherent,
                    Policy::Halide => C::CachedCoherent,
                    Policy::Vkcopy => C::Cached,
                };
                MemoryRequest::new(V::DeviceToHost, caching).with_usage(MemoryUsage::TransferDst)
            }
            Role::Upload => MemoryRequest::new(V::HostToDevice, C::UncachedCoherent)
                .with_usage(MemoryUsage::TransferSrc),
            Role::Device | Role::DeviceMapped => MemoryRequest::new(V::DeviceOnly, C::Uncached)
                .with_usage(MemoryUsage::TransferSrcDst),
        }
    }

    /// Flags every candidate has. Halide's `required_flags_for_memory_properties`
    /// for the two Halide policies.
    pub fn required_flags(self, request: &MemoryRequest) -> vk::MemoryPropertyFlags {
        use vk::MemoryPropertyFlags as F;
        let mut required = match request.visibility {
            MemoryVisibility::DeviceOnly => F::DEVICE_LOCAL,
            MemoryVisibility::DeviceToHost | MemoryVisibility::HostToDevice => F::HOST_VISIBLE,
            // Halide requires nothing for host_only; vkcopy maps it, so needs HOST_VISIBLE.
            MemoryVisibility::HostOnly if self == Policy::Vkcopy => F::HOST_VISIBLE,
            MemoryVisibility::HostOnly | MemoryVisibility::Default => F::empty(),
        };
        // The fix's first review change: coherence is required, not preferred.
        if self == Policy::Halide
            && required.contains(F::HOST_VISIBLE)
            && matches!(
                request.caching,
                MemoryCaching::CachedCoherent | MemoryCaching::UncachedCoherent
            )
        {
            required |= F::HOST_COHERENT;
        }
        required
    }

    /// Halide's `preferred_flags_for_memory_properties`; empty for `vkcopy`,
    /// which ranks instead.
    fn preferred_flags(self, request: &MemoryRequest) -> vk::MemoryPropertyFlags {
        use vk::MemoryPropertyFlags as F;
        let mut preferred = match (self, request.visibility) {
            (Policy::Vkcopy, _) => return F::empty(),
            (_, MemoryVisibility::HostOnly) => F::HOST_VISIBLE,
            (Policy::HalideLegacy, MemoryVisibility::DeviceToHost) => F::DEVICE_LOCAL,
            // The fix's second review change: only default caching implies cached.
            (_, MemoryVisibility::DeviceToHost) if request.caching == MemoryCaching::Default => {
                F::HOST_CACHED
            }
            _ => F::empty(),
        };
        if self.required_flags(request).contains(F::HOST_VISIBLE) {
            preferred |= match request.caching {
                MemoryCaching::CachedCoherent => F::HOST_CACHED | F::HOST_COHERENT,
                MemoryCaching::UncachedCoherent => F::HOST_COHERENT,
                MemoryCaching::Cached => F::HOST_CACHED,
                MemoryCaching::Uncached | MemoryCaching::Default => F::empty(),
            };
        }
        preferred
    }

    /// Memory types to try for `request`, best first; the runtime walks this
    /// list when `vkAllocateMemory` fails. `memory_type_bits` is the buffer's
    /// `VkMemoryRequirements::memoryTypeBits`; it is also masked with the
    /// table's `buffer_memory_type_bits`. Errors when no type qualifies.
    pub fn candidates(
        self,
        table: &MemoryTable,
        request: &MemoryRequest,
        memory_type_bits: u32,
    ) -> Result<Vec<u32>, SelectError> {
        let allowed = memory_type_bits & table.buffer_memory_type_bits;
        let required = self.required_flags(request);
        let eligible: Vec<u32> = (0..table.types.len().min(32) as u32)
            .filter(|&i| self.exclusion(table, allowed, required, i).is_none())
            .collect();
        let list = match self {
            Policy::HalideLegacy | Policy::Halide => {
                // Pass 1 then pass 2 of Halide's `allocate_block`.
                let wanted = required | self.preferred_flags(request);
                let (mut first, second): (Vec<u32>, Vec<u32>) = eligible
                    .into_iter()
                    .partition(|&i| table.types[i as usize].flags.contains(wanted));
                first.extend(second);
                first
            }
            Policy::Vkcopy => {
                let mut list = eligible;
                list.sort_by_key(|&i| vkcopy_key(table, request, i));
                list
            }
        };
        if list.is_empty() {
            let types = (0..table.types.len() as u32)
                .map(|i| {
                    let why = self
                        .exclusion(table, allowed, required, i)
                        .unwrap_or("eligible");
                    format!("{} [{why}]", table.describe_type(i))
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(SelectError::NoMemoryType {
                request: format!(
                    "{request} (policy {self}, memoryTypeBits {memory_type_bits:#x}, \
                     required {})",
                    property_flags_name(required)
                ),
                table: table.name.clone(),
                types,
            });
        }
        Ok(list)
    }

    /// Memory types to try for `role`: [`Policy::candidates`] of its request.
    /// For [`Role::DeviceMapped`] under `vkcopy` the host-visible coherent types
    /// come first (Halide has no such role: its policies keep the device order);
    /// the others follow, so a small buffer still finds device memory when no
    /// such type has room. Non-coherent memory is left out of the front: a
    /// flush writes back whole atoms, which would race the device's writes to
    /// neighbouring bytes. A small BAR heap is no candidate of the device
    /// request under `vkcopy`, so small buffers never take it from the buffers
    /// that need it.
    pub fn role_candidates(
        self,
        table: &MemoryTable,
        role: Role,
        memory_type_bits: u32,
    ) -> Result<Vec<u32>, SelectError> {
        use vk::MemoryPropertyFlags as F;
        let mut list = self.candidates(table, &self.request(role), memory_type_bits)?;
        if role == Role::DeviceMapped && self == Policy::Vkcopy {
            let mapped = F::HOST_VISIBLE | F::HOST_COHERENT;
            list.sort_by_key(|&i| !table.types[i as usize].flags.contains(mapped));
        }
        Ok(list)
    }

    /// Whether small buffers' device memory may be host-visible and coherent
    /// (mapped uploads): the first [`Role::DeviceMapped`] candidate is.
    pub fn maps_device_memory(self, table: &MemoryTable, memory_type_bits: u32) -> bool {
        use vk::MemoryPropertyFlags as F;
        let mapped = F::HOST_VISIBLE | F::HOST_COHERENT;
        self == Policy::Vkcopy
            && self
                .role_candidates(table, Role::DeviceMapped, memory_type_bits)
                .is_ok_and(|list| table.types[list[0] as usize].flags.contains(mapped))
    }

    /// The role of a buffer's device memory of `bytes`, as the runtime places
    /// it: [`Role::DeviceMapped`] for a small buffer where mapped uploads are on
    /// (`mapped_uploads`) and the table has the memory for them, else
    /// [`Role::Device`]. Both are the buffer's device memory to a case.
    pub fn device_role(
        self,
        table: &MemoryTable,
        memory_type_bits: u32,
        bytes: u64,
        mapped_uploads: bool,
    ) -> Role {
        match mapped_uploads
            && bytes < MAPPED_MAX_BYTES
            && self.maps_device_memory(table, memory_type_bits)
        {
            true => Role::DeviceMapped,
            false => Role::Device,
        }
    }

    /// The memory type the runtime tries first for `role`: the head of
    /// [`Policy::role_candidates`]. `select`, `explain` and selection cases
    /// answer with it, so they say what the runtime does.
    pub fn select_role(
        self,
        table: &MemoryTable,
        role: Role,
        memory_type_bits: u32,
    ) -> Result<u32, SelectError> {
        self.role_candidates(table, role, memory_type_bits)
            .map(|list| list[0])
    }

    /// The memory type to allocate first: the first of [`Policy::candidates`].
    pub fn select(
        self,
        table: &MemoryTable,
        request: &MemoryRequest,
        memory_type_bits: u32,
    ) -> Result<u32, SelectError> {
        self.candidates(table, request, memory_type_bits)
            .map(|list| list[0])
    }

    /// Why type `i` is not a candidate, or `None` when it is.
    fn exclusion(
        self,
        table: &MemoryTable,
        allowed: u32,
        required: vk::MemoryPropertyFlags,
        i: u32,
    ) -> Option<&'static str> {
        let t = table.types.get(i as usize)?;
        if i >= 32 || allowed & (1 << i) == 0 {
            Some("not in memoryTypeBits")
        } else if !t.flags.contains(required) {
            Some("lacks a required flag")
        } else if self == Policy::Vkcopy && t.flags.intersects(VENDOR_SPECIAL) {
            Some("vendor-special")
        } else if self == Policy::Vkcopy && table.is_small_bar_heap(t.heap) {
            Some("small BAR heap")
        } else {
            None
        }
    }
}

/// The `vkcopy` sort key of type `i`: fields compare in order, `false` first.
fn vkcopy_key(table: &MemoryTable, request: &MemoryRequest, i: u32) -> (bool, bool, bool, u32) {
    use vk::MemoryPropertyFlags as F;
    let flags = table.types[i as usize].flags;
    let dl = flags.contains(F::DEVICE_LOCAL);
    let hv = flags.contains(F::HOST_VISIBLE);
    match request.visibility {
        MemoryVisibility::DeviceOnly => (hv, false, false, i),
        MemoryVisibility::Default => (!dl, hv, false, i),
        MemoryVisibility::DeviceToHost
        | MemoryVisibility::HostOnly
        | MemoryVisibility::HostToDevice => {
            let (want_cached, coherence_first) = match request.caching {
                MemoryCaching::Cached => (true, false),
                MemoryCaching::Uncached => (false, false),
                MemoryCaching::CachedCoherent => (true, true),
                MemoryCaching::UncachedCoherent => (false, true),
                MemoryCaching::Default => match request.visibility {
                    MemoryVisibility::HostToDevice => (false, true),
                    _ => (true, false),
                },
            };
            let cache_miss = flags.contains(F::HOST_CACHED) != want_cached;
            let incoherent = !flags.contains(F::HOST_COHERENT);
            let vram = dl && table.device_type == DeviceType::DiscreteGpu;
            if coherence_first {
                (vram, incoherent, cache_miss, i)
            } else {
                (vram, cache_miss, incoherent, i)
            }
        }
    }
}

#[cfg(test)]
mod tests;
