//! The case file format: serde types that mirror the YAML, with unknown fields
//! rejected. `cases/README.md` documents every field with an example; the steps
//! are in [`crate::steps`], the selection form in [`crate::selection`].
//!
//! These types are only the parsed text; [`crate::plan`] checks names, shapes
//! and expressions and turns a case into a plan.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::selection::Selection;
use crate::steps::Step;
use crate::vocab::{DeviceTypeName, ElemName, MappedCopyName, PolicyName, SmallCopyQueueName};

/// One YAML case file: a runtime case (`buffers` and `steps`) or a selection
/// case (`selection`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "vkcopy-suite case", extend("required" = ["about"]))]
pub struct CaseFile {
    /// What the case checks, in one or two sentences.
    // Required: planning says so, with the steps' errors (`plan::parse_one`).
    #[serde(default)]
    #[schemars(with = "String")]
    pub about: Option<String>,
    /// The Halide test this case mirrors, e.g. `test/correctness/device_crop.cpp`.
    #[serde(default)]
    pub mirrors: Option<String>,
    /// Labels to select cases by (`vkcopy-suite run --tags perf,slow`): lower case
    /// letters, digits, `-` and `_`.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub tags: Vec<Spanned<String>>,
    /// Run the case in every shard of a sharded run (`--shard K/N`) and in every
    /// sample (`--fraction N`), so that each shard's report has it: a smoke case.
    #[serde(default)]
    pub every_shard: bool,
    /// The longest the case may run, in seconds, before the runner kills it as
    /// `timeout`; default `vkcopy-suite run --timeout` (120).
    #[serde(default)]
    #[schemars(with = "Option<f64>", range(min = 0.001))]
    pub timeout: Option<Spanned<f64>>,
    /// What the device must offer; otherwise the case is skipped.
    #[serde(default)]
    pub requires: Requires,
    /// Run under this memory-type policy whatever `--policy` says (to pin down how
    /// an old policy behaved).
    #[serde(default)]
    #[schemars(with = "Option<PolicyName>")]
    pub policy: Option<Spanned<String>>,
    /// Present this recorded table (a name in `cases/devices/`) to the allocator.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub simulate_memory: Option<Spanned<String>>,
    /// Whether small uploads are written by the CPU into host-visible device
    /// memory, whatever the environment says (`auto` is the runtime's default);
    /// `auto` or `always` skip the case where the device has no such memory.
    #[serde(default)]
    #[schemars(with = "Option<MappedCopyName>")]
    pub mapped_upload: Option<Spanned<String>>,
    /// Whether small readbacks are read by the CPU out of host-visible device
    /// memory, whatever the environment says (`auto` is the runtime's
    /// default); `auto` or `always` skip the case where the device has no such
    /// memory.
    #[serde(default)]
    #[schemars(with = "Option<MappedCopyName>")]
    pub mapped_readback: Option<Spanned<String>>,
    /// Which queue takes small copies by the GPU, whatever the environment
    /// says (`auto` is the runtime's default).
    #[serde(default)]
    #[schemars(with = "Option<SmallCopyQueueName>")]
    pub small_copy_queue: Option<Spanned<String>>,
    /// Buffers by name; a buffer starts as host memory of zeros, not dirty.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, BufferSpec>")]
    pub buffers: BTreeMap<String, Spanned<BufferSpec>>,
    /// Runtime steps, in order.
    #[serde(default)]
    #[schemars(with = "Vec<Step>")]
    pub steps: Vec<Spanned<Step>>,
    /// A memory-type selection check on a recorded table; needs no device.
    #[serde(default)]
    #[schemars(with = "Option<Selection>")]
    pub selection: Option<Spanned<Selection>>,
}

/// Device requirements of a case.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// Device types the case applies to: cpu, integrated-gpu, discrete-gpu,
    /// virtual-gpu, other, gpu (integrated or discrete), any. Default: any.
    #[serde(default)]
    #[schemars(with = "Vec<DeviceTypeName>")]
    pub device_types: Vec<Spanned<String>>,
}

/// A buffer declaration.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    /// Element type: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64.
    #[serde(rename = "type")]
    #[schemars(with = "ElemName")]
    pub elem: String,
    /// Extent of each dimension, innermost first; 1 to 16 dimensions.
    #[schemars(length(min = 1, max = 16))]
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
    /// The host memory is the caller's (a `Vec`), its first byte this many bytes
    /// past a page boundary (0 to 4095; glibc's `malloc` gives large blocks at 16).
    /// Default: host memory that vkcopy allocates, page-aligned.
    #[serde(default)]
    #[schemars(range(max = 4095))]
    pub host_offset: Option<u64>,
}

fn yes() -> bool {
    true
}
