//! How to create a [`Context`](crate::Context): in code, or from the
//! environment (`VKCOPY_*`).

use crate::error::{Error, Result};
use crate::memory::config::AllocConfig;
use crate::memory::policy::Policy;
use crate::vk::adapter::{DeviceSelector, DeviceTypeFilter};

/// How to create a [`Context`](crate::Context). `Default` reads nothing from the
/// environment; [`ContextOptions::from_env`] does.
#[derive(Clone, Debug)]
pub struct ContextOptions {
    /// Which physical device to open. Default: [`DeviceSelector::Default`] (the
    /// first discrete GPU, then integrated GPU, then any device).
    pub device: DeviceSelector,
    /// Enables `VK_LAYER_KHRONOS_validation` with synchronization validation.
    /// Messages are collected; see [`Context::validation_messages`](crate::Context::validation_messages).
    /// Default: off.
    pub validation: bool,
    /// The memory-type selection policy. Default: [`Policy::Vkcopy`].
    pub policy: Policy,
    /// Copy large buffers straight to and from host memory when the device has
    /// `VK_EXT_external_memory_host` (under the vkcopy policy); else stage.
    /// Default: on.
    pub import_host: bool,
    /// Block sizes and pool limits. Default: [`AllocConfig::default`].
    pub alloc_config: AllocConfig,
    /// How device-to-device copies are made: `vkCmdCopyBuffer`, the copy shader,
    /// or the faster of the two as measured on this device. Default:
    /// [`DeviceCopy::Auto`].
    pub device_copy: DeviceCopy,
    /// Whether small uploads may be written by the CPU straight into device
    /// memory that is host-visible, skipping staging and the GPU. Default:
    /// [`MappedCopy::Auto`].
    pub mapped_upload: MappedCopy,
    /// Whether small readbacks may be read by the CPU straight from device
    /// memory that is host-visible, with streaming loads, skipping staging and
    /// the GPU, once the device's writes to it are done and available. Default:
    /// [`MappedCopy::Auto`].
    pub mapped_readback: MappedCopy,
    /// Which queue takes small copies by the GPU (under 16 MiB): the compute
    /// queue, a second queue (the transfer family's where there is one), or the
    /// fastest queue of any family for the copy's path and size, as measured on
    /// the first such copy. Default: [`SmallCopyQueue::Auto`].
    pub small_copy_queue: SmallCopyQueue,
    /// The longest any wait for the device may take before it fails with
    /// [`Error::Timeout`](crate::Error::Timeout). Default 60 s.
    pub timeout: std::time::Duration,
    /// How long a wait for the device polls before it blocks: a blocking wait
    /// wakes up tens of microseconds after the work ends, which large copies
    /// feel too, so waits poll (yielding the core after the first 200 us), as
    /// CUDA's default synchronisation does. `ZERO` polls only 200 us, as does a
    /// CPU device (lavapipe), whose work runs on the cores a poll would take.
    /// Default 10 ms.
    pub spin: std::time::Duration,
    /// Present this recorded memory table to the allocator instead of the device's.
    /// Default: none.
    #[cfg(feature = "simulate")]
    pub simulate_memory: Option<crate::memory::table::MemoryTable>,
    /// Reintroduces known Halide runtime bugs, so that a suite can prove it catches
    /// each of them. Default: all off.
    #[cfg(feature = "emulate")]
    pub emulate: crate::runtime::emulate::Emulate,
}

/// `ALL`, `name()` and `FromStr` of a mode from its values' names. Parsing
/// ignores case and surrounding spaces: values come from the environment too.
macro_rules! mode_names {
    ($ty:ident, [$($variant:ident => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];

            /// The name in options, cases and reports.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> std::result::Result<Self, String> {
                let want = s.trim().to_ascii_lowercase();
                $ty::ALL.into_iter().find(|v| v.name() == want).ok_or_else(|| {
                    let names = $ty::ALL.map(|v| v.name());
                    match names.split_last() {
                        Some((last, [])) => format!("'{s}': expected {last}"),
                        Some((last, rest)) => format!("'{s}': expected {} or {last}", rest.join(", ")),
                        None => format!("'{s}': no value is named"),
                    }
                })
            }
        }
    };
}

