//! The bench JSON: the document `bench/cuda_reference.py` writes, field for
//! field and in its order, read and written by the same structs.

use std::path::Path;

use serde::{Deserialize, Serialize};

use vkcopy_engine::stamp;
use vkcopy_engine::timing::{gbps, Samples};

/// One run of a bench: who made it, on what, and its results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchDoc {
    /// `vkcopy` here, `cuda-torch` from the CUDA reference.
    pub tool: String,
    /// The tool's version.
    pub tool_version: String,
    /// The device's name.
    pub device: String,
    /// The driver's name and version.
    pub driver: String,
    /// The machine's host name.
    pub host: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub time: String,
    /// One entry per path, host memory and size.
    pub results: Vec<BenchResult>,
    /// vkcopy's own: the queue each path and size class of copies by the GPU
    /// took, as measured on its first copy. Absent from the CUDA reference's
    /// documents, and where the device has one queue for copies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueChoice>,
}

/// The queue a path and size class of copies took, with each queue's time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueChoice {
    /// `readback`, `upload` or `device_to_device`.
    pub path: String,
    /// The class: copies of `class_bytes` up to 4 x `class_bytes`.
    pub class_bytes: u64,
    /// Bytes of the copy that was measured.
    pub bytes: u64,
    /// The family of the queue the class's copies take.
    pub family: u32,
    /// Each queue's best time, the compute queue's first.
    pub times: Vec<QueueFamilyTime>,
}

/// One queue's best time for a copy in [`QueueChoice`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueFamilyTime {
    /// The queue's family.
    pub family: u32,
    /// Submission to the end of the wait, host clock.
    pub best_seconds: f64,
}

impl QueueChoice {
    /// The JSON's form of one measurement.
    pub fn new(c: &vkcopy_engine::rt::QueueCalibration) -> Self {
        use vkcopy_engine::rt::CopyPath;
        let path = match c.path {
            CopyPath::HostToDevice => "upload",
            CopyPath::DeviceToHost => "readback",
            CopyPath::DeviceToDevice => "device_to_device",
            CopyPath::HostToHost => "host_to_host",
        };
        QueueChoice {
            path: path.into(),
            class_bytes: c.min_bytes,
            bytes: c.bytes,
            family: c.family(),
            times: c
                .times
                .iter()
                .map(|t| QueueFamilyTime {
                    family: t.family,
                    best_seconds: t.seconds,
                })
                .collect(),
        }
    }
}

/// One path, host memory and size. Seconds are per copy (per whole round trip for
/// `round_trip`); GB/s are 1e9 bytes/s of `bytes`, by the host clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// The copy path: `readback`, `upload`, `device_to_device`, `round_trip`.
    pub path: String,
    /// The host memory copied from or to: `aligned`, `unaligned`, or `device`.
    pub host_memory: String,
    /// Bytes per copy.
    pub bytes: u64,
    /// Timed runs counted.
    pub repeat: u32,
    /// The fastest run.
    pub best_seconds: f64,
    /// The median run.
    pub median_seconds: f64,
    /// `bytes` over `best_seconds`, in GB/s.
    pub best_gbps: f64,
    /// `bytes` over `median_seconds`, in GB/s.
    pub median_gbps: f64,
    /// From GPU timestamps; null where there are none.
    pub gpu_best_seconds: Option<f64>,
    /// The median by GPU timestamps; null where there are none.
    pub gpu_median_seconds: Option<f64>,
    /// vkcopy's own: the driver's floor under the same copy on each queue
    /// family (`vkcopy::floor`), timed in the same run. Absent from the CUDA
    /// reference's documents, and for round trips.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub floor: Vec<FloorTime>,
}

/// One queue family's bare copy of the same bytes, recorded once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FloorTime {
    /// The queue family's index.
    pub family: u32,
    /// Its flags, as Vulkan names them (`TRANSFER` alone: a copy engine).
    pub flags: String,
    /// The fastest run, by the host clock from submission to the fence seen.
    pub best_seconds: f64,
    /// The median run.
    pub median_seconds: f64,
}

