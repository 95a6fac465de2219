use ash::vk;

use super::on::{wants_dedicated, Backing};
use crate::memory::table::{DeviceType, MemoryHeap, MemoryTable, MemoryType};

const DL: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::DEVICE_LOCAL;
const HV: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::HOST_VISIBLE;
const HC: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::HOST_COHERENT;
const CACHED: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::HOST_CACHED;

fn table(types: &[vk::MemoryPropertyFlags], bits: u32) -> MemoryTable {
    MemoryTable {
        name: "t".into(),
        device_type: DeviceType::DiscreteGpu,
        non_coherent_atom_size: 64,
        heaps: vec![MemoryHeap {
            size: 1 << 30,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
            budget: None,
        }],
        types: types
            .iter()
            .map(|&flags| MemoryType { heap: 0, flags })
            .collect(),
        buffer_memory_type_bits: bits,
        dedicated_from: None,
    }
}

/// A discrete GPU: device-local, host coherent, host cached, and a BAR type.
fn real() -> MemoryTable {
    table(&[DL, HV | HC, HV | HC | CACHED, DL | HV | HC], 0b1111)
}

/// The real type behind each type of `sim`.
fn backing(real: &MemoryTable, sim: &MemoryTable) -> Vec<u32> {
    let b = Backing::new(real, sim);
    (0..sim.types.len() as u32)
        .map(|t| b.real_type(t))
        .collect()
}

#[test]
fn backing_is_the_first_real_type_with_the_flags() {
    let sim = table(
        &[
            DL,
            HV | HC,
            HV | CACHED,
            DL | HV | HC,
            HV | HC | CACHED,
            // Flags outside the four that matter are ignored.
            DL | vk::MemoryPropertyFlags::LAZILY_ALLOCATED,
            vk::MemoryPropertyFlags::empty(),
        ],
        0b111_1111,
    );
    assert_eq!(backing(&real(), &sim), [0, 1, 2, 3, 2, 0, 0]);
}

#[test]
fn backing_falls_back_by_host_visibility() {
    // No real type is device-local and cached: a host-visible one takes the first
    // host-visible coherent type, a device-only one the first type.
    let sim = table(&[DL | HV | CACHED, DL | CACHED], 0b11);
    assert_eq!(backing(&real(), &sim), [1, 0]);
    // No host-visible coherent real type at all: type 0.
    let poor = table(&[DL, DL | HV], 0b11);
    let sim = table(&[DL, HV | HC, DL | HV], 0b111);
    assert_eq!(backing(&poor, &sim), [0, 0, 1]);
}

#[test]
fn type_bits_drop_types_whose_backing_buffers_cannot_use() {
    let sim = table(&[DL, HV | HC, HV | HC | CACHED, DL | HV | HC], 0b1011);
    assert_eq!(backing(&real(), &sim), [0, 1, 2, 3]);
    let b = Backing::new(&real(), &sim);
    assert_eq!(b.type_bits(&sim, 0b1111), 0b1011);
    // Real type 1 unusable: simulated type 1 goes; type 2 was never in the bits.
    assert_eq!(b.type_bits(&sim, 0b1101), 0b1001);
    assert_eq!(b.type_bits(&sim, 0b0001), 0b0001);
    assert_eq!(b.type_bits(&sim, 0), 0);
}

#[test]
fn the_table_decides_dedicated_blocks_not_the_driver() {
    // No dedicated_from: only a requirement of the driver gives a block of its own.
    assert!(!wants_dedicated(None, false, 50_000_000));
    assert!(wants_dedicated(None, true, 64));
    // From dedicated_from on, every buffer gets one.
    assert!(wants_dedicated(Some(1 << 20), false, 50_000_000));
    assert!(wants_dedicated(Some(1 << 20), false, 1 << 20));
    assert!(!wants_dedicated(Some(1 << 30), false, 50_000_000));
    assert!(wants_dedicated(Some(1 << 30), true, 64));
}