/// Whose copies a context makes, decided once when it opens: vkcopy's, or
/// Halide's, which the suite runs to show Halide's behaviour and its bugs.
/// Halide copies through a staging buffer made for each copy, on one queue,
/// with `vkCmdCopyBuffer` between device buffers; so under [`CopyModel::Halide`]
/// a context imports no host memory, takes no mapped copies (the modes read
/// `Never`) and keeps small copies on the compute queue, whatever the options
/// ask, and under [`DeviceCopy::Auto`] copies device to device with
/// `vkCmdCopyBuffer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyModel {
    /// vkcopy's routes, as the options choose them.
    Vkcopy,
    /// Halide's: under the Halide policies, or with any Halide bug emulated.
    Halide,
}

impl CopyModel {
    /// The model of a context with `policy`, emulating a Halide bug or not.
    pub(crate) fn of(policy: crate::Policy, emulates_halide: bool) -> CopyModel {
        match policy == crate::Policy::Vkcopy && !emulates_halide {
            true => CopyModel::Vkcopy,
            false => CopyModel::Halide,
        }
    }
}

/// How device-to-device copies are made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DeviceCopy {
    /// The faster of the two paths, measured with GPU timestamps on the first copy
    /// of each size class (a factor of 4 in bytes, contiguous or not) of at least
    /// 1 MiB; smaller copies use `vkCmdCopyBuffer`. Under [`CopyModel::Halide`],
    /// always `vkCmdCopyBuffer`, as Halide does.
    #[default]
    Auto,
    /// Always `vkCmdCopyBuffer`.
    Transfer,
    /// The copy shader wherever it applies (offsets, sizes and strides multiples of
    /// 4 bytes, at most two outer dimensions, ranges within
    /// `maxStorageBufferRange`); `vkCmdCopyBuffer` elsewhere.
    Shader,
}

mode_names!(DeviceCopy, [Auto => "auto", Transfer => "transfer", Shader => "shader"]);

/// Whether small copies between host memory and device memory that is
/// host-visible are made by the CPU (as NVIDIA's GDRCopy does for CUDA): its
/// writes for uploads ([`ContextOptions::mapped_upload`]), its streaming loads
/// for readbacks ([`ContextOptions::mapped_readback`]). Only under
/// [`CopyModel::Vkcopy`], and only where the device has
/// host-visible, host-coherent device memory off a small BAR heap (resizable
/// BAR, integrated GPUs, CPU devices): then buffers under 4 MiB are placed
/// there ([`Role::DeviceMapped`](crate::Role::DeviceMapped)) unless both modes
/// are `Never`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MappedCopy {
    /// The faster of the CPU's copy and the GPU's, measured on the first copy
    /// of each size class (a factor of 4 in bytes) under 4 MiB; larger copies
    /// use the GPU.
    #[default]
    Auto,
    /// Copies go through the GPU.
    Never,
    /// Every copy into (or out of) host-visible device memory, whatever its size.
    Always,
}

mode_names!(MappedCopy, [Auto => "auto", Never => "never", Always => "always"]);

/// Which queue takes small blocking copies by the GPU (under 16 MiB: uploads by
/// copy, readbacks, device-to-device copies). Only under [`CopyModel::Vkcopy`]
/// (Halide submits to one queue); elsewhere the compute queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SmallCopyQueue {
    /// The fastest queue for the copy's path and size class, measured on the
    /// class's first copy: the compute queue, the transfer family's, or one of
    /// each further transfer-only family; the compute queue where the device has
    /// no second one.
    #[default]
    Auto,
    /// The queue of blocking work and kernels.
    Compute,
    /// The second queue; on a device with one queue, submissions of their own
    /// to it, ordered against the others by semaphores.
    Other,
}

mode_names!(SmallCopyQueue, [Auto => "auto", Compute => "compute", Other => "other"]);

