use super::*;
use crate::memory::table::{MemoryHeap, MemoryType};
use std::path::Path;
use vk::MemoryPropertyFlags as F;

const ALL: u32 = u32::MAX;

fn device(name: &str) -> MemoryTable {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cases/devices")
        .join(format!("{name}.yaml"));
    MemoryTable::from_yaml_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn pick(policy: Policy, table: &MemoryTable, role: Role) -> u32 {
    list(policy, table, role)[0]
}

fn list(policy: Policy, table: &MemoryTable, role: Role) -> Vec<u32> {
    policy.role_candidates(table, role, ALL).unwrap()
}

fn raw(s: &str) -> MemoryRequest {
    s.parse().unwrap()
}

/// Every visibility/caching pair.
fn every_request() -> Vec<MemoryRequest> {
    MemoryVisibility::ALL
        .into_iter()
        .flat_map(|v| MemoryCaching::ALL.map(|c| MemoryRequest::new(v, c)))
        .collect()
}

/// A table from `(heap, flags)` pairs on a discrete GPU with a VRAM and a system heap.
fn table(types: &[(u32, F)]) -> MemoryTable {
    MemoryTable {
        name: "synthetic".into(),
        device_type: DeviceType::DiscreteGpu,
        non_coherent_atom_size: 64,
        heaps: vec![
            MemoryHeap {
                size: 8 << 30,
                flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
                budget: None,
            },
            MemoryHeap {
                size: 16 << 30,
                flags: vk::MemoryHeapFlags::empty(),
                budget: None,
            },
        ],
        types: types
            .iter()
            .map(|&(heap, flags)| MemoryType { heap, flags })
            .collect(),
        buffer_memory_type_bits: (1 << types.len()) - 1,
        dedicated_from: None,
    }
}

#[test]
fn role_requests() {
    let requests = |p: Policy| Role::ALL.map(|r| p.request(r).to_string());
    assert_eq!(
        requests(Policy::HalideLegacy),
        [
            "device_to_host/uncached_coherent/transfer_dst",
            "host_to_device/uncached_coherent/transfer_src",
            "device_only/uncached/transfer_src_dst",
            "device_only/uncached/transfer_src_dst",
        ]
    );
    assert_eq!(
        requests(Policy::Halide),
        [
            "device_to_host/cached_coherent/transfer_dst",
            "host_to_device/uncached_coherent/transfer_src",
            "device_only/uncached/transfer_src_dst",
            "device_only/uncached/transfer_src_dst",
        ]
    );
    assert_eq!(
        requests(Policy::Vkcopy)[0],
        "device_to_host/cached/transfer_dst"
    );
    assert_eq!(requests(Policy::Vkcopy)[1..], requests(Policy::Halide)[1..]);
}

#[test]
fn names_parse_and_display() {
    assert_eq!(Policy::default(), Policy::Vkcopy);
    for p in Policy::ALL {
        assert_eq!(p.to_string().parse::<Policy>(), Ok(p));
    }
    assert_eq!("halide-legacy".parse::<Policy>(), Ok(Policy::HalideLegacy));
    assert_eq!("upload".parse::<Role>(), Ok(Role::Upload));
    for r in every_request() {
        assert_eq!(r.to_string().parse::<MemoryRequest>(), Ok(r));
        let with_usage = r.with_usage(MemoryUsage::UniformStorage);
        assert_eq!(
            with_usage.to_string().parse::<MemoryRequest>(),
            Ok(with_usage)
        );
    }
    assert_eq!(
        raw("device_to_host/cached_coherent"),
        MemoryRequest::new(
            MemoryVisibility::DeviceToHost,
            MemoryCaching::CachedCoherent
        )
    );
    assert_eq!(
        "halide_legacy".parse::<Policy>().unwrap_err().to_string(),
        "unknown policy `halide_legacy`; expected one of halide-legacy, halide, vkcopy"
    );
    assert_eq!(
        "device_to_host/coherent"
            .parse::<MemoryRequest>()
            .unwrap_err()
            .to_string(),
        "unknown memory caching `coherent`; expected one of cached, uncached, \
         cached_coherent, uncached_coherent, default"
    );
    let e = "readback".parse::<MemoryRequest>().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("unknown memory request `readback`"),
        "{e}"
    );
    assert!("a/b/c/d".parse::<MemoryRequest>().is_err());
}

