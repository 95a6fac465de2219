//! The case file format: serde types that mirror the YAML, with unknown fields
//! rejected. `cases/README.md` documents every field with an example.
//!
//! These types are only the parsed text; [`crate::plan`] checks names, shapes
//! and expressions and turns a case into a plan.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

/// One YAML case file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    /// What the case checks, in one or two sentences.
    pub about: String,
    /// The Halide test this case mirrors, e.g. `test/correctness/device_crop.cpp`.
    #[serde(default)]
    pub mirrors: Option<String>,
    /// What the device must offer; otherwise the case is skipped.
    #[serde(default)]
    pub requires: Requires,
    /// Run under this memory-type policy whatever `--policy` says (to pin down how
    /// an old policy behaved).
    #[serde(default)]
    pub policy: Option<Spanned<String>>,
    /// Present this recorded table (a name in `cases/devices/`) to the allocator.
    #[serde(default)]
    pub simulate_memory: Option<Spanned<String>>,
    /// Buffers by name.
    #[serde(default)]
    pub buffers: BTreeMap<String, Spanned<BufferSpec>>,
    /// Runtime steps, in order.
    #[serde(default)]
    pub steps: Vec<Spanned<Step>>,
    /// A memory-type selection check on a recorded table; needs no device.
    #[serde(default)]
    pub selection: Option<Spanned<Selection>>,
}

/// Device requirements of a case.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// Device types the case applies to: cpu, integrated_gpu, discrete_gpu,
    /// virtual_gpu, other, gpu (integrated or discrete), any. Default: any.
    #[serde(default)]
    pub device_types: Vec<String>,
}

/// A buffer declaration.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    /// Element type: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64.
    #[serde(rename = "type")]
    pub elem: String,
    /// Extent of each dimension, innermost first.
    pub extent: Vec<i64>,
    /// Min of each dimension; default 0.
    #[serde(default)]
    pub min: Option<Vec<i64>>,
    /// Stride of each dimension in elements; default dense.
    #[serde(default)]
    pub stride: Option<Vec<i64>>,
    /// Whether the buffer has host memory; default true.
    #[serde(default = "yes")]
    pub host: bool,
}

fn yes() -> bool {
    true
}

/// One step of a case. Each names the buffer it works on.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Writes `value` (an expression of the coordinates) to every element on the host;
    /// sets `host_dirty`.
    FillHost { buffer: String, value: String },
    /// Allocates device memory (zero-filled); dirty bits unchanged.
    DeviceMalloc(String),
    /// Frees device memory; clears `device_dirty`.
    DeviceFree(String),
    /// Halide's `copy_to_device`.
    CopyToDevice(String),
    /// Halide's `copy_to_host`.
    CopyToHost(String),
    /// Sets the dirty bits that are given.
    SetDirty {
        buffer: String,
        #[serde(default)]
        host: Option<bool>,
        #[serde(default)]
        device: Option<bool>,
    },
    /// Checks host elements against `value`: every element, or those in the box
    /// `min`..`min + extent` (clipped to the buffer).
    Expect {
        buffer: String,
        value: String,
        #[serde(default)]
        min: Option<Vec<i64>>,
        #[serde(default)]
        extent: Option<Vec<i64>>,
    },
    /// Makes `to`, a view of the box `min`..`min + extent` of `from`.
    Crop {
        from: String,
        to: String,
        min: Vec<i64>,
        extent: Vec<i64>,
    },
    /// Makes `to`, a view of `from` with dimension `dim` fixed at `pos`.
    Slice {
        from: String,
        to: String,
        dim: usize,
        pos: i64,
    },
    /// Makes `to`, a view of any shape over `from`'s memory: `from`'s element `at`
    /// is `to`'s element at its mins; `stride` in elements of `from`'s memory.
    View {
        from: String,
        to: String,
        at: Vec<i64>,
        extent: Vec<i64>,
        stride: Vec<i64>,
        #[serde(default)]
        min: Option<Vec<i64>>,
    },
    /// Drops a view (crop, slice or view_no_host); its memory stays with the others.
    ReleaseCrop(String),
    /// Drops a buffer: its host memory, and its device memory unless a view holds it.
    Release(String),
    /// Makes `to`, the same buffer without host memory (a raw `halide_buffer_t` copy
    /// with `host = null`).
    ViewNoHost { from: String, to: String },
    /// Halide's `halide_buffer_copy` from `from` to `to`'s device (`to_device: true`)
    /// or host memory.
    BufferCopy {
        from: String,
        to: String,
        to_device: bool,
    },
    /// Checks the dirty bits and whether a device allocation exists.
    ExpectFlags {
        buffer: String,
        #[serde(default)]
        host_dirty: Option<bool>,
        #[serde(default)]
        device_dirty: Option<bool>,
        #[serde(default)]
        has_device: Option<bool>,
    },
    /// Runs `step`, which must fail with the named error (`host_is_null`, ...).
    ExpectError {
        error: String,
        step: Box<Spanned<Step>>,
    },
    /// Computes on the host, as a CPU stage of a Halide pipeline does:
    /// `out(c) = inputs[0](c) + inputs[1](c) + ... + value(c)`, reading the inputs'
    /// host memory (an input that is device-dirty is an error: the stage would read
    /// stale data); sets `out`'s `host_dirty`.
    HostAdd {
        out: String,
        #[serde(default)]
        inputs: Vec<String>,
        #[serde(default)]
        value: Option<String>,
    },
    /// Times a copy (see [`MeasureSpec`]).
    Measure(MeasureSpec),
    /// Runs a compute kernel on the device (see [`KernelSpec`]).
    Kernel(KernelSpec),
    /// Simulation only: takes all of simulated heap `heap` but `leave` bytes.
    FillHeap {
        heap: u32,
        #[serde(default)]
        leave: u64,
    },
    /// Coalesces free regions and frees empty blocks (Halide's
    /// `halide_reuse_device_allocations(false)` path).
    ReleaseUnused,
    /// Halide's `device_release`: frees unused blocks and the kernel pipelines.
    DeviceRelease,
    /// Checks counters of the context (see `cases/README.md` for the names).
    ExpectCounters(BTreeMap<String, u64>),
    /// Turns GPU timestamps around copies on or off.
    Profiling(bool),
    /// Checks where the most recent allocation of a role landed.
    ExpectMemory {
        role: String,
        #[serde(default, rename = "type")]
        memory_type: Option<u32>,
        #[serde(default)]
        flags: Option<Vec<String>>,
        /// How many candidate types ran out of room before it.
        #[serde(default)]
        fallbacks: Option<u32>,
    },
}