/// The environment variables [`ContextOptions::from_env`] reads, with what each means.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("VKCOPY_DEVICE", "device index, or a case-insensitive substring of its name"),
    (
        "VKCOPY_DEVICE_TYPE",
        "cpu, integrated-gpu, discrete-gpu, virtual-gpu, other or gpu (any case)",
    ),
    ("VKCOPY_VALIDATION", "1: the Khronos validation layer with synchronization validation"),
    ("VKCOPY_POLICY", "vkcopy (default), halide or halide-legacy"),
    ("VKCOPY_IMPORT_HOST", "0: always stage, never import host memory"),
    (
        "VKCOPY_DEVICE_COPY",
        "device-to-device copies: auto (default, measured), transfer or shader",
    ),
    (
        "VKCOPY_MAPPED_UPLOAD",
        "small uploads written by the CPU into host-visible device memory: auto (default, measured), never or always",
    ),
    (
        "VKCOPY_MAPPED_READBACK",
        "small readbacks read by the CPU from host-visible device memory: auto (default, measured), never or always",
    ),
    (
        "VKCOPY_SMALL_COPY_QUEUE",
        "the queue of small copies by the GPU: auto (default, measured), compute or other",
    ),
    (
        "VKCOPY_TIMEOUT_MS",
        "the longest a wait for the device may take, in milliseconds (default 60000)",
    ),
    (
        "VKCOPY_SPIN_US",
        "how long a wait for the device polls before it blocks, in microseconds (default 10000)",
    ),
    (
        "VKCOPY_ALLOC_CONFIG",
        "pool MiB:min block MiB:max block MiB:max blocks:nearest multiple B (Halide's HL_VK_ALLOC_CONFIG)",
    ),
    (
        "VKCOPY_SIMULATE_MEMORY",
        "a recorded memory table (YAML) presented instead of the device's (features simulate, yaml)",
    ),
    (
        "VKCOPY_EMULATE",
        "Halide bugs to bring back, comma-separated (feature emulate)",
    ),
    (
        "VKCOPY_FAULTS",
        "Vulkan calls that fail, ENTRY@N=RESULT or ENTRY@N+=RESULT, comma-separated (feature fault-injection; read by Context::new)",
    ),
];

/// How long a wait for the device may take by default.
pub(crate) const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a wait for the device polls by default.
pub(crate) const DEFAULT_SPIN: std::time::Duration = std::time::Duration::from_millis(10);

impl Default for ContextOptions {
    /// The default device, no validation, the vkcopy policy, host import on,
    /// default blocks, measured device copies, mapped uploads and readbacks, the device's
    /// own memory table, no emulated bugs.
    fn default() -> Self {
        ContextOptions {
            device: DeviceSelector::Default,
            validation: false,
            policy: Policy::default(),
            import_host: true,
            alloc_config: AllocConfig::default(),
            device_copy: DeviceCopy::Auto,
            mapped_upload: MappedCopy::Auto,
            mapped_readback: MappedCopy::Auto,
            small_copy_queue: SmallCopyQueue::Auto,
            timeout: DEFAULT_TIMEOUT,
            spin: DEFAULT_SPIN,
            #[cfg(feature = "simulate")]
            simulate_memory: None,
            #[cfg(feature = "emulate")]
            emulate: Default::default(),
        }
    }
}

fn flag(name: &'static str, v: String) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" | "off" => Ok(false),
        "1" | "true" | "yes" | "on" => Ok(true),
        _ => Err(Error::BadSetting {
            name,
            value: v,
            reason: "expected 1 or 0".into(),
        }),
    }
}

