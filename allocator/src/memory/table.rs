//! Memory tables: the heaps and memory types of one device, as
//! `vkGetPhysicalDeviceMemoryProperties` reports them (Vulkan spec, "Device
//! Memory Properties"), plus the two numbers selection needs besides:
//! `nonCoherentAtomSize` and the `memoryTypeBits` of a storage/transfer buffer.
//!
//! A table comes from the live device or from a recorded YAML file in
//! `cases/devices/`. The YAML form, with unknown fields rejected:
//!
//! ```yaml
//! name: NVIDIA H200
//! device_type: discrete-gpu          # cpu | integrated-gpu | discrete-gpu | virtual-gpu | other
//! non_coherent_atom_size: 64         # bytes
//! heaps:                             # size in bytes; flags: DEVICE_LOCAL, MULTI_INSTANCE
//!   - { size: 150754820096, flags: [DEVICE_LOCAL] }
//!   - { size: 101360599040, flags: [] }  # optional budget: BYTES, simulation: VK_EXT_memory_budget's
//! types:                             # in the driver's order: the order is part of the answer
//!   - { heap: 1, flags: [] }
//!   - { heap: 0, flags: [DEVICE_LOCAL] }
//!   - { heap: 1, flags: [HOST_VISIBLE, HOST_COHERENT] }
//!   - { heap: 1, flags: [HOST_VISIBLE, HOST_COHERENT, HOST_CACHED] }
//!   - { heap: 0, flags: [DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT] }
//! buffer_memory_type_bits: 0x1f      # optional, default every type; an integer or a "0x.." string
//! dedicated_from: 268435456          # optional, simulation: buffers this large prefer dedicated memory
//! source: where the numbers come from  # optional free text, not kept in the table
//! notes: anything else worth knowing   # optional free text, not kept in the table
//! ```
//!
//! Property flag names are those of `VkMemoryPropertyFlagBits` without the
//! `VK_MEMORY_PROPERTY_` prefix and `_BIT` suffix (see [`property_flags_name`]).
//! Loading validates the table ([`MemoryTable::validate`]); every error names
//! the file, the line and column when known, and the entry.

use std::fmt;

use ash::vk;

/// Most memory types a device can report (`VK_MAX_MEMORY_TYPES`).
pub const MAX_MEMORY_TYPES: usize = vk::MAX_MEMORY_TYPES;
/// Most memory heaps a device can report (`VK_MAX_MEMORY_HEAPS`).
pub const MAX_MEMORY_HEAPS: usize = vk::MAX_MEMORY_HEAPS;
/// Largest heap that counts as a small BAR window, in bytes (256 MiB): the
/// PCIe BAR of a discrete GPU without resizable BAR.
pub const SMALL_BAR_MAX_SIZE: u64 = 256 << 20;
/// Largest `nonCoherentAtomSize` the spec allows (Vulkan spec, "Required Limits"), in bytes.
pub const MAX_NON_COHERENT_ATOM_SIZE: u64 = 256;

/// The property flags a table may name, in the order [`property_flags_name`] writes them.
pub(super) const PROPERTY_FLAGS: [(&str, u32); 9] = {
    use vk::MemoryPropertyFlags as F;
    [
        ("DEVICE_LOCAL", F::DEVICE_LOCAL.as_raw()),
        ("HOST_VISIBLE", F::HOST_VISIBLE.as_raw()),
        ("HOST_COHERENT", F::HOST_COHERENT.as_raw()),
        ("HOST_CACHED", F::HOST_CACHED.as_raw()),
        ("LAZILY_ALLOCATED", F::LAZILY_ALLOCATED.as_raw()),
        ("PROTECTED", F::PROTECTED.as_raw()),
        ("DEVICE_COHERENT_AMD", F::DEVICE_COHERENT_AMD.as_raw()),
        ("DEVICE_UNCACHED_AMD", F::DEVICE_UNCACHED_AMD.as_raw()),
        ("RDMA_CAPABLE_NV", F::RDMA_CAPABLE_NV.as_raw()),
    ]
};

