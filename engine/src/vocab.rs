//! The names a case may write in a string field (element types, device types,
//! policies, roles, memory flags, error and counter names), each with what it
//! means. The planner checks names against these lists and the JSON Schema
//! (`vkcopy-suite schema`) lists them, so editors and `check` agree.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Value};

use crate::names;
use crate::requires::DeviceReq;
use crate::rt::{
    counter_names, ElemType, MappedCopy, MemoryCaching, MemoryUsage, MemoryVisibility, Policy,
    Role, SmallCopyQueue,
};

/// Errors `expect_error` may name: the runtime's errors that a case can provoke.
pub const EXPECTABLE_ERRORS: &[(&str, &str)] = &[
    (
        "host_is_null",
        "the buffer has no host memory where the step needs it",
    ),
    (
        "both_dirty",
        "host and device memory are both dirty: neither side is valid",
    ),
    (
        "no_device_allocation",
        "the step needs device memory the buffer does not have",
    ),
    (
        "device_malloc_failed",
        "no memory type had room for the device allocation",
    ),
    (
        "incompatible_buffers",
        "the two buffers of a copy differ in element type or dimensions",
    ),
    (
        "bad_dimensions",
        "a shape, crop or slice does not fit the buffer",
    ),
    (
        "device_crop_failed",
        "a crop or slice of device memory could not be made",
    ),
    (
        "unsupported_type",
        "a kernel on an element type the device cannot compute",
    ),
    (
        "no_device_interface",
        "Halide's generic device layer: the buffer has no device interface to ask",
    ),
    (
        "copy_to_host_failed",
        "Halide's generic device layer: any failure of a device interface's copy to host",
    ),
];

/// Whether `name` is an error `expect_error` may name.
pub fn is_expectable(name: &str) -> bool {
    EXPECTABLE_ERRORS.iter().any(|(n, _)| *n == name)
}

/// The names of [`EXPECTABLE_ERRORS`], for messages.
pub fn expectable_names() -> Vec<&'static str> {
    EXPECTABLE_ERRORS.iter().map(|(n, _)| *n).collect()
}

/// Memory property flags `expect_memory` may name; all of them parse as flags.
pub const MEMORY_FLAGS: &[(&str, &str)] = &[
    (
        "DEVICE_LOCAL",
        "memory local to the device (VRAM on a discrete GPU)",
    ),
    ("HOST_VISIBLE", "the host can map it"),
    (
        "HOST_COHERENT",
        "host writes and device writes are visible without flushes",
    ),
    ("HOST_CACHED", "the host caches it: fast host reads"),
    (
        "LAZILY_ALLOCATED",
        "backed only as the device touches it (tile memory)",
    ),
    ("PROTECTED", "protected memory"),
    ("DEVICE_COHERENT_AMD", "AMD: device accesses are coherent"),
    ("DEVICE_UNCACHED_AMD", "AMD: not cached on the device"),
    ("RDMA_CAPABLE_NV", "NVIDIA: remote devices can access it"),
];

/// What each element type is.
fn elem_description(t: ElemType) -> String {
    let name = t.name();
    let bits = &name[1..];
    match name.as_bytes()[0] {
        b'i' => format!("{bits}-bit signed integer"),
        b'u' => format!("{bits}-bit unsigned integer"),
        _ => format!("{bits}-bit float"),
    }
}

fn device_description(d: DeviceReq) -> &'static str {
    match d {
        DeviceReq::Any => "any device",
        DeviceReq::Gpu => "an integrated or discrete GPU",
        DeviceReq::Cpu => "a CPU implementation such as lavapipe or SwiftShader",
        DeviceReq::IntegratedGpu => "a GPU that shares the host's memory",
        DeviceReq::DiscreteGpu => "a GPU with memory of its own",
        DeviceReq::VirtualGpu => "a GPU of a virtual machine",
        DeviceReq::Other => "a device of no other type",
    }
}

fn policy_description(p: Policy) -> &'static str {
    match p {
        Policy::HalideLegacy => "Halide before the readback fix: readback prefers DEVICE_LOCAL",
        Policy::Halide => "Halide with the readback fix",
        Policy::Vkcopy => "vkcopy's own rules (the default)",
    }
}

fn small_copy_queue_description(q: SmallCopyQueue) -> &'static str {
    match q {
        SmallCopyQueue::Auto => "the fastest queue for the copy's path and size class (the compute queue, the transfer family's, or one of each further transfer-only family), measured on the class's first copy (the default)",
        SmallCopyQueue::Compute => "the queue of blocking work and kernels",
        SmallCopyQueue::Other => "a second queue (the transfer family's where there is one; else submissions of their own to the one queue)",
    }
}