/// Halide's worked example (reference §1.6): T0 DL, T1 HV|HC, T2 HV|HC|HCACHED,
/// T3 DL|HV|HC (BAR).
#[test]
fn halide_worked_example() {
    let t = table(&[
        (0, F::DEVICE_LOCAL),
        (1, F::HOST_VISIBLE | F::HOST_COHERENT),
        (1, F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED),
        (0, F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT),
    ]);
    let legacy = Policy::HalideLegacy;
    assert_eq!(list(legacy, &t, Role::Device), [0, 3]);
    assert_eq!(list(legacy, &t, Role::Upload), [1, 2, 3]);
    assert_eq!(list(legacy, &t, Role::Readback), [3, 1, 2]);
    let scalar_args = raw("host_to_device/uncached_coherent/uniform_storage");
    assert_eq!(legacy.select(&t, &scalar_args, ALL), Ok(1));
    assert_eq!(list(Policy::Halide, &t, Role::Readback), [2, 1, 3]);
    assert_eq!(
        legacy.required_flags(&legacy.request(Role::Readback)),
        F::HOST_VISIBLE
    );
    assert_eq!(
        legacy.preferred_flags(&legacy.request(Role::Readback)),
        F::DEVICE_LOCAL | F::HOST_COHERENT
    );
    let halide = Policy::Halide;
    assert_eq!(
        halide.required_flags(&halide.request(Role::Readback)),
        F::HOST_VISIBLE | F::HOST_COHERENT
    );
    assert_eq!(
        halide.preferred_flags(&halide.request(Role::Readback)),
        F::HOST_CACHED | F::HOST_COHERENT
    );
    // The second review change: DeviceToHost prefers HOST_CACHED only with default caching.
    assert_eq!(
        halide.preferred_flags(&raw("device_to_host/default")),
        F::HOST_CACHED
    );
    assert_eq!(
        halide.preferred_flags(&raw("device_to_host/uncached")),
        F::empty()
    );
    assert_eq!(
        legacy.preferred_flags(&raw("device_to_host/default")),
        F::DEVICE_LOCAL
    );
    // Caching adds preferences only when HOST_VISIBLE is required.
    assert_eq!(
        legacy.preferred_flags(&raw("host_only/cached")),
        F::HOST_VISIBLE
    );
    assert_eq!(legacy.required_flags(&raw("host_only/cached")), F::empty());
    assert_eq!(
        Policy::Vkcopy.required_flags(&raw("host_only/cached")),
        F::HOST_VISIBLE
    );
}

#[test]
fn picks_on_the_lab_h200() {
    let t = device("nvidia-h200");
    let picks = |p| Role::ALL.map(|r| pick(p, &t, r));
    // readback, upload, device, device_mapped
    assert_eq!(picks(Policy::HalideLegacy), [4, 2, 1, 1]);
    assert_eq!(picks(Policy::Halide), [3, 2, 1, 1]);
    assert_eq!(picks(Policy::Vkcopy), [3, 2, 1, 4]);
}

#[test]
fn candidate_lists_on_the_lab_h200() {
    let t = device("nvidia-h200");
    let lists = |p| Role::ALL.map(|r| list(p, &t, r));
    // readback, upload, device, device_mapped
    assert_eq!(
        lists(Policy::HalideLegacy),
        [vec![4, 2, 3], vec![2, 3, 4], vec![1, 4], vec![1, 4]]
    );
    assert_eq!(
        lists(Policy::Halide),
        [vec![3, 2, 4], vec![2, 3, 4], vec![1, 4], vec![1, 4]]
    );
    assert_eq!(
        lists(Policy::Vkcopy),
        [vec![3, 2, 4], vec![2, 3, 4], vec![1, 4], vec![4, 1]]
    );
}

#[test]
fn candidate_lists_on_the_rtx4070_without_rebar() {
    let t = device("nvidia-rtx4070-no-rebar");
    let lists = |p| Role::ALL.map(|r| list(p, &t, r));
    assert_eq!(
        lists(Policy::HalideLegacy),
        [vec![4, 2, 3], vec![2, 3, 4], vec![1, 4], vec![1, 4]]
    );
    assert_eq!(
        lists(Policy::Halide),
        [vec![3, 2, 4], vec![2, 3, 4], vec![1, 4], vec![1, 4]]
    );
    // Type 4 is on the 246 MiB BAR heap: never a vkcopy candidate, so small
    // buffers stay out of it too.
    assert_eq!(
        lists(Policy::Vkcopy),
        [vec![3, 2], vec![2, 3], vec![1], vec![1]]
    );
}

