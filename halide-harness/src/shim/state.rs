//! What the shim saw of Halide since the case began, and the suite's questions
//! about it: the one process-wide record the entry points write (Halide's
//! runtime keeps its context in process globals, so the record is global too).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use halide_ffi::vkcopy::CopyCountsFn;

use vkcopy::Findings;
use vkcopy_engine::rt::{vk, DeviceType, MemoryTable, Role};
use vkcopy_engine::runtime::StepError;
use vkcopy_results::outcome::PlacementRecord;

/// The real loader, opened once.
pub(super) struct Loader {
    pub(super) lib: libloading::Library,
    pub(super) gipa: vk::PFN_vkGetInstanceProcAddr,
}

pub(super) fn loader() -> Option<&'static Loader> {
    static LOADER: OnceLock<Option<Loader>> = OnceLock::new();
    LOADER
        .get_or_init(|| {
            let name =
                std::env::var("HL_VK_LOADER_LIB").unwrap_or_else(|_| "libvulkan.so.1".into());
            // SAFETY: the Vulkan loader's initializers are safe to run.
            let lib = unsafe { libloading::Library::new(name) }.ok()?;
            // SAFETY: `vkGetInstanceProcAddr` has this type in every loader.
            let gipa =
                *unsafe { lib.get::<vk::PFN_vkGetInstanceProcAddr>(b"vkGetInstanceProcAddr\0") }
                    .ok()?;
            Some(Loader { lib, gipa })
        })
        .as_ref()
}

/// What a step asks of Halide: its buffer bindings are placements of the
/// step's role, and its `vkCmdCopyBuffer`s are copies of its direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    Malloc,
    Upload,
    Readback,
    DeviceToDevice,
    /// Device data written for a device fill or add: neither counted nor placed.
    Kernel,
}

impl StepKind {
    pub(super) fn role(self) -> Option<Role> {
        match self {
            StepKind::Malloc => Some(Role::Device),
            StepKind::Upload => Some(Role::Upload),
            StepKind::Readback => Some(Role::Readback),
            // No staging between two buffers' device memory.
            StepKind::DeviceToDevice => Some(Role::Device),
            StepKind::Kernel => None,
        }
    }
}

/// A memory allocation Halide made.
pub(super) struct Memory {
    /// The type Halide asked for (the table's, when one is simulated).
    pub(super) ty: u32,
    pub(super) size: u64,
}

/// What the shim saw since the case began, by concern.
#[derive(Default)]
pub(super) struct Seen {
    /// The simulated table and the real type behind each of its types.
    pub(super) table: Option<(MemoryTable, Vec<u32>)>,
    /// The real memory types, read once.
    pub(super) real_types: Vec<vkcopy_engine::rt::MemoryType>,
    pub(super) made: Made,
    pub(super) step: Step,
    pub(super) case: Tally,
    /// Halide's instance and device, which outlive cases.
    pub(super) instance: Instance,
}

/// What Halide holds: memory, buffers and mappings (leak accounting, the
/// table's heaps).
#[derive(Default)]
pub(super) struct Made {
    pub(super) memories: HashMap<u64, Memory>,
    /// Buffers: the type bits Halide was told they may use, and their size.
    pub(super) buffers: HashMap<u64, (u32, u64)>,
    /// Buffers: the size they were made with (a copy may not pass it).
    pub(super) buffer_sizes: HashMap<u64, u64>,
    /// Buffers made for both directions of transfer: Halide's device memory
    /// (`MemoryUsage::TransferSrcDst`), where its staging is made for one.
    pub(super) both_ways: std::collections::HashSet<u64>,
    pub(super) mappings: u64,
    pub(super) heap_used: Vec<u64>,
    /// Per heap, what `fill_heap` says other programs hold.
    pub(super) heap_taken: Vec<u64>,
}