fn mapped_copy_description(m: MappedCopy) -> &'static str {
    match m {
        MappedCopy::Auto => "the faster of the CPU's copy and the GPU's, measured per size class under 4 MiB (the default)",
        MappedCopy::Never => "every such copy goes through the GPU",
        MappedCopy::Always => "the CPU makes every such copy into or out of host-visible device memory",
    }
}

fn role_description(r: Role) -> &'static str {
    match r {
        Role::Readback => "staging for device-to-host copies: the device writes, the host reads",
        Role::Upload => "staging for host-to-device copies: the host writes, the device reads",
        Role::Device => "a buffer's device memory: only the device uses it",
        Role::DeviceMapped => {
            "a small buffer's device memory, host-visible where the device has such memory off a small BAR heap: the host may write its uploads and read its readbacks"
        }
    }
}

/// What a counter of `expect_counters` counts.
fn counter_description(name: &str) -> String {
    let path = |p: &str| {
        let mapped = match p.starts_with("to_host") {
            true => ", read by the CPU out of host-visible device memory (streaming loads)",
            false => ", written by the CPU into host-visible device memory",
        };
        let routes = [
            ("_imported", ", straight to or from imported host memory"),
            ("_ring", ", through the staging ring"),
            ("_staged", ", through a staging buffer of their own"),
            ("_mapped", mapped),
            ("_transfer", ", by vkCmdCopyBuffer"),
            ("_shader", ", by the copy shader"),
        ];
        match routes.iter().find(|(r, _)| p.ends_with(r)) {
            Some((r, how)) => format!("{}{how}", p[..p.len() - r.len()].replace('_', " ")),
            None => p.replace('_', " "),
        }
    };
    if let Some(p) = name.strip_prefix("copies_") {
        return format!("copies {}", path(p));
    }
    if let Some(p) = name.strip_prefix("bytes_") {
        return format!("bytes copied {}", path(p));
    }
    match name {
        "device_mallocs" => "device regions made, staging included".into(),
        "device_frees" => "device regions freed, staging included".into(),
        "live_regions" => {
            "device regions of buffers alive now (the context's staging chunks not counted)".into()
        }
        "staging_regions" => {
            "staging chunks the context keeps now (release_unused frees them)".into()
        }
        "live_buffers" => "VkBuffers alive now".into(),
        "live_device_memories" => "VkDeviceMemory objects alive now".into(),
        "live_device_memory_bytes" => "bytes of VkDeviceMemory alive now".into(),
        "live_mappings" => "mapped memory ranges alive now".into(),
        "blocks" => "allocator blocks held".into(),
        "block_bytes" => "bytes of the allocator blocks held".into(),
        other => format!("the context counter {other}"),
    }
}

/// A string schema that lists `values`, each with its description: `enum` for
/// editors' completion, `oneOf` of `const`s for the descriptions.
fn names_schema(description: &str, values: &[(String, String)]) -> Schema {
    let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
    let one_of: Vec<Value> = values
        .iter()
        .map(|(n, d)| json!({ "const": n, "description": d }))
        .collect();
    json_schema!({
        "type": "string",
        "description": description,
        "enum": names,
        "oneOf": one_of,
    })
}

fn owned<'a>(v: impl IntoIterator<Item = (&'a str, String)>) -> Vec<(String, String)> {
    v.into_iter().map(|(n, d)| (n.to_owned(), d)).collect()
}

/// Defines a marker type whose schema is a named list of values.
macro_rules! names_type {
    ($ty:ident, $name:literal, $description:literal, $values:expr) => {
        #[doc = $description]
        pub struct $ty;

        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                names_schema($description, &$values)
            }
        }
    };
}

names_type!(
    ElemName,
    "ElemType",
    "An element type.",
    owned(ElemType::ALL.map(|t| (t.name(), elem_description(t))))
);

names_type!(
    PolicyName,
    "Policy",
    "A memory-type selection policy.",
    owned(Policy::ALL.map(|p| (p.name(), policy_description(p).to_owned())))
);

names_type!(
    MappedCopyName,
    "MappedCopy",
    "Whether small uploads (or readbacks) are made by the CPU in host-visible device memory: its writes, or its streaming loads.",
    owned(MappedCopy::ALL.map(|m| (m.name(), mapped_copy_description(m).to_owned())))
);

names_type!(
    SmallCopyQueueName,
    "SmallCopyQueue",
    "Which queue takes small copies by the GPU (under 1 MiB).",
    owned(SmallCopyQueue::ALL.map(|q| (q.name(), small_copy_queue_description(q).to_owned())))
);