/// The real memory type that stands in for each type of a `simulated` table on a
/// device with `real` types: the first real type with at least its
/// host-visible/coherent/cached/device-local flags, else the first host-visible
/// coherent type for a host-visible simulated type, else type 0. Any runtime
/// simulated over the real driver (vkcopy's, or Halide's through interposed
/// entry points) maps types the same way.
pub fn backing_types(real: &[MemoryType], simulated: &MemoryTable) -> Vec<u32> {
    let relevant = vk::MemoryPropertyFlags::DEVICE_LOCAL
        | vk::MemoryPropertyFlags::HOST_VISIBLE
        | vk::MemoryPropertyFlags::HOST_COHERENT
        | vk::MemoryPropertyFlags::HOST_CACHED;
    let hv = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    simulated
        .types
        .iter()
        .map(|t| {
            let want = t.flags & relevant;
            real.iter()
                .position(|r| r.flags.contains(want))
                .or_else(|| {
                    real.iter().position(|r| {
                        !want.contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
                            || r.flags.contains(hv)
                    })
                })
                .unwrap_or(0) as u32
        })
        .collect()
}

/// The heap flags a table may name, in the order [`heap_flags_name`] writes them.
pub(super) const HEAP_FLAGS: [(&str, u32); 2] = [
    ("DEVICE_LOCAL", vk::MemoryHeapFlags::DEVICE_LOCAL.as_raw()),
    (
        "MULTI_INSTANCE",
        vk::MemoryHeapFlags::MULTI_INSTANCE.as_raw(),
    ),
];

/// The kind of device (`VkPhysicalDeviceType`). Selection treats discrete GPUs
/// apart: only there is DEVICE_LOCAL memory across a bus from the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "yaml", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "yaml", serde(rename_all = "kebab-case"))]
pub enum DeviceType {
    /// A software rasterizer on the CPU (lavapipe, SwiftShader).
    Cpu,
    /// A GPU sharing memory with the CPU.
    #[cfg_attr(feature = "yaml", serde(alias = "integrated_gpu"))]
    IntegratedGpu,
    /// A GPU with its own memory across PCIe.
    #[cfg_attr(feature = "yaml", serde(alias = "discrete_gpu"))]
    DiscreteGpu,
    /// A GPU behind a virtualization layer.
    #[cfg_attr(feature = "yaml", serde(alias = "virtual_gpu"))]
    VirtualGpu,
    /// Anything else.
    Other,
}

impl DeviceType {
    /// Every type.
    pub const ALL: [DeviceType; 5] = [
        DeviceType::Cpu,
        DeviceType::IntegratedGpu,
        DeviceType::DiscreteGpu,
        DeviceType::VirtualGpu,
        DeviceType::Other,
    ];

    /// The name, as Halide's `HL_VK_DEVICE_TYPE` spells it: `cpu`,
    /// `integrated-gpu`, `discrete-gpu`, `virtual-gpu`, `other`.
    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::IntegratedGpu => "integrated-gpu",
            DeviceType::DiscreteGpu => "discrete-gpu",
            DeviceType::VirtualGpu => "virtual-gpu",
            DeviceType::Other => "other",
        }
    }
}

impl std::str::FromStr for DeviceType {
    type Err = String;
    /// A [`DeviceType::name`], in any case, with `_` for `-` accepted.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase().replace('_', "-");
        DeviceType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!("unknown device type '{s}'; expected cpu, integrated-gpu, discrete-gpu, virtual-gpu or other")
            })
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<vk::PhysicalDeviceType> for DeviceType {
    /// Values this crate does not know map to [`DeviceType::Other`].
    fn from(t: vk::PhysicalDeviceType) -> Self {
        match t {
            vk::PhysicalDeviceType::CPU => DeviceType::Cpu,
            vk::PhysicalDeviceType::INTEGRATED_GPU => DeviceType::IntegratedGpu,
            vk::PhysicalDeviceType::DISCRETE_GPU => DeviceType::DiscreteGpu,
            vk::PhysicalDeviceType::VIRTUAL_GPU => DeviceType::VirtualGpu,
            _ => DeviceType::Other,
        }
    }
}

/// One memory heap (`VkMemoryHeap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryHeap {
    /// Bytes.
    pub size: u64,
    /// `VkMemoryPropertyFlags` / `VkMemoryHeapFlags`.
    pub flags: vk::MemoryHeapFlags,
    /// In a simulated table, the bytes `VK_EXT_memory_budget` reports as the heap's
    /// budget; the context's blocks and `fill_heap` count against it. A real
    /// device's budget is read from the driver instead.
    pub budget: Option<u64>,
}

