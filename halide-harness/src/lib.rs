//! Halide's own Vulkan runtime as a system under test: the Halide harness.
//!
//! The suite's steps are Halide's entry points (`halide_device_malloc`,
//! `halide_copy_to_host`, `halide_device_crop`, ...), so a case runs on the
//! runtime that a Halide release ships: the standalone runtime object of its
//! PyPI wheel, linked into a shared library by `scripts/halide-runtime.sh`
//! (or one a maintainer builds from a Halide checkout), chosen as
//! [`vkcopy_engine::runtime::Choice::Halide`], and handed to the engine as a
//! [`Target`] by [`target`].
//!
//! It is a [`vkcopy_engine::runtime::Runtime`] (`runtime.rs`): the steps' meanings are
//! the suite's, and a case that needs what only vkcopy has (async copies,
//! timed copies, its own counters...) is skipped with the capability named.
//! vkcopy's library of the ABI takes vkcopy's settings too
//! (`vkcopy_halide_set_setting`), so it runs the cases that choose a policy,
//! mapped copies or the small-copy queue. Memory placements, leak counts and
//! recorded tables reach Halide through its Vulkan entry points (`shim/`).

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod error;
pub mod ffi;
pub(crate) mod runtime;
pub(crate) mod shim;

#[cfg(test)]
mod layer_race;

use std::path::Path;
use std::sync::{Arc, Mutex};

pub use error::HarnessError;
pub use runtime::{HalideRuntime, CAPABILITIES, WITH_SETTINGS};
use vkcopy_engine::rt::{ContextOptions, DeviceCopy, Emulate, MappedCopy, Policy, SmallCopyQueue};
use vkcopy_engine::runtime::{Choice, Runtime, Target};

/// What of `options` cannot reach Halide's runtime, which picks its device,
/// memory types and copy paths itself: a run is refused with it named, rather
/// than run without it. vkcopy's defaults, and settings that only turn a
/// vkcopy route off (`import_host: false`, `mapped_upload: never`,
/// `mapped_readback: never`, `device_copy: transfer`), are what Halide does
/// anyway. Every field is named here, so a new one does not compile until it
/// is accepted or refused.
pub fn refused(options: &ContextOptions) -> Option<String> {
    let ContextOptions {
        device,
        validation: _,      // the shim puts the layer on Halide's instance
        simulate_memory: _, // the shim presents the table to Halide
        policy,
        import_host: _, // Halide never imports host memory
        alloc_config,
        device_copy,
        mapped_upload,
        mapped_readback,
        small_copy_queue,
        timeout,
        spin,
        emulate,
    } = options;
    let plain = ContextOptions::default();
    let mut not = Vec::new();
    if *policy != Policy::default() {
        not.push(format!("policy {policy} (--policy, VKCOPY_POLICY)"));
    }
    if *device != plain.device {
        not.push(
            "a device choice (VKCOPY_DEVICE, VKCOPY_DEVICE_TYPE; Halide reads HL_VK_DEVICE_TYPE)"
                .into(),
        );
    }
    if *alloc_config != plain.alloc_config {
        not.push("VKCOPY_ALLOC_CONFIG".into());
    }
    if *device_copy == DeviceCopy::Shader {
        not.push("VKCOPY_DEVICE_COPY=shader".into());
    }
    if *mapped_upload == MappedCopy::Always {
        not.push("VKCOPY_MAPPED_UPLOAD=always".into());
    }
    if *mapped_readback == MappedCopy::Always {
        not.push("VKCOPY_MAPPED_READBACK=always".into());
    }
    if *small_copy_queue == SmallCopyQueue::Other {
        not.push("VKCOPY_SMALL_COPY_QUEUE=other".into());
    }
    if *timeout != plain.timeout {
        not.push("VKCOPY_TIMEOUT_MS (Halide waits without a limit)".into());
    }
    if *spin != plain.spin {
        not.push("VKCOPY_SPIN_US".into());
    }
    if *emulate != Emulate::default() {
        not.push("VKCOPY_EMULATE".into());
    }
    (!not.is_empty()).then(|| {
        format!(
            "{}: vkcopy's settings, which do not reach Halide's runtime (it picks its device, memory types and copy paths itself)",
            not.join(", ")
        )
    })
}

/// What the library at `path` has beyond the primitives: [`WITH_SETTINGS`]
/// where it takes vkcopy's settings, else [`CAPABILITIES`] (also where it
/// cannot be loaded: opening it then says why).
pub fn capabilities(path: &Path) -> &'static [vkcopy_engine::runtime::Capability] {
    match ffi::library(path) {
        Ok(lib) if lib.takes_settings() => WITH_SETTINGS,
        _ => CAPABILITIES,
    }
}

