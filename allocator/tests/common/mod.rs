//! What the integration tests share: a context on the default device, the
//! end-of-test checks, the runtime's counters by name, a buffer's round trip,
//! recorded tables of `cases/devices/`, and a simulated table of non-coherent
//! host memory.

#![allow(dead_code)]

use vkcopy::ash::vk;
use vkcopy::memory::table::{DeviceType, MemoryHeap, MemoryTable, MemoryType};
use vkcopy::{Buffer, Context, ContextOptions, Error};

/// Whether the Khronos validation layer is installed here and not turned off
/// (`VKCOPY_VALIDATION=0`).
pub fn validation_installed() -> bool {
    let off = std::env::var("VKCOPY_VALIDATION").is_ok_and(|v| v.trim() == "0");
    !off && std::path::Path::new(
        "/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json",
    )
    .exists()
}

/// A context on the default device, or None (with a note) where this machine has
/// no Vulkan; with `CI` set, a missing device fails the test instead. With
/// `VKCOPY_VALIDATION=1` (as `scripts/test.sh` sets it) the validation layer is on.
pub fn context(mut options: ContextOptions) -> Option<Context> {
    if std::env::var("VKCOPY_VALIDATION").is_ok_and(|v| v.trim() == "1") {
        options.validation = true;
    }
    match Context::new(options) {
        Ok(c) => Some(c),
        Err(e @ (Error::LoaderMissing(_) | Error::NoDevice))
            if std::env::var_os("CI").is_none() =>
        {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("cannot create a context: {e}"),
    }
}

/// Nothing leaked beyond what the context keeps, and no validation message.
pub fn assert_clean(ctx: &Context) {
    let leaks = ctx.leak_check();
    assert!(leaks.is_empty(), "{leaks}");
    let messages = ctx.take_validation_messages();
    assert!(messages.is_empty(), "validation messages: {messages:#?}");
}

/// A made-up table whose buffers may only use non-coherent cached memory, so that
/// uploads need flushes and readbacks need invalidates. Real drivers must also offer
/// a coherent host-visible type; this one hides it through memoryTypeBits.
pub fn noncoherent_only() -> MemoryTable {
    MemoryTable {
        name: "synthetic non-coherent".into(),
        device_type: DeviceType::IntegratedGpu,
        non_coherent_atom_size: 256,
        heaps: vec![MemoryHeap {
            size: 1 << 30,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
            budget: None,
        }],
        types: vec![
            MemoryType {
                heap: 0,
                flags: vk::MemoryPropertyFlags::DEVICE_LOCAL,
            },
            MemoryType {
                heap: 0,
                flags: vk::MemoryPropertyFlags::DEVICE_LOCAL
                    | vk::MemoryPropertyFlags::HOST_VISIBLE
                    | vk::MemoryPropertyFlags::HOST_COHERENT,
            },
            MemoryType {
                heap: 0,
                flags: vk::MemoryPropertyFlags::DEVICE_LOCAL
                    | vk::MemoryPropertyFlags::HOST_VISIBLE
                    | vk::MemoryPropertyFlags::HOST_CACHED,
            },
        ],
        buffer_memory_type_bits: 0b101,
        dedicated_from: None,
    }
}

/// The runtime's counter `name` (`Context::counters`).
pub fn counter(ctx: &Context, name: &str) -> u64 {
    ctx.counters()
        .iter()
        .find(|(k, _)| *k == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

/// The recorded table `cases/devices/<name>.yaml`.
pub fn table(name: &str) -> MemoryTable {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cases/devices")
        .join(format!("{name}.yaml"));
    MemoryTable::from_yaml_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Uploads `buf` filled with `f`, wipes its host, reads it back: the mismatches.
pub fn round_trip(ctx: &Context, buf: &mut Buffer, f: impl Fn(&[i64]) -> i64 + Copy) -> u64 {
    buf.fill(f).unwrap();
    ctx.copy_to_device(buf).unwrap();
    buf.fill(|_| -1).unwrap();
    buf.set_host_dirty(false);
    buf.set_device_dirty(true);
    ctx.copy_to_host(buf).unwrap();
    buf.compare(f, 1).unwrap().mismatches
}