/// One memory type (`VkMemoryType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryType {
    /// Index into [`MemoryTable::heaps`] (`heapIndex`).
    pub heap: u32,
    /// `VkMemoryPropertyFlags` / `VkMemoryHeapFlags`.
    pub flags: vk::MemoryPropertyFlags,
}

/// The memory heaps and types of one device, live or recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryTable {
    /// Device name, as `VkPhysicalDeviceProperties::deviceName` or a description.
    pub name: String,
    /// The kind of device.
    pub device_type: DeviceType,
    /// `VkPhysicalDeviceLimits::nonCoherentAtomSize`, bytes: flush and
    /// invalidate ranges of non-coherent memory are aligned to it.
    pub non_coherent_atom_size: u64,
    /// The memory heaps, in the driver's order.
    pub heaps: Vec<MemoryHeap>,
    /// In the driver's order: ties in selection go to the lower index.
    pub types: Vec<MemoryType>,
    /// `VkMemoryRequirements::memoryTypeBits` of a storage/transfer buffer: the
    /// types such a buffer may be bound to (VUID-vkBindBufferMemory-memory-01035).
    pub buffer_memory_type_bits: u32,
    /// In a simulated table: buffers of at least this many bytes are reported as
    /// preferring a dedicated allocation (`VkMemoryDedicatedRequirements`), as some
    /// drivers report for large buffers. A real device is asked per buffer instead.
    pub dedicated_from: Option<u64>,
}

/// Where an error is: the file (or other origin) and, when known, the line and
/// column (1-based). Displays as `origin:line:column` or `origin`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The file or other origin.
    pub origin: String,
    /// `(line, column)`, 1-based.
    pub position: Option<(u64, u64)>,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{}:{line}:{column}", self.origin),
            None => f.write_str(&self.origin),
        }
    }
}

impl Place {
    pub(super) fn new(origin: &str, position: Option<(u64, u64)>) -> Self {
        Place {
            origin: origin.to_string(),
            position,
        }
    }
}

/// An entry of a table that an error can point at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Entry {
    Heaps,
    Types,
    Type(usize),
    TypeHeap(usize),
    Atom,
    BufferBits,
}

/// A memory table that could not be read, parsed or validated. Every message
/// starts with `origin:line:column: ` (or `origin: ` when no position is known)
/// and names the entry, e.g. `types[3].heap = 5 but the table has 2 heaps`.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The file could not be read.
    #[error("{origin}: cannot read the memory table: {source}")]
    Read {
        /// The file or other origin.
        origin: String,
        #[source]
        /// Why reading failed.
        source: std::io::Error,
    },
    /// Not YAML, or not the table's shape (unknown or missing field, wrong type).
    #[error("{at}: {message}")]
    Parse {
        /// Where the error is.
        at: Place,
        /// What is wrong.
        message: String,
    },
    /// Well-formed, but breaks a rule of the Vulkan spec or of this format.
    #[error("{at}: {message}")]
    Invalid {
        /// Where the error is.
        at: Place,
        /// What is wrong.
        message: String,
    },
}

impl TableError {
    /// Where the error is.
    pub fn place(&self) -> Option<&Place> {
        match self {
            TableError::Read { .. } => None,
            TableError::Parse { at, .. } | TableError::Invalid { at, .. } => Some(at),
        }
    }
}

/// Flag names joined by `|`, e.g. `HOST_VISIBLE|HOST_COHERENT`; `none` for no
/// flags. Bits without a name are written in hex (`0x400`); they do not parse back.
pub fn property_flags_name(f: vk::MemoryPropertyFlags) -> String {
    flags_name(f.as_raw(), &PROPERTY_FLAGS)
}

/// The property flag called `name` (e.g. `HOST_CACHED`), as [`property_flags_name`] writes it.
pub fn parse_property_flag(name: &str) -> Option<vk::MemoryPropertyFlags> {
    flag_bit(name, &PROPERTY_FLAGS).map(vk::MemoryPropertyFlags::from_raw)
}

/// Heap flag names joined by `|`; `none` for no flags.
pub fn heap_flags_name(f: vk::MemoryHeapFlags) -> String {
    flags_name(f.as_raw(), &HEAP_FLAGS)
}

/// The heap flag called `name` (`DEVICE_LOCAL` or `MULTI_INSTANCE`).
pub fn parse_heap_flag(name: &str) -> Option<vk::MemoryHeapFlags> {
    flag_bit(name, &HEAP_FLAGS).map(vk::MemoryHeapFlags::from_raw)
}