impl FloorTime {
    /// The JSON's form of one family's time.
    pub fn new(t: &vkcopy_engine::rt::floor::FamilyTime) -> Self {
        FloorTime {
            family: t.family,
            flags: format!("{:?}", t.flags),
            best_seconds: t.best.as_secs_f64(),
            median_seconds: t.median.as_secs_f64(),
        }
    }
}

impl BenchResult {
    /// The result of `samples` of copies of `bytes` on `path` from or to `host_memory`.
    pub fn new(path: &str, host_memory: &str, bytes: u64, s: &Samples) -> Self {
        let (best, median) = (s.best(), s.median());
        BenchResult {
            path: path.to_owned(),
            host_memory: host_memory.to_owned(),
            bytes,
            repeat: s.host.len() as u32,
            best_seconds: best,
            median_seconds: median,
            best_gbps: gbps(bytes, best),
            median_gbps: gbps(bytes, median),
            gpu_best_seconds: s.gpu_best(),
            gpu_median_seconds: s.gpu_median(),
            floor: Vec::new(),
        }
    }

    /// The fastest family's floor, if one was timed.
    pub fn best_floor(&self) -> Option<&FloorTime> {
        self.floor
            .iter()
            .min_by(|a, b| a.best_seconds.total_cmp(&b.best_seconds))
    }

    /// vkcopy's best time over the fastest family's best: 1 is the driver's
    /// floor, and above it vkcopy's own cost shows.
    pub fn over_floor(&self) -> Option<f64> {
        let f = self.best_floor()?;
        (f.best_seconds > 0.0).then(|| self.best_seconds / f.best_seconds)
    }
}

impl BenchDoc {
    /// A vkcopy document for `device`, made now on this host, without results.
    pub fn new(device: &str, driver: &str) -> Self {
        BenchDoc {
            tool: "vkcopy".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            device: device.into(),
            driver: driver.into(),
            host: stamp::host_name(),
            time: stamp::utc_now(),
            results: Vec::new(),
            queues: Vec::new(),
        }
    }

    /// Reads a bench JSON file (vkcopy's or the CUDA reference's).
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes the document with two-space indents, through a temporary file so
    /// that an interrupted run leaves no half-written file.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
        }
        let mut text = serde_json::to_string_pretty(self).map_err(|e| err(&e))?;
        text.push('\n');
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| err(&e))?;
        std::fs::rename(&tmp, path).map_err(|e| err(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field names and order of the CUDA reference's `make_result` and `header`.
    #[test]
    fn fields_as_the_cuda_reference_writes_them() {
        let s = Samples {
            host: vec![0.03, 0.02, 0.04],
            gpu: vec![],
        };
        let doc = BenchDoc {
            results: vec![BenchResult::new("upload", "aligned", 1 << 30, &s)],
            ..BenchDoc::new("dev", "drv")
        };
        // serde_json's Value sorts keys: read the order from the text.
        let text = serde_json::to_string(&doc).unwrap();
        let order = |keys: &str| {
            let at: Vec<usize> = keys
                .split(' ')
                .map(|k| text.find(&format!("\"{k}\":")).expect(k))
                .collect();
            assert!(at.windows(2).all(|w| w[0] < w[1]), "{keys}: {text}");
        };
        order("tool tool_version device driver host time results");
        order(
            "path host_memory bytes repeat best_seconds median_seconds best_gbps \
             median_gbps gpu_best_seconds gpu_median_seconds",
        );
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 7);
        let r = &v["results"][0];
        assert_eq!(r.as_object().unwrap().len(), 10);
        assert_eq!(r["best_seconds"], 0.02);
        assert_eq!(r["median_seconds"], 0.03);
        assert!(r["gpu_best_seconds"].is_null());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/bench.json");
        doc.write(&path).unwrap();
        assert_eq!(BenchDoc::read(&path).unwrap(), doc);
    }
}
