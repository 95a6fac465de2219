//! What a report says about the run besides its cases: the tool that wrote it
//! and the device's memory table.

use serde::{Deserialize, Serialize};

use vkcopy::memory::table::{heap_flags_name, property_flags_name};
use vkcopy::MemoryTable;

/// The program that wrote a report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolRecord {
    /// `vkcopy-suite`.
    pub name: String,
    /// The crate version.
    pub version: String,
    /// The git commit it was built from; empty when unknown.
    pub commit: String,
}

/// One memory heap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HeapRecord {
    pub size: u64,
    /// `DEVICE_LOCAL`, `MULTI_INSTANCE`, joined by `|`; `none` for none.
    pub flags: String,
}

/// One memory type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TypeRecord {
    pub heap: u32,
    /// `DEVICE_LOCAL|HOST_VISIBLE|...`; `none` for none.
    pub flags: String,
}

/// A device's memory heaps and types, in the driver's order: the indices that
/// placements' `memory_type` and `heap` refer to (without a simulated table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryRecord {
    /// The heaps, by index.
    pub heaps: Vec<HeapRecord>,
    /// The memory types, by index.
    pub types: Vec<TypeRecord>,
}

impl From<&MemoryTable> for MemoryRecord {
    fn from(t: &MemoryTable) -> Self {
        MemoryRecord {
            heaps: t
                .heaps
                .iter()
                .map(|h| HeapRecord {
                    size: h.size,
                    flags: heap_flags_name(h.flags),
                })
                .collect(),
            types: t
                .types
                .iter()
                .map(|ty| TypeRecord {
                    heap: ty.heap,
                    flags: property_flags_name(ty.flags),
                })
                .collect(),
        }
    }
}

/// `driverVersion` as its vendor encodes it: NVIDIA's 10.8.8.6 bits
/// (`580.159.4.0` is written `580.159.4`), Intel's 18.14 bits on Windows,
/// otherwise Vulkan's own 10.10.12 (Mesa and most others).
pub fn driver_version_name(vendor_id: u32, v: u32) -> String {
    const NVIDIA: u32 = 0x10de;
    const INTEL: u32 = 0x8086;
    match vendor_id {
        NVIDIA => {
            let (a, b, c, d) = (v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff, v & 0x3f);
            if d == 0 {
                format!("{a}.{b}.{c}")
            } else {
                format!("{a}.{b}.{c}.{d}")
            }
        }
        INTEL if cfg!(windows) => format!("{}.{}", v >> 14, v & 0x3fff),
        _ => format!("{}.{}.{}", v >> 22, (v >> 12) & 0x3ff, v & 0xfff),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_by_vendor() {
        // NVIDIA 580.159.04 as the H200's driver reports it.
        let nv = (580 << 22) | (159 << 14) | (4 << 6);
        assert_eq!(driver_version_name(0x10de, nv), "580.159.4");
        // Mesa 22.3.6 (lavapipe's vendor id is 0x10005).
        let mesa = (22 << 22) | (3 << 12) | 6;
        assert_eq!(driver_version_name(0x10005, mesa), "22.3.6");
    }
}