impl ContextOptions {
    /// The defaults, changed by the variables of [`ENVIRONMENT`] that are set; no
    /// other variable is read, and nothing else in vkcopy reads the environment:
    ///
    /// - `VKCOPY_DEVICE`: [`ContextOptions::device`], an index or a name substring;
    /// - `VKCOPY_DEVICE_TYPE`: [`ContextOptions::device`] by type, when
    ///   `VKCOPY_DEVICE` is unset;
    /// - `VKCOPY_VALIDATION`: [`ContextOptions::validation`] (`1` / `0`);
    /// - `VKCOPY_POLICY`: [`ContextOptions::policy`];
    /// - `VKCOPY_IMPORT_HOST`: [`ContextOptions::import_host`] (`0` turns it off);
    /// - `VKCOPY_DEVICE_COPY`: [`ContextOptions::device_copy`];
    /// - `VKCOPY_MAPPED_UPLOAD`: [`ContextOptions::mapped_upload`];
    /// - `VKCOPY_MAPPED_READBACK`: [`ContextOptions::mapped_readback`];
    /// - `VKCOPY_SMALL_COPY_QUEUE`: [`ContextOptions::small_copy_queue`];
    /// - `VKCOPY_ALLOC_CONFIG`: [`ContextOptions::alloc_config`], as [`AllocConfig::parse`] reads it;
    /// - `VKCOPY_SIMULATE_MEMORY`: a YAML memory table (features `simulate`, `yaml`);
    /// - `VKCOPY_EMULATE`: Halide bugs to bring back (feature `emulate`).
    ///
    /// A value that is not understood is an [`Error::BadSetting`] naming the variable.
    pub fn from_env() -> Result<Self> {
        Self::from_settings(|name| std::env::var(name).ok())
    }

    /// The same as [`ContextOptions::from_env`], with each variable's value
    /// given by `lookup` instead of the environment: a host that configures
    /// vkcopy for someone else (vkcopy's library of Halide's ABI) passes its
    /// own settings this way.
    pub fn from_settings(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        // Unset and blank are the same.
        let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let mut options = ContextOptions::default();
        if let Some(v) = var("VKCOPY_DEVICE") {
            options.device = match v.trim().parse::<usize>() {
                Ok(i) => DeviceSelector::Index(i),
                Err(_) => DeviceSelector::Name(v.trim().to_owned()),
            };
        } else if let Some(v) = var("VKCOPY_DEVICE_TYPE") {
            let t = DeviceTypeFilter::parse(&v).ok_or_else(|| Error::BadSetting {
                name: "VKCOPY_DEVICE_TYPE",
                value: v.clone(),
                reason: "expected cpu, integrated-gpu, discrete-gpu, virtual-gpu, other or gpu"
                    .into(),
            })?;
            options.device = DeviceSelector::Type(t);
        }
        if let Some(v) = lookup("VKCOPY_VALIDATION") {
            options.validation = flag("VKCOPY_VALIDATION", v)?;
        }
        if let Some(v) = lookup("VKCOPY_IMPORT_HOST") {
            options.import_host = v.trim().is_empty() || flag("VKCOPY_IMPORT_HOST", v)?;
        }
        if let Some(v) = var("VKCOPY_POLICY") {
            options.policy = v.trim().parse().map_err(|_| Error::BadSetting {
                name: "VKCOPY_POLICY",
                value: v.clone(),
                reason: "expected vkcopy, halide or halide-legacy".into(),
            })?;
        }
        if let Some(v) = var("VKCOPY_DEVICE_COPY") {
            options.device_copy = v.parse().map_err(|reason| Error::BadSetting {
                name: "VKCOPY_DEVICE_COPY",
                value: v.clone(),
                reason,
            })?;
        }
        if let Some(v) = var("VKCOPY_MAPPED_UPLOAD") {
            options.mapped_upload = v.parse().map_err(|reason| Error::BadSetting {
                name: "VKCOPY_MAPPED_UPLOAD",
                value: v.clone(),
                reason,
            })?;
        }
        if let Some(v) = var("VKCOPY_MAPPED_READBACK") {
            options.mapped_readback = v.parse().map_err(|reason| Error::BadSetting {
                name: "VKCOPY_MAPPED_READBACK",
                value: v.clone(),
                reason,
            })?;
        }
        if let Some(v) = var("VKCOPY_SMALL_COPY_QUEUE") {
            options.small_copy_queue = v.parse().map_err(|reason| Error::BadSetting {
                name: "VKCOPY_SMALL_COPY_QUEUE",
                value: v.clone(),
                reason,
            })?;
        }
        if let Some(v) = var("VKCOPY_TIMEOUT_MS") {
            let ms: u64 = v.trim().parse().map_err(|_| Error::BadSetting {
                name: "VKCOPY_TIMEOUT_MS",
                value: v.clone(),
                reason: "expected a whole number of milliseconds".into(),
            })?;
            options.timeout = std::time::Duration::from_millis(ms);
        }
        if let Some(v) = var("VKCOPY_SPIN_US") {
            let us: u64 = v.trim().parse().map_err(|_| Error::BadSetting {
                name: "VKCOPY_SPIN_US",
                value: v.clone(),
                reason: "expected a whole number of microseconds".into(),
            })?;
            options.spin = std::time::Duration::from_micros(us);
        }
        if let Some(v) = var("VKCOPY_ALLOC_CONFIG") {
            options.alloc_config = AllocConfig::parse(&v).map_err(|e| Error::BadSetting {
                name: "VKCOPY_ALLOC_CONFIG",
                value: v.clone(),
                reason: e.to_string(),
            })?;
        }
        if let Some(v) = var("VKCOPY_SIMULATE_MEMORY") {
            #[cfg(all(feature = "simulate", feature = "yaml"))]
            {
                let path = std::path::Path::new(v.trim());
                options.simulate_memory =
                    Some(crate::memory::table::MemoryTable::from_yaml_file(path)?);
            }
            #[cfg(not(all(feature = "simulate", feature = "yaml")))]
            return Err(Error::BadSetting {
                name: "VKCOPY_SIMULATE_MEMORY",
                value: v,
                reason: "this build of vkcopy lacks the features simulate and yaml".into(),
            });
        }
        if let Some(v) = var("VKCOPY_EMULATE") {
            #[cfg(feature = "emulate")]
            {
                options.emulate =
                    crate::runtime::emulate::Emulate::parse(&v).map_err(|reason| {
                        Error::BadSetting {
                            name: "VKCOPY_EMULATE",
                            value: v.clone(),
                            reason,
                        }
                    })?;
            }
            #[cfg(not(feature = "emulate"))]
            return Err(Error::BadSetting {
                name: "VKCOPY_EMULATE",
                value: v,
                reason: "this build of vkcopy lacks the feature emulate".into(),
            });
        }
        Ok(options)
    }

