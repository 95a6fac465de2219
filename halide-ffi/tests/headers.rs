//! The declarations of `halide-ffi` against Halide's own header: a C++
//! program built against each wheel's `HalideRuntime.h` that
//! `scripts/halide-runtime.sh` fetched prints the sizes and every field's
//! offset of `halide_type_t`, `halide_dimension_t`, `halide_buffer_t` and
//! `halide_device_interface_t`, and the flags; the header's error codes are
//! read off its text. (The header does not define the `impl` table, nor the
//! allocation pool's layout, which `device_interface.h` of Halide's sources
//! does; vkcopy's own exports are checked where the library defines them.) Needs a wheel under
//! `target/halide/venv-*`; in CI (`CI` set) its absence fails.

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use halide_ffi::{code, DeviceInterface, HalideBuffer, HalideDimension, HalideType};

fn headers() -> Vec<PathBuf> {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/halide"));
    let mut out: Vec<PathBuf> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|d| d.file_name().to_string_lossy().starts_with("venv-"))
        .filter_map(|d| {
            let lib = d.path().join("lib");
            std::fs::read_dir(lib).ok()?.flatten().find_map(|py| {
                let h = py
                    .path()
                    .join("site-packages/halide/include/HalideRuntime.h");
                h.is_file().then_some(h)
            })
        })
        .collect();
    out.sort();
    assert!(
        !out.is_empty() || std::env::var_os("CI").is_none(),
        "no Halide wheel under {} (scripts/halide-runtime.sh 21.0.0 fetches one)",
        root.display()
    );
    out
}

/// The layout this crate declares, as `name value` lines.
fn ours() -> Vec<String> {
    let mut v = vec![
        format!("type.size {}", size_of::<HalideType>()),
        format!("type.bits {}", offset_of!(HalideType, bits)),
        format!("type.lanes {}", offset_of!(HalideType, lanes)),
        format!("dim.size {}", size_of::<HalideDimension>()),
        format!("dim.extent {}", offset_of!(HalideDimension, extent)),
        format!("dim.stride {}", offset_of!(HalideDimension, stride)),
        format!("dim.flags {}", offset_of!(HalideDimension, flags)),
        format!("buf.size {}", size_of::<HalideBuffer>()),
        format!(
            "buf.device_interface {}",
            offset_of!(HalideBuffer, device_interface)
        ),
        format!("buf.host {}", offset_of!(HalideBuffer, host)),
        format!("buf.flags {}", offset_of!(HalideBuffer, flags)),
        format!("buf.type {}", offset_of!(HalideBuffer, ty)),
        format!("buf.dimensions {}", offset_of!(HalideBuffer, dimensions)),
        format!("buf.dim {}", offset_of!(HalideBuffer, dim)),
        format!("buf.padding {}", offset_of!(HalideBuffer, padding)),
        format!("iface.size {}", size_of::<DeviceInterface>()),
        format!("iface.impl {}", offset_of!(DeviceInterface, imp)),
        format!("flag.host_dirty {}", halide_ffi::HOST_DIRTY),
        format!("flag.device_dirty {}", halide_ffi::DEVICE_DIRTY),
    ];
    macro_rules! fields {
        ($($f:ident),+) => {
            $(v.push(format!(
                concat!("iface.", stringify!($f), " {}"),
                offset_of!(DeviceInterface, $f)
            ));)+
        };
    }
    fields!(
        device_malloc,
        device_free,
        device_sync,
        device_release,
        copy_to_host,
        copy_to_device,
        device_and_host_malloc,
        device_and_host_free,
        buffer_copy,
        device_crop,
        device_slice,
        device_release_crop,
        wrap_native,
        detach_native,
        compute_capability
    );
    v.sort();
    v
}