impl Step {
    /// The step's name as written in YAML.
    pub fn name(&self) -> &'static str {
        match self {
            Step::FillHost { .. } => "fill_host",
            Step::DeviceMalloc(_) => "device_malloc",
            Step::DeviceFree(_) => "device_free",
            Step::CopyToDevice(_) => "copy_to_device",
            Step::CopyToHost(_) => "copy_to_host",
            Step::SetDirty { .. } => "set_dirty",
            Step::Expect { .. } => "expect",
            Step::Crop { .. } => "crop",
            Step::Slice { .. } => "slice",
            Step::View { .. } => "view",
            Step::ReleaseCrop(_) => "release_crop",
            Step::Release(_) => "release",
            Step::ViewNoHost { .. } => "view_no_host",
            Step::BufferCopy { .. } => "buffer_copy",
            Step::ExpectFlags { .. } => "expect_flags",
            Step::ExpectError { .. } => "expect_error",
            Step::ExpectMemory { .. } => "expect_memory",
            Step::ExpectCounters(_) => "expect_counters",
            Step::Kernel(_) => "kernel",
            Step::Measure(_) => "measure",
            Step::HostAdd { .. } => "host_add",
            Step::FillHeap { .. } => "fill_heap",
            Step::ReleaseUnused => "release_unused",
            Step::DeviceRelease => "device_release",
            Step::Profiling(_) => "profiling",
        }
    }
}

/// A selection case: the type each policy must pick on a recorded table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// A file in `cases/devices/`, without `.yaml`.
    pub table: String,
    pub expect: Vec<Spanned<SelectionExpect>>,
}

/// One request and the memory type index each named policy must pick.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionExpect {
    /// `readback`, `upload`, `device`, or a raw `visibility/caching` pair.
    pub request: String,
    #[serde(default, rename = "halide-legacy")]
    pub halide_legacy: Option<u32>,
    #[serde(default)]
    pub halide: Option<u32>,
    #[serde(default)]
    pub vkcopy: Option<u32>,
}

/// A compute kernel: exactly one of `fill`, `add`, `sum` names the output.
///
/// - `fill: out, value: EXPR`: out = EXPR of the coordinates;
/// - `add: out, constant: C`: out = out + C (in place);
/// - `add: out, inputs: [a, b], constant: C`: out = a + b + C;
/// - `sum: out, input: g, dim: D`: out = g summed over dimension D.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    #[serde(default)]
    pub fill: Option<String>,
    #[serde(default)]
    pub add: Option<String>,
    #[serde(default)]
    pub sum: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default)]
    pub constant: i64,
    #[serde(default)]
    pub input: Option<String>,
    #[serde(default)]
    pub dim: Option<usize>,
}

/// A timed copy: `copy_to_host: g`, `copy_to_device: g`, or a device-to-device
/// `buffer_copy` from `from` to `to`, repeated; the best time counts. Thresholds
/// apply to the named device types only (`cpu`, `integrated_gpu`, `discrete_gpu`,
/// `virtual_gpu`, `other`, `gpu`, `any`), so the case runs everywhere and is held to
/// a speed only where one is expected.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureSpec {
    #[serde(default)]
    pub copy_to_host: Option<String>,
    #[serde(default)]
    pub copy_to_device: Option<String>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    /// Runs; the fastest counts. Default 3.
    #[serde(default)]
    pub repeat: Option<u32>,
    /// Lowest acceptable GB/s (1e9 bytes/s) by device type.
    #[serde(default)]
    pub min_gbps: BTreeMap<String, f64>,
    /// Highest acceptable microseconds per copy by device type.
    #[serde(default)]
    pub max_us: BTreeMap<String, f64>,
}