#[test]
fn small_bar_types_are_never_vkcopy_candidates() {
    for (name, bar_types) in [
        ("nvidia-rtx4070-no-rebar", &[4][..]),
        ("nvidia-rtx2070-no-rebar", &[4]),
        ("nvidia-legacy-11-type", &[10]),
        ("amd-radv-small-bar", &[3, 4, 8]),
        ("amd-amdvlk-small-bar", &[2, 6]),
        ("intel-arc-small-bar", &[2]),
    ] {
        let t = device(name);
        for r in every_request() {
            if let Ok(list) = Policy::Vkcopy.candidates(&t, &r, ALL) {
                assert!(
                    !list.iter().any(|i| bar_types.contains(i)),
                    "{name} {r}: {list:?}"
                );
            }
        }
        // The old rule does put readback staging there.
        assert!(
            bar_types.contains(&pick(Policy::HalideLegacy, &t, Role::Readback)),
            "{name}"
        );
    }
}

#[test]
fn device_mapped_takes_host_visible_vram_only_off_small_bar_heaps() {
    // (table, the vkcopy device_mapped list): host-visible device memory first
    // where a large heap has it (resizable BAR, integrated GPUs), else the
    // device list unchanged.
    for (name, want) in [
        ("nvidia-h200", &[4, 1][..]),
        ("nvidia-rtx40xx-rebar", &[4, 1]),
        ("intel-arc-rebar", &[2, 0]),
        ("nvidia-rtx4070-no-rebar", &[1]),
        ("amd-radv-small-bar", &[0]),
        ("intel-igpu-llc", &[1, 2, 0]),
        ("lavapipe", &[0]),
    ] {
        let t = device(name);
        let got = list(Policy::Vkcopy, &t, Role::DeviceMapped);
        assert_eq!(got, want, "{name}");
        let mut device = list(Policy::Vkcopy, &t, Role::Device);
        device.sort();
        let mut mapped = got.clone();
        mapped.sort();
        assert_eq!(mapped, device, "{name}: the same types, reordered");
    }
}

#[test]
fn memory_type_bits_filter_every_policy() {
    let t = device("nvidia-h200");
    let no_type_3 = 0x1f & !(1 << 3);
    let readback = |p: Policy| {
        p.candidates(&t, &p.request(Role::Readback), no_type_3)
            .unwrap()
    };
    assert_eq!(readback(Policy::Vkcopy), [2, 4]);
    assert_eq!(readback(Policy::Halide), [2, 4]);
    assert_eq!(readback(Policy::HalideLegacy), [4, 2]);
    // The table's own buffer bits apply too.
    let mut masked = t.clone();
    masked.buffer_memory_type_bits = no_type_3;
    assert_eq!(
        Policy::Vkcopy.select(&masked, &Policy::Vkcopy.request(Role::Readback), ALL),
        Ok(2)
    );
    // Bits beyond the table are ignored, not an error.
    assert_eq!(pick(Policy::Vkcopy, &t, Role::Device), 1);
}

#[test]
fn no_candidate_is_an_error_that_lists_the_types() {
    let t = device("nvidia-rtx4070-no-rebar");
    let request = Policy::Vkcopy.request(Role::Device);
    let e = Policy::Vkcopy.candidates(&t, &request, 1 << 4).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no memory type for device_only/uncached/transfer_src_dst (policy vkcopy, \
         memoryTypeBits 0x10, required DEVICE_LOCAL) on NVIDIA GeForce RTX 4070; its types: \
         type 0: none (heap 1) [not in memoryTypeBits]; \
         type 1: DEVICE_LOCAL (heap 0) [not in memoryTypeBits]; \
         type 2: HOST_VISIBLE|HOST_COHERENT (heap 1) [not in memoryTypeBits]; \
         type 3: HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1) [not in memoryTypeBits]; \
         type 4: DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT (heap 2) [small BAR heap]"
    );
    // Halide would take the BAR type here.
    assert_eq!(Policy::Halide.select(&t, &request, 1 << 4), Ok(4));
    assert!(Policy::Halide.select(&t, &request, 0).is_err());
}