pub(super) fn flag_bit(name: &str, table: &[(&str, u32)]) -> Option<u32> {
    table.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

pub(super) fn flag_names(raw: u32, table: &[(&str, u32)]) -> Vec<String> {
    let mut names: Vec<String> = table
        .iter()
        .filter(|(_, bit)| raw & bit != 0)
        .map(|(n, _)| n.to_string())
        .collect();
    let unnamed = table.iter().fold(raw, |left, (_, bit)| left & !bit);
    if unnamed != 0 {
        names.push(format!("{unnamed:#x}"));
    }
    names
}

pub(super) fn flags_name(raw: u32, table: &[(&str, u32)]) -> String {
    match flag_names(raw, table) {
        names if names.is_empty() => "none".to_string(),
        names => names.join("|"),
    }
}

impl MemoryTable {
    /// Checks the rules a table must follow; `origin` starts the messages.
    ///
    /// From the Vulkan spec ("Device Memory Properties", `VkMemoryPropertyFlagBits`,
    /// `VkMemoryRequirements`, "Required Limits"): at most 32 types and 16 heaps;
    /// every heap index in range; a type is DEVICE_LOCAL exactly when its heap
    /// is; at least one DEVICE_LOCAL type and one HOST_VISIBLE|HOST_COHERENT
    /// type, and a buffer may use one of the latter; no LAZILY_ALLOCATED or
    /// PROTECTED type is host-visible; `nonCoherentAtomSize` is a power of two
    /// of at most 256. From this format: `buffer_memory_type_bits` is non-zero
    /// and names no type beyond the table; no flag is listed twice.
    pub fn validate(&self, origin: &str) -> Result<(), TableError> {
        self.check(origin, &|_| None)
    }

    pub(super) fn check(
        &self,
        origin: &str,
        locate: &dyn Fn(Entry) -> Option<(u64, u64)>,
    ) -> Result<(), TableError> {
        use vk::MemoryPropertyFlags as F;
        let fail = |entry: Entry, message: String| {
            Err(TableError::Invalid {
                at: Place::new(origin, locate(entry)),
                message,
            })
        };
        if self.heaps.is_empty() {
            return fail(Entry::Heaps, "heaps: the table has no heap".into());
        }
        if self.heaps.len() > MAX_MEMORY_HEAPS {
            return fail(
                Entry::Heaps,
                format!(
                    "heaps: {} heaps, but Vulkan allows at most {MAX_MEMORY_HEAPS} (VK_MAX_MEMORY_HEAPS)",
                    self.heaps.len()
                ),
            );
        }
        if self.types.is_empty() {
            return fail(Entry::Types, "types: the table has no memory type".into());
        }
        if self.types.len() > MAX_MEMORY_TYPES {
            return fail(
                Entry::Types,
                format!(
                    "types: {} types, but Vulkan allows at most {MAX_MEMORY_TYPES} (VK_MAX_MEMORY_TYPES)",
                    self.types.len()
                ),
            );
        }
        for (i, t) in self.types.iter().enumerate() {
            let Some(heap) = self.heaps.get(t.heap as usize) else {
                return fail(
                    Entry::TypeHeap(i),
                    format!(
                        "types[{i}].heap = {} but the table has {} heaps",
                        t.heap,
                        self.heaps.len()
                    ),
                );
            };
            let type_dl = t.flags.contains(F::DEVICE_LOCAL);
            let heap_dl = heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL);
            if type_dl && !heap_dl {
                return fail(
                    Entry::Type(i),
                    format!(
                        "types[{i}] is DEVICE_LOCAL but its heap {} is not; a type is DEVICE_LOCAL \
                         exactly when its heap is (Vulkan spec, VkMemoryPropertyFlagBits)",
                        t.heap
                    ),
                );
            }
            if heap_dl && !type_dl {
                return fail(
                    Entry::Type(i),
                    format!(
                        "types[{i}] is on DEVICE_LOCAL heap {} but is not DEVICE_LOCAL; a type is \
                         DEVICE_LOCAL exactly when its heap is (Vulkan spec, VkMemoryPropertyFlagBits)",
                        t.heap
                    ),
                );
            }
            let host = F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED;
            if t.flags.contains(F::LAZILY_ALLOCATED) && t.flags.contains(F::HOST_VISIBLE) {
                return fail(
                    Entry::Type(i),
                    format!(
                        "types[{i}] is both LAZILY_ALLOCATED and HOST_VISIBLE, which Vulkan forbids"
                    ),
                );
            }
            if t.flags.contains(F::PROTECTED) && t.flags.intersects(host) {
                return fail(
                    Entry::Type(i),
                    format!(
                        "types[{i}] is PROTECTED and {}, which Vulkan forbids",
                        property_flags_name(t.flags & host)
                    ),
                );
            }
        }
        if !self.types.iter().any(|t| t.flags.contains(F::DEVICE_LOCAL)) {
            return fail(
                Entry::Types,
                "types: no DEVICE_LOCAL type; Vulkan requires at least one".into(),
            );
        }
        let hv_hc = F::HOST_VISIBLE | F::HOST_COHERENT;
        if !self.types.iter().any(|t| t.flags.contains(hv_hc)) {
            return fail(
                Entry::Types,
                "types: no HOST_VISIBLE|HOST_COHERENT type; Vulkan requires at least one".into(),
            );
        }
        let atom = self.non_coherent_atom_size;
        if !atom.is_power_of_two() || atom > MAX_NON_COHERENT_ATOM_SIZE {
            return fail(
                Entry::Atom,
                format!(
                    "non_coherent_atom_size = {atom}: must be a power of two of at most \
                     {MAX_NON_COHERENT_ATOM_SIZE} (Vulkan spec, Required Limits)"
                ),
            );
        }
        let bits = self.buffer_memory_type_bits;
        let all = self.all_type_bits();
        if bits == 0 {
            return fail(
                Entry::BufferBits,
                "buffer_memory_type_bits = 0x0: a buffer must be allowed at least one type".into(),
            );
        }
        if bits & !all != 0 {
            return fail(
                Entry::BufferBits,
                format!(
                    "buffer_memory_type_bits = {bits:#x} names types beyond the table's {} types \
                     (at most {all:#x})",
                    self.types.len()
                ),
            );
        }
        let buffer_hv_hc = self
            .types
            .iter()
            .enumerate()
            .any(|(i, t)| bits & (1 << i) != 0 && t.flags.contains(hv_hc));
        if !buffer_hv_hc {
            return fail(
                Entry::BufferBits,
                format!(
                    "buffer_memory_type_bits = {bits:#x} allows no HOST_VISIBLE|HOST_COHERENT type; \
                     Vulkan guarantees a buffer one (VkMemoryRequirements)"
                ),
            );
        }
        Ok(())
    }

    /// `memoryTypeBits` with every type of the table set.
    pub fn all_type_bits(&self) -> u32 {
        match self.types.len() {
            n if n >= 32 => u32::MAX,
            n => (1u32 << n) - 1,
        }
    }

    /// Whether `heap` is the small PCIe BAR window of a discrete GPU without
    /// resizable BAR: the device is a discrete GPU, the heap is DEVICE_LOCAL
    /// and at most [`SMALL_BAR_MAX_SIZE`], every type on it is HOST_VISIBLE,
    /// and another DEVICE_LOCAL heap holds the rest of VRAM. Such a heap is a
    /// few hundred MiB shared with the driver; vkcopy keeps staging out of it
    /// (the CPU reads it slowly, and the driver needs it).
    pub fn is_small_bar_heap(&self, heap: u32) -> bool {
        let Some(h) = self.heaps.get(heap as usize) else {
            return false;
        };
        let mut on_heap = self.types.iter().filter(|t| t.heap == heap).peekable();
        self.device_type == DeviceType::DiscreteGpu
            && h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL)
            && h.size <= SMALL_BAR_MAX_SIZE
            && on_heap.peek().is_some()
            && on_heap.all(|t| t.flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE))
            && self.heaps.iter().enumerate().any(|(j, o)| {
                j != heap as usize && o.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL)
            })
    }

    /// One line about a type, e.g. `type 3: HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1)`.
    pub fn describe_type(&self, index: u32) -> String {
        match self.types.get(index as usize) {
            Some(t) => format!(
                "type {index}: {} (heap {})",
                property_flags_name(t.flags),
                t.heap
            ),
            None => format!(
                "type {index}: not in the table ({} types)",
                self.types.len()
            ),
        }
    }
}

#[cfg(all(test, feature = "yaml"))]
mod tests;
