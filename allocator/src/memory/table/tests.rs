use super::*;
use std::path::Path;
use vk::MemoryPropertyFlags as F;

fn devices_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases/devices")
}

fn device(name: &str) -> MemoryTable {
    let path = devices_dir().join(format!("{name}.yaml"));
    MemoryTable::from_yaml_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// A valid table to break in the error tests; `types` replaces the types list.
fn with_types(types: &str) -> String {
    format!(
        "name: test\n\
         device_type: discrete-gpu\n\
         non_coherent_atom_size: 64\n\
         heaps:\n  - {{ size: 1024, flags: [DEVICE_LOCAL] }}\n  - {{ size: 2048, flags: [] }}\n\
         types:\n{types}"
    )
}

fn error(src: &str) -> String {
    MemoryTable::from_yaml_str(src, "bad.yaml")
        .expect_err("the table should be rejected")
        .to_string()
}

#[test]
fn every_recorded_table_parses_and_validates() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(devices_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let table = MemoryTable::from_yaml_file(&path).unwrap_or_else(|e| panic!("{e}"));
            table.validate("again").unwrap();
            names.push(path.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    names.sort();
    for expected in [
        "nvidia-h200",
        "nvidia-rtx4070-no-rebar",
        "nvidia-rtx2070-no-rebar",
        "lavapipe",
        "mali-like",
        "intel-igpu-non-llc-i915",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing: {names:?}"
        );
    }
    assert_eq!(names.len(), 19, "{names:?}");
}

#[test]
fn h200_table_is_the_measured_one() {
    let t = device("nvidia-h200");
    assert_eq!(t.name, "NVIDIA H200");
    assert_eq!(t.device_type, DeviceType::DiscreteGpu);
    assert_eq!(t.non_coherent_atom_size, 64);
    assert_eq!(
        t.heaps,
        vec![
            MemoryHeap {
                size: 150754820096,
                flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
                budget: None,
            },
            MemoryHeap {
                size: 101360599040,
                flags: vk::MemoryHeapFlags::empty(),
                budget: None,
            },
        ]
    );
    let flags: Vec<(u32, F)> = t.types.iter().map(|t| (t.heap, t.flags)).collect();
    assert_eq!(
        flags,
        vec![
            (1, F::empty()),
            (0, F::DEVICE_LOCAL),
            (1, F::HOST_VISIBLE | F::HOST_COHERENT),
            (1, F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED),
            (0, F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT),
        ]
    );
    assert_eq!(t.buffer_memory_type_bits, 0x1f);
}

#[test]
fn buffer_bits_default_to_every_type_and_accept_hex_strings() {
    let base = with_types(
        "  - { heap: 0, flags: [DEVICE_LOCAL] }\n  - { heap: 1, flags: [HOST_VISIBLE, HOST_COHERENT] }\n",
    );
    assert_eq!(
        MemoryTable::from_yaml_str(&base, "t")
            .unwrap()
            .buffer_memory_type_bits,
        0b11
    );
    for bits in ["0x2", "\"0x2\"", "2", "\"2\""] {
        let src = format!("{base}buffer_memory_type_bits: {bits}\n");
        let t = MemoryTable::from_yaml_str(&src, "t").unwrap_or_else(|e| panic!("{bits}: {e}"));
        assert_eq!(t.buffer_memory_type_bits, 0b10, "{bits}");
    }
    let src = format!("{base}buffer_memory_type_bits: \"0xzz\"\n");
    assert_eq!(
        error(&src),
        "bad.yaml:10:26: `0xzz` is not a 32-bit mask such as 0x1f"
    );
}

#[test]
fn unknown_flag_is_located_and_lists_valid_names() {
    let src = with_types(
        "  - { heap: 0, flags: [DEVICE_LOCAL] }\n  - { heap: 1, flags: [HOST_VISIBLE, HOST_CACHE] }\n",
    );
    assert_eq!(
        error(&src),
        "bad.yaml:9:38: types[1].flags: unknown memory property flag `HOST_CACHE`; valid names: \
         DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT, HOST_CACHED, LAZILY_ALLOCATED, PROTECTED, \
         DEVICE_COHERENT_AMD, DEVICE_UNCACHED_AMD, RDMA_CAPABLE_NV"
    );
    let src = with_types("  - { heap: 0, flags: [DEVICE_LOCAL] }\n")
        .replace("flags: []", "flags: [HOST]");
    assert_eq!(
        error(&src),
        "bad.yaml:6:27: heaps[1].flags: unknown heap flag `HOST`; valid names: DEVICE_LOCAL, MULTI_INSTANCE"
    );
}

#[test]
fn heap_index_out_of_range_is_located() {
    let src = with_types(
        "  - { heap: 0, flags: [DEVICE_LOCAL] }\n  - { heap: 5, flags: [HOST_VISIBLE, HOST_COHERENT] }\n",
    );
    assert_eq!(
        error(&src),
        "bad.yaml:9:13: types[1].heap = 5 but the table has 2 heaps"
    );
    // The same check without a file has no position.
    let mut t = device("nvidia-h200");
    t.types[3].heap = 2;
    assert_eq!(
        t.validate("h200").unwrap_err().to_string(),
        "h200: types[3].heap = 2 but the table has 2 heaps"
    );
}

#[test]
fn missing_host_visible_coherent_type_is_located_at_the_list() {
    let src = with_types(
        "  - { heap: 0, flags: [DEVICE_LOCAL] }\n  - { heap: 1, flags: [HOST_VISIBLE, HOST_CACHED] }\n",
    );
    assert_eq!(
        error(&src),
        "bad.yaml:8:3: types: no HOST_VISIBLE|HOST_COHERENT type; Vulkan requires at least one"
    );
}

#[test]
fn unknown_fields_are_located_and_name_the_entry() {
    let src = with_types(
        "  - { heap: 0, flags: [DEVICE_LOCAL] }\n  - { hep: 1, flags: [HOST_VISIBLE, HOST_COHERENT] }\n",
    );
    assert_eq!(
        error(&src),
        "bad.yaml:9:7: types[1]: unknown field `hep`, expected one of heap, flags"
    );
    let src = with_types("  - { heap: 0, flags: [DEVICE_LOCAL] }\n").replace(
        "{ size: 2048, flags: [] }",
        "{ size: 2048, flags: [], speed: 3 }",
    );
    assert_eq!(
        error(&src),
        "bad.yaml:6:30: heaps[1]: unknown field `speed`, expected one of size, flags, budget"
    );
    let src = format!(
        "{}vram: 12\n",
        with_types("  - { heap: 0, flags: [DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT] }\n")
    );
    let e = error(&src);
    assert!(
        e.starts_with("bad.yaml:9:1: unknown field `vram`, expected one of name,"),
        "{e}"
    );
    // A wrong value inside an entry names the entry too.
    let src = with_types("  - { heap: -1, flags: [DEVICE_LOCAL] }\n");
    let e = error(&src);
    assert!(e.starts_with("bad.yaml:8:13: types[0]: "), "{e}");
}

#[test]
fn spec_rules_are_enforced() {
    let dl = "  - { heap: 0, flags: [DEVICE_LOCAL] }\n";
    let hv = "  - { heap: 1, flags: [HOST_VISIBLE, HOST_COHERENT] }\n";
    let cases = [
        (
            format!("{dl}  - {{ heap: 1, flags: [DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT] }}\n"),
            "bad.yaml:9:5: types[1] is DEVICE_LOCAL but its heap 1 is not",
        ),
        (
            format!("  - {{ heap: 0, flags: [] }}\n{hv}"),
            "bad.yaml:8:5: types[0] is on DEVICE_LOCAL heap 0 but is not DEVICE_LOCAL",
        ),
        (
            format!("{dl}{hv}  - {{ heap: 0, flags: [DEVICE_LOCAL, LAZILY_ALLOCATED, HOST_VISIBLE] }}\n"),
            "bad.yaml:10:5: types[2] is both LAZILY_ALLOCATED and HOST_VISIBLE",
        ),
        (
            format!("{dl}{hv}  - {{ heap: 1, flags: [PROTECTED, HOST_COHERENT] }}\n"),
            "bad.yaml:10:5: types[2] is PROTECTED and HOST_COHERENT",
        ),
        (
            hv.to_string(),
            "bad.yaml:8:3: types: no DEVICE_LOCAL type",
        ),
        (
            format!("{dl}  - {{ heap: 1, flags: [HOST_VISIBLE, HOST_VISIBLE, HOST_COHERENT] }}\n"),
            "bad.yaml:9:38: types[1].flags: HOST_VISIBLE is listed twice",
        ),
    ];
    for (types, expected) in cases {
        let e = error(&with_types(&types));
        assert!(e.starts_with(expected), "{e}\nexpected: {expected}");
    }
    let ok = with_types(&format!("{dl}{hv}"));
    let atom = ok.replace("non_coherent_atom_size: 64", "non_coherent_atom_size: 48");
    assert!(error(&atom)
        .starts_with("bad.yaml:3:25: non_coherent_atom_size = 48: must be a power of two"));
    let atom = ok.replace("non_coherent_atom_size: 64", "non_coherent_atom_size: 512");
    assert!(error(&atom).starts_with("bad.yaml:3:25: non_coherent_atom_size = 512"));
    assert!(
        error(&format!("{ok}buffer_memory_type_bits: 0x7\n")).starts_with(
            "bad.yaml:10:26: buffer_memory_type_bits = 0x7 names types beyond the table's 2 types"
        )
    );
    assert!(error(&format!("{ok}buffer_memory_type_bits: 0\n"))
        .starts_with("bad.yaml:10:26: buffer_memory_type_bits = 0x0"));
    assert!(error(&format!("{ok}buffer_memory_type_bits: 0x1\n"))
        .starts_with("bad.yaml:10:26: buffer_memory_type_bits = 0x1 allows no HOST_VISIBLE|HOST_COHERENT type"));
    let too_many = format!("{dl}{}", hv.repeat(32));
    assert!(error(&with_types(&too_many))
        .starts_with("bad.yaml:8:3: types: 33 types, but Vulkan allows at most 32"));
}

#[test]
fn syntax_errors_and_missing_files_name_the_origin() {
    let e = error("name: x\ntypes: [\n");
    assert!(e.starts_with("bad.yaml:2:8: "), "{e}");
    let e = error("name: x\ndevice_type: gpu\n");
    assert!(e.starts_with("bad.yaml:2:14: unknown variant `gpu`"), "{e}");
    let e = MemoryTable::from_yaml_file(Path::new("/nonexistent/table.yaml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/table.yaml: cannot read"),
        "{e}"
    );
}

#[test]
fn to_yaml_round_trips_every_recorded_table() {
    for entry in std::fs::read_dir(devices_dir()).unwrap() {
        let path = entry.unwrap().path();
        let table = MemoryTable::from_yaml_file(&path).unwrap();
        let yaml = table.to_yaml();
        let back = MemoryTable::from_yaml_str(&yaml, "round trip")
            .unwrap_or_else(|e| panic!("{}: {e}\n{yaml}", path.display()));
        assert_eq!(back, table, "{}", path.display());
    }
    let mut odd = device("lavapipe");
    odd.name = "llvmpipe: \"odd\" # name\\ \t\u{1}".into();
    odd.heaps[0].flags |= vk::MemoryHeapFlags::MULTI_INSTANCE;
    let back = MemoryTable::from_yaml_str(&odd.to_yaml(), "odd").unwrap();
    assert_eq!(back, odd);
}

#[test]
fn to_yaml_writes_the_documented_form() {
    let yaml = device("nvidia-rtx4070-no-rebar").to_yaml();
    assert!(yaml.starts_with("name: \"NVIDIA GeForce RTX 4070\"\ndevice_type: discrete-gpu\n"));
    assert!(yaml.contains("  - { size: 257949696, flags: [DEVICE_LOCAL] }  # heap 2: 246 MiB\n"));
    assert!(yaml.contains(
        "  - { heap: 2, flags: [DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT] }  # type 4\n"
    ));
    assert!(yaml.ends_with("buffer_memory_type_bits: 0x1f\n"));
}

#[test]
fn flag_names() {
    assert_eq!(property_flags_name(F::empty()), "none");
    assert_eq!(
        property_flags_name(F::HOST_CACHED | F::HOST_VISIBLE | F::HOST_COHERENT),
        "HOST_VISIBLE|HOST_COHERENT|HOST_CACHED"
    );
    assert_eq!(
        property_flags_name(F::DEVICE_LOCAL | F::from_raw(0x400)),
        "DEVICE_LOCAL|0x400"
    );
    for (name, bit) in PROPERTY_FLAGS {
        assert_eq!(parse_property_flag(name), Some(F::from_raw(bit)));
        assert_eq!(property_flags_name(F::from_raw(bit)), name);
    }
    assert_eq!(parse_property_flag("HOST_VISIBLE_BIT"), None);
    assert_eq!(parse_property_flag("host_visible"), None);
    assert_eq!(
        parse_heap_flag("MULTI_INSTANCE"),
        Some(vk::MemoryHeapFlags::MULTI_INSTANCE)
    );
    assert_eq!(heap_flags_name(vk::MemoryHeapFlags::empty()), "none");
}

#[test]
fn small_bar_heaps() {
    let rtx4070 = device("nvidia-rtx4070-no-rebar");
    assert!(rtx4070.is_small_bar_heap(2));
    assert!(!rtx4070.is_small_bar_heap(0));
    assert!(!rtx4070.is_small_bar_heap(1));
    assert!(!rtx4070.is_small_bar_heap(7));
    assert!(device("nvidia-rtx2070-no-rebar").is_small_bar_heap(2));
    assert!(device("amd-radv-small-bar").is_small_bar_heap(2));
    assert!(device("intel-arc-small-bar").is_small_bar_heap(2));
    // Whole-VRAM BAR: the host-visible VRAM type shares the big heap.
    let h200 = device("nvidia-h200");
    assert!((0..2).all(|h| !h200.is_small_bar_heap(h)));
    assert!(!device("nvidia-rtx40xx-rebar").is_small_bar_heap(2));
    assert!(!device("intel-arc-rebar").is_small_bar_heap(0));
    // Only on a discrete GPU.
    let mut integrated = rtx4070.clone();
    integrated.device_type = DeviceType::IntegratedGpu;
    assert!(!integrated.is_small_bar_heap(2));
    // Not when a type on the heap is not host-visible.
    let mut mixed = rtx4070.clone();
    mixed.types.push(MemoryType {
        heap: 2,
        flags: F::DEVICE_LOCAL,
    });
    assert!(!mixed.is_small_bar_heap(2));
    // Not when it is the only DEVICE_LOCAL heap.
    let mut alone = rtx4070;
    alone.heaps[0].flags = vk::MemoryHeapFlags::empty();
    assert!(!alone.is_small_bar_heap(2));
}

#[test]
fn describe_type_names_flags_and_heap() {
    let t = device("nvidia-h200");
    assert_eq!(
        t.describe_type(3),
        "type 3: HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1)"
    );
    assert_eq!(t.describe_type(0), "type 0: none (heap 1)");
    assert_eq!(t.describe_type(5), "type 5: not in the table (5 types)");
}

#[test]
fn device_types() {
    assert_eq!(
        DeviceType::from(vk::PhysicalDeviceType::CPU),
        DeviceType::Cpu
    );
    assert_eq!(
        DeviceType::from(vk::PhysicalDeviceType::DISCRETE_GPU),
        DeviceType::DiscreteGpu
    );
    assert_eq!(
        DeviceType::from(vk::PhysicalDeviceType::INTEGRATED_GPU),
        DeviceType::IntegratedGpu
    );
    assert_eq!(
        DeviceType::from(vk::PhysicalDeviceType::VIRTUAL_GPU),
        DeviceType::VirtualGpu
    );
    assert_eq!(
        DeviceType::from(vk::PhysicalDeviceType::from_raw(99)),
        DeviceType::Other
    );
    assert_eq!(DeviceType::IntegratedGpu.to_string(), "integrated-gpu");
    assert_eq!(device("lavapipe").device_type, DeviceType::Cpu);
}

#[test]
fn heap_budgets_are_read_written_and_bounded_by_the_heap() {
    let types = "  - { heap: 0, flags: [DEVICE_LOCAL] }\n  - { heap: 1, flags: [HOST_VISIBLE, HOST_COHERENT] }\n";
    let src = with_types(types).replace(
        "size: 2048, flags: []",
        "size: 2048, flags: [], budget: 1000",
    );
    let t = MemoryTable::from_yaml_str(&src, "t").unwrap();
    assert_eq!((t.heaps[0].budget, t.heaps[1].budget), (None, Some(1000)));
    let back = MemoryTable::from_yaml_str(&t.to_yaml(), "back").unwrap();
    assert_eq!(back.heaps, t.heaps);
    let src = with_types(types).replace(
        "size: 1024, flags: [DEVICE_LOCAL]",
        "size: 1024, flags: [DEVICE_LOCAL], budget: 4096",
    );
    assert_eq!(
        error(&src),
        "bad.yaml:5:50: heaps[0].budget: 4096 bytes is more than the heap's size (1024 bytes)"
    );
}

#[test]
fn device_types_parse_from_their_names() {
    for t in DeviceType::ALL {
        assert_eq!(t.name().parse::<DeviceType>(), Ok(t));
        assert_eq!(t.to_string(), t.name());
    }
    assert_eq!(
        " Discrete_GPU ".parse::<DeviceType>(),
        Ok(DeviceType::DiscreteGpu)
    );
    assert_eq!("CPU".parse::<DeviceType>(), Ok(DeviceType::Cpu));
    let e = "gpu".parse::<DeviceType>().unwrap_err();
    assert!(e.starts_with("unknown device type 'gpu'"), "{e}");
}

#[test]
fn vulkan_limits_on_heaps_and_types_hold_at_their_bounds() {
    let mut t = device("nvidia-h200");
    let host = MemoryType {
        heap: 1,
        flags: F::HOST_VISIBLE | F::HOST_COHERENT,
    };
    t.types.resize(MAX_MEMORY_TYPES, host);
    t.validate("t").unwrap_or_else(|e| panic!("{e}"));
    t.types.push(host);
    let e = t.validate("t").unwrap_err().to_string();
    assert!(e.contains("33 types, but Vulkan allows at most 32"), "{e}");
    t.types.pop();
    let spare = MemoryHeap {
        size: 1 << 20,
        flags: vk::MemoryHeapFlags::empty(),
        budget: None,
    };
    t.heaps.resize(MAX_MEMORY_HEAPS, spare);
    t.validate("t").unwrap_or_else(|e| panic!("{e}"));
    t.heaps.push(spare);
    let e = t.validate("t").unwrap_err();
    assert!(
        e.to_string()
            .contains("17 heaps, but Vulkan allows at most 16"),
        "{e}"
    );
    // Where: an invalid table names its origin; one that cannot be read has no place.
    assert_eq!(e.place().map(|p| p.to_string()), Some("t".to_string()));
}

#[test]
fn a_budget_equal_to_its_heap_and_wrong_yaml_types_are_handled() {
    let types = "  - { heap: 0, flags: [DEVICE_LOCAL] }\n  - { heap: 1, flags: [HOST_VISIBLE, HOST_COHERENT] }\n";
    let src = with_types(types).replace(
        "size: 2048, flags: []",
        "size: 2048, flags: [], budget: 2048",
    );
    let t = MemoryTable::from_yaml_str(&src, "t").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.heaps[1].budget, Some(2048));
    // A list where a mask belongs: the message says what was expected.
    let e = error(&format!(
        "{}buffer_memory_type_bits: [1]\n",
        with_types(types)
    ));
    assert!(e.contains("a 32-bit mask, e.g. 31 or 0x1f"), "{e}");
}

#[test]
fn tables_take_every_documented_device_type_spelling() {
    for (spelling, expected) in [
        ("cpu", DeviceType::Cpu),
        ("integrated-gpu", DeviceType::IntegratedGpu),
        ("integrated_gpu", DeviceType::IntegratedGpu),
        ("discrete-gpu", DeviceType::DiscreteGpu),
        ("discrete_gpu", DeviceType::DiscreteGpu),
        ("virtual-gpu", DeviceType::VirtualGpu),
        ("virtual_gpu", DeviceType::VirtualGpu),
        ("other", DeviceType::Other),
    ] {
        let src = with_types("  - { heap: 0, flags: [DEVICE_LOCAL] }\n  - { heap: 1, flags: [HOST_VISIBLE, HOST_COHERENT] }\n")
            .replace("device_type: discrete-gpu", &format!("device_type: {spelling}"));
        let t = MemoryTable::from_yaml_str(&src, "t").unwrap_or_else(|e| panic!("{spelling}: {e}"));
        assert_eq!(t.device_type, expected, "{spelling}");
    }
}