/// What of `options` cannot reach the library at `path`: for one that takes
/// vkcopy's settings, only what they cannot say; else [`refused`].
pub fn refused_by(path: &Path, options: &ContextOptions) -> Result<(), HarnessError> {
    let lib = ffi::library(path)?;
    if lib.takes_settings() {
        return library_settings(options).map(drop);
    }
    refused(options).map_or(Ok(()), |why| Err(HarnessError::Refused(why)))
}

/// Every setting a library that takes vkcopy's settings reads, with the
/// value that gives `options`: the case's own, else blank (the default), so
/// nothing of the environment or an earlier case is left. The layer and the
/// recorded table reach it through the shim, as they reach Halide's.
fn library_settings(options: &ContextOptions) -> Result<Vec<(&'static str, String)>, HarnessError> {
    let mut plain = options.clone();
    plain.simulate_memory = None;
    plain.validation = false;
    let set = plain.settings().map_err(|what| HarnessError::Setting {
        what: format!("{what}: a setting of vkcopy's that its library cannot be given"),
    })?;
    Ok(vkcopy_engine::rt::ENVIRONMENT
        .iter()
        .map(|(name, _)| *name)
        // The library takes the layer through the shim, as Halide's runtime
        // does, and faults from the process's environment.
        .filter(|name| !["VKCOPY_VALIDATION", "VKCOPY_FAULTS"].contains(name))
        .map(|name| {
            let value = set.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
            (name, value.unwrap_or_default())
        })
        .collect())
}

/// The library of Halide's ABI at `path` as the runtime under test: what it
/// can do ([`capabilities`]), and each case opened on it by [`open`].
pub fn target(path: &Path) -> Target {
    let lib = path.to_owned();
    Target::new(
        Choice::Halide(path.to_owned()),
        capabilities(path),
        "Halide's ABI has no entry point for it",
        Arc::new(move |options, slots| {
            let rt = open(&lib, options, slots)?;
            Ok(Box::new(rt) as Box<dyn Runtime<'static>>)
        }),
    )
    // Halide's runtime keeps its context, caches and error state in process
    // globals (cases/halide/README.md says what one case leaves the next).
    .one_case_per_process()
}

/// A case's runtime, with slots named `slots`, on the Halide library at
/// `path`, under `options`: its
/// validation layer and recorded memory table reach Halide through the shim;
/// what cannot reach it is refused. Halide's runtime state is global to the
/// process, so cases run one at a time: the value holds the turn.
pub fn open(
    path: &Path,
    options: &ContextOptions,
    slots: Vec<String>,
) -> Result<HalideRuntime, HarnessError> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let lib = ffi::library(path)?;
    if lib.takes_settings() {
        for (name, value) in library_settings(options)? {
            lib.set_setting(name, &value)?;
        }
    } else if let Some(why) = refused(options) {
        return Err(HarnessError::Refused(why));
    }
    shim::begin_case(
        options.simulate_memory.as_ref(),
        options.validation,
        lib.copy_counts,
    );
    ffi::take_errors();
    Ok(HalideRuntime::new(lib, slots, one))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_route_offs_reach_halide_and_every_other_setting_is_refused() {
        let plain = ContextOptions::default();
        assert_eq!(refused(&plain), None);
        let off = ContextOptions {
            import_host: false,
            mapped_upload: MappedCopy::Never,
            mapped_readback: MappedCopy::Never,
            device_copy: DeviceCopy::Transfer,
            validation: true,
            ..ContextOptions::default()
        };
        assert_eq!(refused(&off), None);
        let cases: [(ContextOptions, &str); 5] = [
            (
                ContextOptions {
                    timeout: std::time::Duration::from_secs(5),
                    ..ContextOptions::default()
                },
                "VKCOPY_TIMEOUT_MS",
            ),
            (
                ContextOptions {
                    spin: std::time::Duration::ZERO,
                    ..ContextOptions::default()
                },
                "VKCOPY_SPIN_US",
            ),
            (
                ContextOptions {
                    small_copy_queue: SmallCopyQueue::Other,
                    ..ContextOptions::default()
                },
                "VKCOPY_SMALL_COPY_QUEUE=other",
            ),
            (
                ContextOptions {
                    mapped_readback: MappedCopy::Always,
                    ..ContextOptions::default()
                },
                "VKCOPY_MAPPED_READBACK=always",
            ),
            (
                ContextOptions {
                    device_copy: DeviceCopy::Shader,
                    ..ContextOptions::default()
                },
                "VKCOPY_DEVICE_COPY=shader",
            ),
        ];
        for (options, named) in cases {
            let why = refused(&options).unwrap_or_else(|| panic!("{named} was not refused"));
            assert!(why.starts_with(named), "{why}");
        }
    }
}
