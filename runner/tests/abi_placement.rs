//! vkcopy's library of Halide's ABI places memory as vkcopy does: on every
//! recorded table of `cases/devices/`, a buffer that Halide's ABI allocates,
//! uploads and reads back (1 MiB and 4 KiB) lands, role by role, in the memory
//! types vkcopy's own runtime chooses for the same steps. Through the ABI the
//! placements are the library's own account (`vkcopy_halide_placements`).
//! Needs the library (`scripts/halide-runtime.sh vkcopy-abi`, which
//! `scripts/test.sh` runs first); in CI its absence fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// (role, memory type, heap, imported, whether it fell back): where a role
/// went, whatever the count or size of its allocations (vkcopy's staging
/// ring serves several copies where a simulated table's staging is per copy).
type Where = (String, u64, u64, bool, bool);

/// Runs every case of `cases` on `runtime`: each case's placements.
fn placements(cases: &Path, out: &Path, runtime: &str) -> BTreeMap<String, BTreeSet<Where>> {
    let run = Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"))
        .args(["run", "--runtime", runtime, "--cases"])
        .arg(cases)
        .arg("--report-dir")
        .arg(out)
        .env_remove("VKCOPY_RUNTIME")
        .env("VKCOPY_VALIDATION", "0")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{runtime}:\n{text}");
    let report = text
        .lines()
        .find_map(|l| l.strip_prefix("report: "))
        .unwrap_or_else(|| panic!("{runtime}: no report folder in\n{text}"));
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(report).join("results.json")).unwrap(),
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for case in results["cases"].as_array().unwrap() {
        let set = case["placements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["role"].as_str().unwrap().to_string(),
                    p["memory_type"].as_u64().unwrap(),
                    p["heap"].as_u64().unwrap(),
                    p["imported"].as_bool().unwrap_or(false),
                    p["fallbacks"].as_u64().unwrap() > 0,
                )
            })
            .collect();
        out.insert(case["name"].as_str().unwrap().to_string(), set);
    }
    out
}

fn library() -> Option<PathBuf> {
    let lib = repo().join("target/halide/vkcopy-abi/libhalide_runtime_vulkan.so");
    if lib.is_file() {
        return Some(lib);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no {} (scripts/halide-runtime.sh vkcopy-abi builds it)",
        lib.display()
    );
    eprintln!(
        "abi placement: skipped: build vkcopy's library with scripts/halide-runtime.sh vkcopy-abi"
    );
    None
}

#[test]
fn the_library_places_every_role_as_vkcopy_does_on_every_recorded_table() {
    let Some(lib) = library() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    let devices = cases.join("devices");
    let probes = cases.join("placement");
    std::fs::create_dir_all(&devices).unwrap();
    std::fs::create_dir_all(&probes).unwrap();
    let mut tables = Vec::new();
    for entry in std::fs::read_dir(repo().join("cases/devices")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let table = path.file_stem().unwrap().to_str().unwrap().to_string();
        std::fs::copy(&path, devices.join(path.file_name().unwrap())).unwrap();
        let name = table.replace('-', "_");
        // Under vkcopy's policy, and under Halide's, which the library takes
        // as a setting of the case.
        for (suffix, policy) in [("", ""), ("_halide_policy", "policy: halide\n")] {
            std::fs::write(
                probes.join(format!("{name}{suffix}.yaml")),
                format!(
                    "about: each role's placement on {table}
simulate_memory: {table}
{policy}buffers:
  big: {{ type: u8, extent: [1048576] }}
  small: {{ type: u8, extent: [4096] }}
steps:
  - fill_host: {{ buffer: big, value: \"x\" }}
  - copy_to_device: big
  - set_dirty: {{ buffer: big, device_dirty: true }}
  - copy_to_host: big
  - expect: {{ buffer: big, value: \"x % 256\" }}
  - fill_host: {{ buffer: small, value: \"x\" }}
  - copy_to_device: small
  - set_dirty: {{ buffer: small, device_dirty: true }}
  - copy_to_host: small
  - expect: {{ buffer: small, value: \"x % 256\" }}
  - release: big
  - release: small
  - device_release
"
                ),
            )
            .unwrap();
            tables.push(format!("placement::{name}{suffix}"));
        }
    }
    assert!(tables.len() >= 2 * 19, "{} probes", tables.len());
    let native = placements(&cases, &dir.path().join("native"), "vkcopy");
    let abi = placements(
        &cases,
        &dir.path().join("abi"),
        &format!("halide:{}", lib.display()),
    );
    let mut differ = Vec::new();
    for case in &tables {
        let (n, a) = (&native[case], &abi[case]);
        // Not vacuous: every table places device memory and reads back
        // through staging or maps it.
        let roles: BTreeSet<&str> = n.iter().map(|w| w.0.as_str()).collect();
        assert!(
            roles.iter().any(|r| r.starts_with("device")) && roles.len() >= 2,
            "{case}: natively only {roles:?}"
        );
        if n != a {
            differ.push(format!("{case}:\n  vkcopy:  {n:?}\n  the ABI: {a:?}"));
        }
    }
    assert!(
        differ.is_empty(),
        "placements differ:\n{}",
        differ.join("\n")
    );
    // The policy reached the library: on some tables Halide's places a role
    // elsewhere than vkcopy's does.
    let moved = tables
        .iter()
        .filter(|c| c.ends_with("_halide_policy"))
        .filter(|c| abi[*c] != abi[c.trim_end_matches("_halide_policy")])
        .count();
    assert!(moved >= 3, "Halide's policy moved a role on {moved} tables");
}