const PROGRAM: &str = r#"
#include <cstddef>
#include <cstdio>
#include "HalideRuntime.h"
#define P(name, value) std::printf("%s %zu\n", name, (size_t)(value))
int main() {
    P("type.size", sizeof(halide_type_t));
    P("type.bits", offsetof(halide_type_t, bits));
    P("type.lanes", offsetof(halide_type_t, lanes));
    P("dim.size", sizeof(halide_dimension_t));
    P("dim.extent", offsetof(halide_dimension_t, extent));
    P("dim.stride", offsetof(halide_dimension_t, stride));
    P("dim.flags", offsetof(halide_dimension_t, flags));
    P("buf.size", sizeof(halide_buffer_t));
    P("buf.device_interface", offsetof(halide_buffer_t, device_interface));
    P("buf.host", offsetof(halide_buffer_t, host));
    P("buf.flags", offsetof(halide_buffer_t, flags));
    P("buf.type", offsetof(halide_buffer_t, type));
    P("buf.dimensions", offsetof(halide_buffer_t, dimensions));
    P("buf.dim", offsetof(halide_buffer_t, dim));
    P("buf.padding", offsetof(halide_buffer_t, padding));
    P("iface.size", sizeof(halide_device_interface_t));
    P("iface.device_malloc", offsetof(halide_device_interface_t, device_malloc));
    P("iface.device_free", offsetof(halide_device_interface_t, device_free));
    P("iface.device_sync", offsetof(halide_device_interface_t, device_sync));
    P("iface.device_release", offsetof(halide_device_interface_t, device_release));
    P("iface.copy_to_host", offsetof(halide_device_interface_t, copy_to_host));
    P("iface.copy_to_device", offsetof(halide_device_interface_t, copy_to_device));
    P("iface.device_and_host_malloc", offsetof(halide_device_interface_t, device_and_host_malloc));
    P("iface.device_and_host_free", offsetof(halide_device_interface_t, device_and_host_free));
    P("iface.buffer_copy", offsetof(halide_device_interface_t, buffer_copy));
    P("iface.device_crop", offsetof(halide_device_interface_t, device_crop));
    P("iface.device_slice", offsetof(halide_device_interface_t, device_slice));
    P("iface.device_release_crop", offsetof(halide_device_interface_t, device_release_crop));
    P("iface.wrap_native", offsetof(halide_device_interface_t, wrap_native));
    P("iface.detach_native", offsetof(halide_device_interface_t, detach_native));
    P("iface.compute_capability", offsetof(halide_device_interface_t, compute_capability));
    P("iface.impl", offsetof(halide_device_interface_t, impl));
    P("flag.host_dirty", halide_buffer_flag_host_dirty);
    P("flag.device_dirty", halide_buffer_flag_device_dirty);
}
"#;

/// The layout the header gives, as `name value` lines.
fn theirs(header: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("layout.cpp");
    let exe = dir.path().join("layout");
    std::fs::write(&src, PROGRAM).unwrap();
    let built = Command::new("c++")
        .arg("-I")
        .arg(header.parent().unwrap())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("c++ runs");
    assert!(
        built.status.success(),
        "{}: {}",
        header.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let mut v: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

/// `halide_error_code_NAME = VALUE` of the header's text.
fn header_codes(text: &str) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for part in text.split("halide_error_code_").skip(1) {
        let name: String = part
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let Some(rest) = part[name.len()..].trim_start().strip_prefix('=') else {
            continue;
        };
        let value: String = rest
            .trim_start()
            .chars()
            .take_while(|c| *c == '-' || c.is_ascii_digit())
            .collect();
        if let Ok(v) = value.parse() {
            out.push((name, v));
        }
    }
    out
}

#[test]
fn layouts_equal_the_headers() {
    for h in headers() {
        assert_eq!(ours(), theirs(&h), "{}", h.display());
    }
}

#[test]
fn error_codes_equal_the_headers() {
    for h in headers() {
        let codes = header_codes(&std::fs::read_to_string(&h).unwrap());
        assert!(codes.len() >= 40, "{}: {} codes", h.display(), codes.len());
        for (name, value) in &codes {
            assert_eq!(
                code::name(*value),
                Some(name.as_str()),
                "{}: {name}",
                h.display()
            );
        }
        // The newest header defines every code this crate names.
        if h.to_string_lossy().contains("venv-21.") {
            assert_eq!(codes.len(), code::ALL.len(), "{}", h.display());
        }
    }
}
