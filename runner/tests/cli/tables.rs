//! `select` on recorded tables and `devices`.

use super::*;

#[test]
fn select_answers_for_the_lab_h200() {
    let table = repo().join("cases/devices/nvidia-h200.yaml");
    for (policy, want) in [
        (
            "halide-legacy",
            "type 4: DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT (heap 0)",
        ),
        (
            "halide",
            "type 3: HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1)",
        ),
        (
            "vkcopy",
            "type 3: HOST_VISIBLE|HOST_COHERENT|HOST_CACHED (heap 1)",
        ),
    ] {
        let out = suite()
            .args(["select", "--table"])
            .arg(&table)
            .args(["--request", "readback", "--policy", policy])
            .output()
            .unwrap();
        assert!(out.status.success(), "{policy}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "{policy}"
        );
    }
}

#[test]
fn select_answers_for_every_recorded_table() {
    for entry in std::fs::read_dir(repo().join("cases/devices")).unwrap() {
        let path = entry.unwrap().path();
        for role in ["readback", "upload", "device"] {
            let out = suite()
                .args(["select", "--table"])
                .arg(&path)
                .args(["--request", role])
                .output()
                .unwrap();
            assert!(out.status.success(), "{} {role}: {out:?}", path.display());
            assert!(String::from_utf8_lossy(&out.stdout).starts_with("type "));
        }
    }
}

#[test]
fn select_rejects_bad_input_with_exit_code_2() {
    let table = repo().join("cases/devices/nvidia-h200.yaml");
    let out = suite()
        .args(["select", "--table"])
        .arg(&table)
        .args(["--request", "sideways"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sideways"));

    let out = suite()
        .args([
            "select",
            "--table",
            "no/such/table.yaml",
            "--request",
            "readback",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/table.yaml"));
}

#[test]
fn devices_prints_one_yaml_document_per_device() {
    let out = suite().arg("devices").output().unwrap();
    if !out.status.success() {
        return; // no Vulkan driver here
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<&str> = text
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .collect();
    assert!(!docs.is_empty(), "{text}");
    assert!(text.starts_with("---\n"), "{text}");
    for doc in docs {
        let table = vkcopy::MemoryTable::from_yaml_str(doc, "devices").unwrap();
        assert!(!table.types.is_empty(), "{doc}");
    }
}