names_type!(
    RoleName,
    "Role",
    "What the runtime allocates memory for.",
    owned(Role::ALL.map(|r| (r.name(), role_description(r).to_owned())))
);

names_type!(
    ErrorName,
    "ErrorName",
    "A runtime error a case can provoke.",
    owned(EXPECTABLE_ERRORS.iter().map(|(n, d)| (*n, (*d).to_owned())))
);

names_type!(
    FlagName,
    "MemoryFlag",
    "A Vulkan memory property flag, without the VK_MEMORY_PROPERTY_ prefix.",
    owned(MEMORY_FLAGS.iter().map(|(n, d)| (*n, (*d).to_owned())))
);

names_type!(
    CounterName,
    "CounterName",
    "A counter of the context.",
    owned(counter_names().iter().map(|n| (*n, counter_description(n))))
);

names_type!(
    DeviceTypeName,
    "DeviceType",
    "A device type; a device of another type skips the case or the threshold.",
    device_type_values()
);

/// Every name `DeviceReq` parses, aliases included (`discrete_gpu` for
/// `discrete-gpu`).
fn device_type_values() -> Vec<(String, String)> {
    names::variants::<DeviceReq>()
        .iter()
        .filter_map(|n| DeviceReq::parse(n).map(|d| (*n, d)))
        .map(|(n, d)| {
            let desc = if n == d.name() {
                device_description(d).to_owned()
            } else {
                format!("the same as `{}`", d.name())
            };
            (n.to_owned(), desc)
        })
        .collect()
}

/// The name of a buffer or view.
pub struct BufferName;

impl JsonSchema for BufferName {
    fn schema_name() -> Cow<'static, str> {
        "BufferName".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A buffer or view of the case; inside a repeat, `{expr}` is the value of an expression of loop variables (`\"a{t - 1}\"`).",
        })
    }
}

/// A map from names of `K` to values of `V`; the names' meanings are `K`'s.
fn keyed<K: JsonSchema, V: JsonSchema>(g: &mut SchemaGenerator, description: &str) -> Schema {
    let keys = g.subschema_for::<K>();
    let values = g.subschema_for::<V>();
    json_schema!({
        "type": "object",
        "description": description,
        "propertyNames": keys,
        "additionalProperties": values,
    })
}

/// Thresholds by device type (`min_gbps`, `max_us`).
pub struct DeviceLimits;

impl JsonSchema for DeviceLimits {
    fn schema_name() -> Cow<'static, str> {
        "DeviceLimits".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let mut s = keyed::<DeviceTypeName, f64>(
            g,
            "A threshold per device type; devices of other types are not held to one.",
        );
        s.insert(
            "additionalProperties".into(),
            json!({ "type": "number", "minimum": 0 }),
        );
        s
    }
}

/// A request of a selection case: a role, or a `visibility/caching` pair.
pub struct RequestName;

impl JsonSchema for RequestName {
    fn schema_name() -> Cow<'static, str> {
        "Request".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let visibility = MemoryVisibility::ALL.map(|v| v.name()).join("|");
        let caching = MemoryCaching::ALL.map(|c| c.name()).join("|");
        let usage = MemoryUsage::ALL.map(|u| u.name()).join("|");
        let role = generator.subschema_for::<RoleName>();
        json_schema!({
            "description": "A runtime role (each policy's own request for it) or a raw `visibility/caching` pair such as `device_to_host/cached_coherent`.",
            "anyOf": [
                role,
                {
                    "type": "string",
                    "description": format!("`visibility/caching` or `visibility/caching/usage`: visibility one of {visibility}; caching one of {caching}; usage one of {usage}."),
                    "pattern": format!("^({visibility})/({caching})(/({usage}))?$"),
                },
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rt::parse_property_flag;

    #[test]
    fn listed_names_are_the_parsers() {
        assert!(MEMORY_FLAGS
            .iter()
            .all(|(n, _)| parse_property_flag(n).is_some()));
        let elems = ElemName::json_schema(&mut SchemaGenerator::default());
        let listed = elems.get("enum").unwrap().as_array().unwrap();
        assert_eq!(listed.len(), 10);
        assert_eq!(listed[0], "i8");
        assert_eq!(elem_description(ElemType::U16), "16-bit unsigned integer");
        let devices = device_type_values();
        assert!(devices.iter().any(|(n, _)| n == "discrete-gpu"));
        assert!(devices
            .iter()
            .any(|(n, d)| n == "discrete_gpu" && d == "the same as `discrete-gpu`"));
        assert_eq!(
            counter_description("bytes_host_to_device"),
            "bytes copied host to device"
        );
    }
}
