//! Which files of `reports/expectations/` apply to a device: a layer for every
//! device, then one per driver, per device model and per exact device, each
//! optional, as Mesa layers its baselines. A new driver release or a new Mesa
//! then starts with the lists of its driver and model, not with none.
//!
//! ```text
//! reports/expectations/all.yaml                        every device
//! reports/expectations/driver/mesa-llvmpipe.yaml       vendor and driver name
//! reports/expectations/model/llvmpipe.yaml             the name, details in () left out
//! reports/expectations/device/llvmpipe-llvm-15-0-6-256-bits.yaml   the exact name
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use vkcopy_results::report::device_slug;

/// One layer, from the most general to the most specific.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    /// `all.yaml`.
    All,
    /// `driver/<vendor>-<driver name>.yaml`.
    Driver,
    /// `model/<name without details in parentheses>.yaml`.
    Model,
    /// `device/<exact name>.yaml`.
    Device,
}

impl Layer {
    /// The folders below `reports/expectations/` that hold layer files.
    pub const FOLDERS: [&'static str; 3] = vkcopy_results::report::LAYER_FOLDERS;

    /// The layer's name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Layer::All => "all",
            Layer::Driver => "driver",
            Layer::Model => "model",
            Layer::Device => "device",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What names a device's layer files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceKeys {
    /// `mesa-llvmpipe`, `nvidia`, `amd-radv`.
    pub driver: String,
    /// `llvmpipe`, `nvidia-h200`.
    pub model: String,
    /// `llvmpipe-llvm-15-0-6-256-bits`, `nvidia-h200`.
    pub device: String,
}

impl DeviceKeys {
    /// The keys of a device named `name` (`deviceName`), of vendor `vendor_id`,
    /// whose driver is named `driver_name` (`driverName`).
    pub fn new(name: &str, vendor_id: u32, driver_name: &str) -> DeviceKeys {
        let vendor = vendor_name(vendor_id);
        let driver = device_slug(driver_name);
        DeviceKeys {
            // NVIDIA's driver is named after its vendor: `nvidia`, not `nvidia-nvidia`.
            driver: if driver.starts_with(&vendor) {
                driver
            } else {
                format!("{vendor}-{driver}")
            },
            model: device_slug(&without_parentheses(name)),
            device: device_slug(name),
        }
    }

    /// The layer files in `dir` for this device, the most specific first (the
    /// order in which an entry is looked for), whether they exist or not.
    pub fn files(&self, dir: &Path) -> Vec<(Layer, PathBuf)> {
        vec![
            (
                Layer::Device,
                dir.join("device").join(format!("{}.yaml", self.device)),
            ),
            (
                Layer::Model,
                dir.join("model").join(format!("{}.yaml", self.model)),
            ),
            (
                Layer::Driver,
                dir.join("driver").join(format!("{}.yaml", self.driver)),
            ),
            (Layer::All, dir.join("all.yaml")),
        ]
    }
}

/// A PCI vendor's short name (Khronos' ids for vendors without one), else its
/// id in hex.
fn vendor_name(id: u32) -> String {
    let name = match id {
        0x1002 => "amd",
        0x1010 => "imagination",
        0x106b => "apple",
        0x10de => "nvidia",
        0x13b5 => "arm",
        0x14e4 => "broadcom",
        0x1ae0 => "google",
        0x5143 => "qualcomm",
        0x8086 => "intel",
        0x10001 => "vivante",
        0x10002 => "verisilicon",
        0x10003 => "kazan",
        0x10004 => "codeplay",
        0x10005 => "mesa",
        0x10006 => "pocl",
        0x10007 => "mobileye",
        _ => return format!("vendor-{id:04x}"),
    };
    name.to_owned()
}

/// `name` with the parts in parentheses left out: `llvmpipe (LLVM 15.0.6, 256
/// bits)` is `llvmpipe`, `AMD Radeon RX 7900 XTX (RADV NAVI31)` the board.
fn without_parentheses(name: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    if out.trim().is_empty() {
        name.to_owned()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lavapipe_nvidia_and_radv_get_their_layers() {
        let lvp = DeviceKeys::new("llvmpipe (LLVM 15.0.6, 256 bits)", 0x10005, "llvmpipe");
        assert_eq!(lvp.driver, "mesa-llvmpipe");
        assert_eq!(lvp.model, "llvmpipe");
        assert_eq!(lvp.device, "llvmpipe-llvm-15-0-6-256-bits");
        let h200 = DeviceKeys::new("NVIDIA H200", 0x10de, "NVIDIA");
        assert_eq!(
            (
                h200.driver.as_str(),
                h200.model.as_str(),
                h200.device.as_str()
            ),
            ("nvidia", "nvidia-h200", "nvidia-h200")
        );
        let radv = DeviceKeys::new("AMD Radeon RX 7900 XTX (RADV NAVI31)", 0x1002, "radv");
        assert_eq!(radv.driver, "amd-radv");
        assert_eq!(radv.model, "amd-radeon-rx-7900-xtx");
        assert_eq!(radv.device, "amd-radeon-rx-7900-xtx-radv-navi31");
        let odd = DeviceKeys::new("(only details)", 0x1234, "x");
        assert_eq!(
            (odd.driver.as_str(), odd.model.as_str()),
            ("vendor-1234-x", "only-details")
        );
    }

    #[test]
    fn files_run_from_the_most_specific_layer() {
        let keys = DeviceKeys::new("llvmpipe (LLVM 15.0.6, 256 bits)", 0x10005, "llvmpipe");
        let files = keys.files(Path::new("e"));
        let layers: Vec<Layer> = files.iter().map(|f| f.0).collect();
        assert_eq!(
            layers,
            [Layer::Device, Layer::Model, Layer::Driver, Layer::All]
        );
        assert_eq!(files[2].1, Path::new("e/driver/mesa-llvmpipe.yaml"));
        assert_eq!(files[3].1, Path::new("e/all.yaml"));
    }
}