/// The current step: what it asks of Halide and what Halide did in it.
#[derive(Default)]
pub(super) struct Step {
    pub(super) kind: Option<StepKind>,
    /// `vkCmdCopyBuffer`s and their bytes.
    pub(super) copies: u64,
    pub(super) bytes: u64,
    /// The placements that bound a buffer made for both directions, in order.
    pub(super) both_ways: Vec<usize>,
    /// Non-coherent memory mapped, and flushes and invalidates.
    pub(super) noncoherent_maps: u32,
    pub(super) flushes: u32,
    pub(super) invalidates: u32,
}

/// The case so far: its copies, placements and findings.
#[derive(Default)]
pub(super) struct Tally {
    /// Copies and bytes: to the device, to the host, device to device.
    pub(super) copies: [u64; 3],
    pub(super) bytes: [u64; 3],
    /// The library's own account of its copies, where it keeps one
    /// (`vkcopy_halide_copy_counts`), and its counts when the step began.
    pub(super) own_counts: Option<(CopyCountsFn, [u64; 6])>,
    pub(super) fallbacks: u32,
    pub(super) placements: Vec<PlacementRecord>,
    pub(super) findings: Vec<String>,
}

/// Halide's instance and device.
#[derive(Clone, Copy, Default)]
pub(super) struct Instance {
    pub(super) device_type: Option<DeviceType>,
    /// The validation layer on Halide's next instances (its findings go to
    /// [`FINDINGS`]), and the messenger of the live instance.
    pub(super) validation: bool,
    pub(super) messenger: Option<(u64, vk::DebugUtilsMessengerEXT)>,
    /// Devices Halide made and has not destroyed (its context outlives cases).
    pub(super) devices: u64,
}

/// Where the validation layer's findings on Halide's instances go: vkcopy's
/// messenger, into a sink of its own, since the layer may call it from inside
/// any Vulkan call, while the record above is locked.
pub(super) static FINDINGS: Findings = Findings::new(Vec::new());