    /// The variables of [`ENVIRONMENT`] that give these options to
    /// [`ContextOptions::from_settings`], for the fields that differ from the
    /// default; `Err` names a field that has no such text (a device chosen by
    /// type, a block size that is not whole MiB, a simulated table, emulated
    /// bugs). The validation layer is left out: a host puts it on by its own
    /// means.
    pub fn settings(&self) -> std::result::Result<Vec<(&'static str, String)>, String> {
        // Every field is named, so a new one does not compile until it has
        // its variable here (or is said to have none).
        let ContextOptions {
            device,
            validation: _,
            policy,
            import_host,
            alloc_config,
            device_copy,
            mapped_upload,
            mapped_readback,
            small_copy_queue,
            timeout,
            spin,
            #[cfg(feature = "simulate")]
            simulate_memory,
            #[cfg(feature = "emulate")]
            emulate,
        } = self;
        let plain = ContextOptions::default();
        let mut out = Vec::new();
        match device {
            DeviceSelector::Default => {}
            DeviceSelector::Index(i) => out.push(("VKCOPY_DEVICE", i.to_string())),
            DeviceSelector::Name(n) => {
                // Read back, digits are an index and spaces are trimmed.
                if n.trim().is_empty() || n.trim() != n || n.parse::<usize>().is_ok() {
                    return Err(format!("a device name {n:?}, which reads back otherwise"));
                }
                out.push(("VKCOPY_DEVICE", n.clone()));
            }
            DeviceSelector::Type(_) => return Err("a device chosen by type".into()),
        }
        if *policy != plain.policy {
            out.push(("VKCOPY_POLICY", policy.name().into()));
        }
        if *import_host != plain.import_host {
            out.push(("VKCOPY_IMPORT_HOST", u8::from(*import_host).to_string()));
        }
        let modes = [
            (
                "VKCOPY_DEVICE_COPY",
                device_copy.name(),
                plain.device_copy.name(),
            ),
            (
                "VKCOPY_MAPPED_UPLOAD",
                mapped_upload.name(),
                plain.mapped_upload.name(),
            ),
            (
                "VKCOPY_MAPPED_READBACK",
                mapped_readback.name(),
                plain.mapped_readback.name(),
            ),
            (
                "VKCOPY_SMALL_COPY_QUEUE",
                small_copy_queue.name(),
                plain.small_copy_queue.name(),
            ),
        ];
        out.extend(
            modes
                .into_iter()
                .filter(|(_, v, d)| v != d)
                .map(|(n, v, _)| (n, v.to_owned())),
        );
        if *timeout != plain.timeout {
            if timeout.subsec_nanos() % 1_000_000 != 0 {
                return Err(format!("a timeout of {timeout:?}, not whole milliseconds"));
            }
            out.push(("VKCOPY_TIMEOUT_MS", timeout.as_millis().to_string()));
        }
        if *spin != plain.spin {
            if spin.subsec_nanos() % 1_000 != 0 {
                return Err(format!("a spin of {spin:?}, not whole microseconds"));
            }
            out.push(("VKCOPY_SPIN_US", spin.as_micros().to_string()));
        }
        if *alloc_config != plain.alloc_config {
            out.push(("VKCOPY_ALLOC_CONFIG", alloc_config.setting()?));
        }
        #[cfg(feature = "simulate")]
        if simulate_memory.is_some() {
            return Err("a simulated memory table".into());
        }
        #[cfg(feature = "emulate")]
        if *emulate != plain.emulate {
            return Err("emulated Halide bugs".into());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::time::Duration;

    fn read_back(o: &ContextOptions) -> ContextOptions {
        let vars: HashMap<&str, String> = o.settings().unwrap().into_iter().collect();
        ContextOptions::from_settings(|n| vars.get(n).cloned()).unwrap()
    }

    #[test]
    fn settings_read_back_as_the_same_options() {
        let plain = ContextOptions::default();
        assert_eq!(plain.settings().unwrap(), vec![]);
        let o = ContextOptions {
            device: DeviceSelector::Name("llvmpipe".into()),
            policy: Policy::HalideLegacy,
            import_host: false,
            device_copy: DeviceCopy::Shader,
            mapped_upload: MappedCopy::Always,
            mapped_readback: MappedCopy::Never,
            small_copy_queue: SmallCopyQueue::Other,
            timeout: Duration::from_millis(1234),
            spin: Duration::from_micros(56),
            alloc_config: AllocConfig::parse("64:2:16:3:64").unwrap(),
            ..ContextOptions::default()
        };
        let back = read_back(&o);
        assert!(matches!(&back.device, DeviceSelector::Name(n) if n == "llvmpipe"));
        assert_eq!(back.policy, Policy::HalideLegacy);
        assert!(!back.import_host);
        assert_eq!(back.device_copy, DeviceCopy::Shader);
        assert_eq!(back.mapped_upload, MappedCopy::Always);
        assert_eq!(back.mapped_readback, MappedCopy::Never);
        assert_eq!(back.small_copy_queue, SmallCopyQueue::Other);
        assert_eq!(back.timeout, Duration::from_millis(1234));
        assert_eq!(back.spin, Duration::from_micros(56));
        assert_eq!(back.alloc_config, o.alloc_config);
        assert_eq!(read_back(&back).settings(), o.settings());
    }

    #[test]
    fn options_without_text_are_named() {
        let by_type = ContextOptions {
            device: DeviceSelector::Type(DeviceTypeFilter::parse("cpu").unwrap()),
            ..ContextOptions::default()
        };
        assert_eq!(by_type.settings().unwrap_err(), "a device chosen by type");
        let mut odd = ContextOptions::default();
        odd.alloc_config.minimum_block_size = 1000;
        assert_eq!(
            odd.settings().unwrap_err(),
            "a minimum block size of 1000 bytes, not whole MiB"
        );
        let digits = ContextOptions {
            device: DeviceSelector::Name("0".into()),
            ..ContextOptions::default()
        };
        assert!(digits
            .settings()
            .unwrap_err()
            .contains("reads back otherwise"));
        let short = ContextOptions {
            timeout: Duration::from_micros(500),
            ..ContextOptions::default()
        };
        assert_eq!(
            short.settings().unwrap_err(),
            "a timeout of 500µs, not whole milliseconds"
        );
    }
}