#[test]
fn vendor_special_types_are_never_vkcopy_candidates() {
    let special = [
        F::PROTECTED,
        F::LAZILY_ALLOCATED,
        F::DEVICE_COHERENT_AMD | F::DEVICE_UNCACHED_AMD,
    ];
    // Vendor-special types first, so that index order alone would pick them.
    let t = table(&[
        (0, F::DEVICE_LOCAL | F::PROTECTED),
        (0, F::DEVICE_LOCAL | F::LAZILY_ALLOCATED),
        (
            0,
            F::DEVICE_LOCAL | F::DEVICE_COHERENT_AMD | F::DEVICE_UNCACHED_AMD,
        ),
        (
            1,
            F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED | F::DEVICE_COHERENT_AMD,
        ),
        (0, F::DEVICE_LOCAL),
        (1, F::HOST_VISIBLE | F::HOST_COHERENT),
        (1, F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED),
    ]);
    t.validate("synthetic").unwrap();
    let is_special = |i: &u32| {
        special
            .iter()
            .any(|s| t.types[*i as usize].flags.intersects(*s))
    };
    for r in every_request() {
        let list = Policy::Vkcopy.candidates(&t, &r, ALL).unwrap();
        assert!(!list.iter().any(is_special), "{r}: {list:?}");
    }
    assert_eq!(list(Policy::Vkcopy, &t, Role::Device), [4]);
    assert_eq!(list(Policy::Vkcopy, &t, Role::Readback), [6, 5]);
    // Halide's rules do take them.
    assert_eq!(pick(Policy::HalideLegacy, &t, Role::Device), 0);
    assert_eq!(pick(Policy::Halide, &t, Role::Readback), 3);
    // On RADV the device-coherent copies come last, but the old fallback list still has them.
    let radv = device("amd-radv-small-bar");
    assert_eq!(
        list(Policy::HalideLegacy, &radv, Role::Readback),
        [3, 8, 2, 5, 7, 9]
    );
    assert_eq!(list(Policy::Vkcopy, &radv, Role::Readback), [5, 2]);
    assert_eq!(list(Policy::Vkcopy, &radv, Role::Upload), [2, 5]);
    assert_eq!(list(Policy::Vkcopy, &radv, Role::Device), [0]);
}

#[test]
fn non_coherent_cached_memory_for_readback_only_under_vkcopy() {
    for name in [
        "mali-like",
        "intel-igpu-non-llc-i915",
        "turnip-no-cached-coherent",
    ] {
        let t = device(name);
        assert_eq!(list(Policy::Vkcopy, &t, Role::Readback), [1, 0], "{name}");
        assert_eq!(list(Policy::Halide, &t, Role::Readback), [0], "{name}");
        // Legacy falls back to non-coherent memory it never invalidates.
        assert_eq!(
            list(Policy::HalideLegacy, &t, Role::Readback),
            [0, 1],
            "{name}"
        );
        assert_eq!(list(Policy::Vkcopy, &t, Role::Upload), [0, 1], "{name}");
        assert_eq!(pick(Policy::Vkcopy, &t, Role::Device), 0, "{name}");
    }
    // Coherence first when the request says so.
    let t = device("mali-like");
    assert_eq!(
        Policy::Vkcopy.select(&t, &raw("device_to_host/cached_coherent"), ALL),
        Ok(0)
    );
    assert_eq!(
        Policy::Vkcopy.select(&t, &raw("host_to_device/cached"), ALL),
        Ok(1)
    );
}

#[test]
fn raw_caching_adjusts_the_vkcopy_ranking() {
    let t = device("nvidia-h200");
    let sel = |s: &str| Policy::Vkcopy.candidates(&t, &raw(s), ALL).unwrap();
    assert_eq!(sel("device_to_host/uncached_coherent"), [2, 3, 4]);
    assert_eq!(sel("device_to_host/default"), [3, 2, 4]);
    assert_eq!(sel("host_to_device/cached"), [3, 2, 4]);
    assert_eq!(sel("host_to_device/default"), [2, 3, 4]);
    assert_eq!(sel("host_only/default"), [3, 2, 4]);
    assert_eq!(sel("default/default"), [1, 4, 0, 2, 3]);
    // Host-visible VRAM stays last on a discrete GPU, but not on an integrated one.
    let mut igpu = t.clone();
    igpu.device_type = DeviceType::IntegratedGpu;
    let sel = |s: &str| Policy::Vkcopy.candidates(&igpu, &raw(s), ALL).unwrap();
    assert_eq!(sel("device_to_host/uncached_coherent"), [2, 4, 3]);
}

#[test]
fn ties_go_to_the_driver_order() {
    let t = table(&[
        (0, F::DEVICE_LOCAL),
        (1, F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED),
        (0, F::DEVICE_LOCAL),
        (1, F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED),
    ]);
    for p in Policy::ALL {
        assert_eq!(list(p, &t, Role::Device), [0, 2], "{p}");
        assert_eq!(list(p, &t, Role::Readback), [1, 3], "{p}");
    }
}

#[test]
fn single_type_devices_use_type_0_for_everything() {
    for name in ["lavapipe", "swiftshader", "panvk", "v3dv-raspberry-pi"] {
        let t = device(name);
        for p in Policy::ALL {
            for r in Role::ALL {
                assert_eq!(list(p, &t, r), [0], "{name} {p} {r}");
            }
        }
    }
}
