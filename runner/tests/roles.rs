//! Roles mean where a runtime put memory: `select` answers what the runtime
//! places for every role on every recorded table, and `expect_memory: {role:
//! device}` is a buffer's device memory wherever it landed.

use std::path::Path;
use std::process::Command;

use vkcopy_engine::rt::{Buffer, Context, ContextOptions, MemoryTable, Policy, Role};
use vkcopy_suite::outcome::Status;
use vkcopy_suite::suite::probe;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// What `vkcopy-suite select` prints for `role` on `table`.
fn select(table: &Path, role: Role) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"))
        .args(["select", "--table"])
        .arg(table)
        .args(["--request", role.name()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn device_here() -> bool {
    match probe(&ContextOptions::default()).expect("options") {
        Ok(_) => true,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            false
        }
        Err(e) => panic!("no Vulkan device: {e}"),
    }
}

/// On every recorded table, simulated on this device: a small and a large
/// buffer's device memory, upload staging and readback staging land where
/// `select` says for the role the runtime recorded, with no fallback. The
/// small buffer's role is also the one `Policy::device_role` (what `explain`
/// prints) gives.
#[test]
fn select_answers_what_the_runtime_places_for_every_role_on_every_table() {
    if !device_here() {
        return;
    }
    let mut tables: Vec<_> = std::fs::read_dir(repo().join("cases/devices"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    tables.sort();
    assert!(tables.len() >= 10, "{tables:?}");
    let mut mapped_seen = 0;
    for path in &tables {
        let table = MemoryTable::from_yaml_file(path).unwrap();
        let options = ContextOptions {
            simulate_memory: Some(table.clone()),
            ..ContextOptions::default()
        };
        let ctx = Context::new(options).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let check = |what: &str, want_role: Option<Role>| {
            let placements = ctx.stats().placements();
            let p = placements
                .last()
                .unwrap_or_else(|| panic!("{}: {what}: nothing placed", path.display()));
            if let Some(r) = want_role {
                assert_eq!(p.role, r, "{}: {what}", path.display());
            }
            assert_eq!(p.fallbacks, 0, "{}: {what}: {p:?}", path.display());
            assert_eq!(
                ctx.memory_table().describe_type(p.memory_type),
                select(path, p.role),
                "{}: {what} placed as {}",
                path.display(),
                p.role
            );
            p.role
        };
        let mut small = Buffer::new("small", vkcopy_engine::rt::ElemType::U8, &[4096]).unwrap();
        ctx.device_malloc(&mut small).unwrap();
        let role = check("a 4 KiB buffer's device memory", None);
        assert_eq!(
            role,
            Policy::Vkcopy.device_role(&table, u32::MAX, 4096, true),
            "{}",
            path.display()
        );
        mapped_seen += usize::from(role == Role::DeviceMapped);
        let mut big = Buffer::new("big", vkcopy_engine::rt::ElemType::U8, &[8 << 20]).unwrap();
        big.fill(|c| c[0] & 0xff).unwrap();
        ctx.copy_to_device(&mut big).unwrap();
        check("an 8 MiB upload's staging", Some(Role::Upload));
        big.set_device_dirty(true);
        ctx.copy_to_host(&mut big).unwrap();
        check("an 8 MiB readback's staging", Some(Role::Readback));
        let mut large = Buffer::new("large", vkcopy_engine::rt::ElemType::U8, &[8 << 20]).unwrap();
        ctx.device_malloc(&mut large).unwrap();
        check("an 8 MiB buffer's device memory", Some(Role::Device));
        drop((small, big, large));
        let leaks = ctx.close();
        assert!(leaks.is_empty(), "{}: {leaks}", path.display());
    }
    // Some tables place small buffers for mapped uploads, or the check above
    // never met the role that once disagreed.
    assert!(mapped_seen >= 2, "{mapped_seen}");
}

/// A case written before small buffers were placed for mapped uploads keeps
/// its meaning: on the rebar table the 4 KiB buffer is placed as
/// `device_mapped` (type 4), and `role: device` answers it.
#[test]
fn role_device_answers_a_buffer_placed_for_mapped_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let devices = dir.path().join("devices");
    std::fs::create_dir(&devices).unwrap();
    std::fs::copy(
        repo().join("cases/devices/nvidia-rtx40xx-rebar.yaml"),
        devices.join("nvidia-rtx40xx-rebar.yaml"),
    )
    .unwrap();
    let case = "about: a small buffer's device memory on a resizable-BAR table
simulate_memory: nvidia-rtx40xx-rebar
buffers:
  b: { type: u8, extent: [4096] }
steps:
  - device_malloc: b
  - expect_memory: { role: device, type: 4 }
";
    let path = dir.path().join("old.yaml");
    std::fs::write(&path, case).unwrap();
    let plan = vkcopy_engine::plan::load(dir.path(), &path).unwrap_or_else(|e| panic!("{e}"));
    if !device_here() {
        return;
    }
    let options = ContextOptions::default();
    let out = vkcopy_engine::exec::run(&plan, &options, &vkcopy_engine::runtime::Target::vkcopy());
    assert_eq!(out.status, Status::Pass, "{}", out.message);
    assert_eq!(out.placements.len(), 1, "{:?}", out.placements);
    assert_eq!(out.placements[0].role, "device_mapped");
    assert_eq!(out.placements[0].memory_type, 4);
}

/// `expect_memory` with a list of right types, and with flags that must be
/// set (`has`) or must not be (`lacks`): on the rebar table a 4 KiB buffer's
/// device memory is type 4, DEVICE_LOCAL and HOST_VISIBLE.
#[test]
fn expect_memory_takes_a_list_of_types_and_flags_set_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let devices = dir.path().join("devices");
    std::fs::create_dir(&devices).unwrap();
    std::fs::copy(
        repo().join("cases/devices/nvidia-rtx40xx-rebar.yaml"),
        devices.join("nvidia-rtx40xx-rebar.yaml"),
    )
    .unwrap();
    let run = |check: &str| {
        let case = format!(
            "about: one check of a small buffer's device memory on a resizable-BAR table
simulate_memory: nvidia-rtx40xx-rebar
buffers:
  b: {{ type: u8, extent: [4096] }}
steps:
  - device_malloc: b
  - expect_memory: {check}
"
        );
        let path = dir.path().join("check.yaml");
        std::fs::write(&path, case).unwrap();
        let plan = vkcopy_engine::plan::load(dir.path(), &path).unwrap_or_else(|e| panic!("{e}"));
        vkcopy_engine::exec::run(
            &plan,
            &ContextOptions::default(),
            &vkcopy_engine::runtime::Target::vkcopy(),
        )
    };
    if !device_here() {
        return;
    }
    let out = run(
        "{ role: device, type: [1, 4], has: [DEVICE_LOCAL, HOST_VISIBLE], lacks: [HOST_CACHED] }",
    );
    assert_eq!(out.status, Status::Pass, "{}", out.message);
    let fails = |check: &str, says: &[&str]| {
        let out = run(check);
        assert_eq!(out.status, Status::Fail, "{}", out.message);
        for text in says {
            assert!(out.message.contains(text), "{}", out.message);
        }
    };
    fails(
        "{ role: device, type: [1, 2] }",
        &[
            "expect_memory: device landed in type 4: ",
            ", expected type 1: DEVICE_LOCAL (heap 0) or type 2: ",
        ],
    );
    fails(
        "{ role: device, lacks: [HOST_VISIBLE] }",
        &["which has HOST_VISIBLE (the case asks for lacks: HOST_VISIBLE)"],
    );
    fails(
        "{ role: device, has: [HOST_CACHED] }",
        &["which lacks HOST_CACHED (the case asks for has: HOST_CACHED)"],
    );
}
