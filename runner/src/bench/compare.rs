//! vkcopy's results against CUDA's: each vkcopy result with CUDA's like-for-like
//! result (pinned host memory for vkcopy's own aligned memory, the same kind
//! otherwise) and CUDA's pageable one, and the side-by-side Markdown table.

use crate::bench::doc::{BenchDoc, BenchResult};
use crate::bench::sizes;

/// One line of the comparison.
#[derive(Clone, Debug)]
pub struct Row {
    pub vkcopy: BenchResult,
    /// CUDA's like-for-like result, if it has one.
    pub cuda: Option<BenchResult>,
    /// CUDA with pageable host memory, where CUDA measured the path so.
    pub pageable: Option<BenchResult>,
}

impl Row {
    /// Round trips are latencies: shown in microseconds, not GB/s.
    pub fn is_latency(&self) -> bool {
        self.vkcopy.path == "round_trip"
    }

    /// CUDA's time over vkcopy's, best runs: above 1, vkcopy is faster (the
    /// same as vkcopy's GB/s over CUDA's for one size).
    pub fn ratio(&self) -> Option<f64> {
        let c = self.cuda.as_ref()?;
        (self.vkcopy.best_seconds > 0.0).then(|| c.best_seconds / self.vkcopy.best_seconds)
    }

    /// A result's figure as this row shows it.
    pub fn figure(&self, r: &BenchResult) -> String {
        if self.is_latency() {
            format!("{:.1} us", r.best_seconds * 1e6)
        } else {
            format!("{:.2} GB/s", r.best_gbps)
        }
    }
}

/// CUDA's like-for-like kind of host memory for vkcopy's: pinned for any host
/// memory (the target is the bus's speed, whoever allocated the memory).
fn cuda_memory(vkcopy: &str) -> &str {
    match vkcopy {
        "aligned" | "unaligned" => "pinned",
        other => other,
    }
}

/// CUDA's result without pinning for vkcopy's kind of host memory: pageable
/// memory at the same alignment.
fn cuda_unpinned(vkcopy: &str) -> &str {
    match vkcopy {
        "unaligned" => "unaligned",
        _ => "pageable",
    }
}

/// Every vkcopy result in its order, with CUDA's matching results.
pub fn rows(vk: &BenchDoc, cuda: &BenchDoc) -> Vec<Row> {
    let find = |path: &str, memory: &str, bytes: u64| {
        cuda.results
            .iter()
            .find(|c| c.path == path && c.host_memory == memory && c.bytes == bytes)
            .cloned()
    };
    vk.results
        .iter()
        .map(|r| Row {
            vkcopy: r.clone(),
            cuda: find(&r.path, cuda_memory(&r.host_memory), r.bytes),
            pageable: (r.host_memory != "pageable")
                .then(|| find(&r.path, cuda_unpinned(&r.host_memory), r.bytes))
                .flatten(),
        })
        .collect()
}

/// The side-by-side table, with a line on what was compared.
pub fn markdown(vk: &BenchDoc, cuda: &BenchDoc, rows: &[Row]) -> String {
    let mut out = format!(
        "vkcopy {} on {} (driver {}, {}) against CUDA ({} {}) on {} (driver {}, {}).\n\
         Best runs by the host clock; GB/s = 1e9 bytes/s; round trips in microseconds.\n\
         CUDA: pinned host memory for vkcopy's aligned memory, device memory for \
         device_to_device. ratio: CUDA's time over vkcopy's (above 1, vkcopy is faster). \
         floor: the best bare copy on any queue family, recorded once, in vkcopy's run; \
         /floor: vkcopy's time over it.\n\n\
         | path | host memory | size | vkcopy | CUDA | CUDA pageable | ratio | floor | /floor |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        vk.tool_version,
        vk.device,
        vk.driver,
        vk.time,
        cuda.tool,
        cuda.tool_version,
        cuda.device,
        cuda.driver,
        cuda.time
    );
    let dash = || "-".to_owned();
    for r in rows {
        let v = &r.vkcopy;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            v.path,
            v.host_memory,
            sizes::format(v.bytes),
            r.figure(v),
            r.cuda.as_ref().map_or_else(dash, |c| r.figure(c)),
            r.pageable.as_ref().map_or_else(dash, |c| r.figure(c)),
            r.ratio().map_or_else(dash, |x| format!("{x:.2}")),
            v.best_floor().map_or_else(dash, |f| format!(
                "{:.1} us (family {})",
                f.best_seconds * 1e6,
                f.family
            )),
            v.over_floor().map_or_else(dash, |x| format!("{x:.2}")),
        ));
    }
    out
}