pub(super) fn seen() -> MutexGuard<'static, Seen> {
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    SEEN.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Starts a case: `table` is presented to Halide from the next instance on.
/// `counts`, when the library has it, is its own account of its copies.
pub fn begin_case(table: Option<&MemoryTable>, validation: bool, counts: Option<CopyCountsFn>) {
    let mut s = seen();
    *s = Seen {
        instance: Instance {
            validation,
            ..s.instance
        },
        ..Seen::default()
    };
    s.case.own_counts = counts.map(|f| (f, [0; 6]));
    s.table = table.map(|t| (t.clone(), Vec::new()));
    s.made.heap_used = table.map_or(Vec::new(), |t| vec![0; t.heaps.len()]);
    s.made.heap_taken = s.made.heap_used.clone();
    FINDINGS.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// Counts of what Halide holds now, and of the copies it made.
pub struct Live {
    pub memories: u64,
    pub memory_bytes: u64,
    pub buffers: u64,
    pub mappings: u64,
    /// Copies and bytes to the device, to the host, device to device.
    pub copies: [u64; 3],
    pub bytes: [u64; 3],
    /// Devices Halide holds: 1 while its context is up.
    pub devices: u64,
}

pub fn live() -> Live {
    let s = seen();
    Live {
        memories: s.made.memories.len() as u64,
        memory_bytes: s.made.memories.values().map(|m| m.size).sum(),
        buffers: s.made.buffers.len() as u64,
        mappings: s.made.mappings,
        copies: s.case.copies,
        bytes: s.case.bytes,
        devices: s.instance.devices,
    }
}

/// Takes all but `leave` bytes of heap `heap` of the simulated table, as
/// vkcopy's `fill_heap` does; an error without a table.
pub fn fill_heap(heap: u32, leave: u64) -> Result<(), StepError> {
    let mut s = seen();
    let s = &mut *s;
    let Some((t, _)) = &s.table else {
        let why = "fill_heap on Halide's runtime needs a simulated table";
        return Err(StepError::Unsupported(why.into()));
    };
    let h = t
        .heaps
        .get(heap as usize)
        .ok_or_else(|| StepError::Unsupported(format!("fill_heap: no heap {heap}")))?;
    // As vkcopy's simulation: what other programs hold is set anew, so that
    // the runtime finds `leave` bytes beside what it holds itself.
    let size = h.budget.unwrap_or(h.size);
    let h = heap as usize;
    s.made.heap_taken[h] = size
        .saturating_sub(s.made.heap_used[h])
        .saturating_sub(leave);
    Ok(())
}

/// Starts a step of `kind` (None: nothing to place or count).
pub fn begin_step(kind: Option<StepKind>) {
    let mut s = seen();
    s.step.kind = kind;
    s.step.copies = 0;
    s.step.bytes = 0;
    s.case.fallbacks = 0;
    s.step.noncoherent_maps = 0;
    s.step.flushes = 0;
    s.step.invalidates = 0;
    s.step.both_ways.clear();
    if let Some((f, at)) = &mut s.case.own_counts {
        *at = read_counts(*f);
    }
}

fn read_counts(f: CopyCountsFn) -> [u64; 6] {
    let mut out = [0u64; 6];
    // SAFETY: the library's function writes six counts.
    unsafe { f(out.as_mut_ptr()) };
    out
}

/// The current step gave a buffer its device memory: the first buffer for
/// both directions bound in the step holds it (Halide allocates a buffer's
/// device memory before any staging), so its placement is the buffer's
/// `device` memory, whichever call made it.
pub fn claim_device() {
    let mut s = seen();
    let s = &mut *s;
    if let Some(&i) = s.step.both_ways.first() {
        s.case.placements[i].role = Role::Device.to_string();
    }
}

/// Ends a copy step: non-coherent memory the host read without an invalidate,
/// or wrote without a flush, is a finding.
pub fn end_step(step: &str) {
    let mut s = seen();
    let s = &mut *s;
    let direction = match s.step.kind {
        Some(StepKind::Upload) => Some(0),
        Some(StepKind::Readback) => Some(1),
        Some(StepKind::DeviceToDevice) => Some(2),
        _ => None,
    };
    match (s.case.own_counts, direction) {
        // The library's account of what the step copied, in every direction
        // (a copy the CPU makes into mapped memory records no command).
        (Some((f, at)), Some(_)) => {
            let now = read_counts(f);
            for d in 0..3 {
                s.case.copies[d] += now[2 * d] - at[2 * d];
                s.case.bytes[d] += now[2 * d + 1] - at[2 * d + 1];
            }
        }
        (None, Some(d)) if s.step.copies > 0 => {
            s.case.copies[d] += 1;
            s.case.bytes[d] += s.step.bytes;
        }
        _ => {}
    }
    if s.step.noncoherent_maps > 0 {
        let missing = match s.step.kind.and_then(StepKind::role) {
            Some(Role::Readback) if s.step.invalidates == 0 => {
                Some("vkInvalidateMappedMemoryRanges")
            }
            Some(Role::Upload) if s.step.flushes == 0 => Some("vkFlushMappedMemoryRanges"),
            _ => None,
        };
        if let Some(call) = missing {
            s.case.findings.push(format!(
                "{step}: mapped non-coherent memory without {call}: a real driver of this table may show stale data"
            ));
        }
    }
    s.step.kind = None;
}

pub fn placements() -> Vec<PlacementRecord> {
    seen().case.placements.clone()
}

/// What the validation layer said about Halide since the case began.
pub fn take_validation_messages() -> Vec<String> {
    std::mem::take(&mut *FINDINGS.lock().unwrap_or_else(|p| p.into_inner()))
}

pub fn take_findings() -> Vec<String> {
    std::mem::take(&mut seen().case.findings)
}

/// The device type Halide's instance reported, once it made one.
pub fn device_type() -> Option<DeviceType> {
    seen().instance.device_type
}

/// The table presented to Halide, for messages.
pub fn describe_type(ty: u32) -> String {
    match &seen().table {
        Some((t, _)) => t.describe_type(ty),
        None => format!("type {ty}"),
    }
}
