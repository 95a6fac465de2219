//! `vkcopy-suite explain`: what a case would do, from its plan alone: shapes,
//! byte sizes, the bytes each copy moves and the memory types the policy picks
//! on a recorded table. Nothing runs; the table comes from the case's
//! `simulate_memory`, `--table`, or else the first Vulkan device.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::plan::{self, CasePlan, PlanKind, RuntimePlan};
use crate::rt::{
    intersection, span_bytes, Context, Dim, ElemType, MappedCopy, MemoryTable, Policy, Role,
};
use crate::runtime::Timed;
use crate::selection::{self, SelectionPlan};
use crate::steps::measure;
use crate::steps::{async_copies, checks, compute, copies, memory, views, Op, OpKind};

/// The file of `case`: a path, or a name such as `basic::round_trip_2d`.
fn case_file(root: &Path, case: &str) -> PathBuf {
    let p = Path::new(case);
    if p.is_file() {
        return p.to_owned();
    }
    let mut path = root.join(case.replace("::", "/"));
    if path.extension().is_none_or(|e| e != "yaml") {
        path.set_extension("yaml");
    }
    path
}

/// The explanation of `case` under `policy` (the case's own first, then this,
/// then the default) on the table the case simulates, else `table`, else the
/// first device's.
pub fn explain(
    root: &Path,
    case: &str,
    table: Option<&str>,
    policy: Option<Policy>,
) -> Result<String, String> {
    let path = case_file(root, case);
    let plan = plan::load(root, &path).map_err(|e| e.to_string())?;
    let mut out = String::new();
    let _ = writeln!(out, "case {} ({})", plan.name, path.display());
    let _ = writeln!(out, "about: {}", plan.about.trim());
    if let Some(m) = &plan.mirrors {
        let _ = writeln!(out, "mirrors: {m}");
    }
    match &plan.kind {
        PlanKind::Selection(s) => selection_lines(s, &mut out),
        PlanKind::Runtime(r) => {
            let (table, from) = pick_table(root, r, table)?;
            let (policy, why) = match (r.policy, policy) {
                (Some(p), _) => (p, "pinned by the case"),
                (None, Some(p)) => (p, "--policy"),
                (None, None) => (Policy::default(), "the default"),
            };
            let _ = writeln!(out, "policy: {policy} ({why})");
            let _ = writeln!(out, "table: {} ({from})", table.name);
            runtime_lines(&plan, r, &table, policy, &mut out);
        }
    }
    Ok(out)
}

fn pick_table(
    root: &Path,
    r: &RuntimePlan,
    table: Option<&str>,
) -> Result<(MemoryTable, String), String> {
    if let Some(t) = &r.simulate_memory {
        return Ok((t.clone(), "simulate_memory of the case".into()));
    }
    if let Some(name) = table {
        let t = table_named(root, name).map_err(|e| format!("--table: {e}"))?;
        return Ok((t, format!("--table {name}")));
    }
    let devices = Context::list_devices().map_err(|e| {
        format!("the case simulates no table and there is no Vulkan device ({e}); {TABLE_HINT}")
    })?;
    let d = devices
        .into_iter()
        .next()
        .ok_or(format!("no Vulkan device; {TABLE_HINT}"))?;
    Ok((d.memory, format!("device {}", d.index)))
}

const TABLE_HINT: &str =
    "give --table NAME (a file of the cases' devices/ folder) or --table PATH (a table file)";

/// The table `--table` names: a file of `root`'s `devices/` folder by its name
/// (`lavapipe`), or a table file by its path.
fn table_named(root: &Path, name: &str) -> Result<MemoryTable, String> {
    let as_path = Path::new(name);
    if name.contains(['/', '\\']) || name.ends_with(".yaml") || as_path.is_file() {
        return selection::table_file(as_path);
    }
    let devices = root.join("devices");
    if devices.join(format!("{name}.yaml")).is_file() {
        return selection::recorded_table(root, name);
    }
    Err(format!(
        "no recorded table '{name}' in {}/; {}; give the name of a table there or a path to a table file",
        devices.display(),
        selection::tables_there(&devices)
    ))
}

fn selection_lines(s: &SelectionPlan, out: &mut String) {
    let _ = writeln!(out, "selection on the recorded table {}:", s.table_name);
    for c in &s.checks {
        for &(policy, want) in &c.expect {
            let request = match (c.role, &c.raw) {
                (Some(role), _) => policy.request(role),
                (None, Some(raw)) => *raw,
                (None, None) => continue,
            };
            let picked = match policy.select(&s.table, &request, u32::MAX) {
                Ok(t) => s.table.describe_type(t),
                Err(e) => e.to_string(),
            };
            let _ = writeln!(
                out,
                "  line {}: {} under {policy} ({request}): picks {picked}; the case expects type {want}",
                c.line, c.request
            );
        }
    }
}

/// A slot's shape: `i32 128x128 (min 0,0 stride 1,128), 65536 bytes`; where
/// its elements do not fill the memory from the first to the last (a crop of
/// a wider buffer, a strided view) or share it (stride 0), both sizes, each said.
fn shape(elem: ElemType, dims: &[Dim]) -> String {
    let list = |f: fn(&Dim) -> i64| {
        dims.iter()
            .map(|d| f(d).to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let extents = dims
        .iter()
        .map(|d| d.extent.to_string())
        .collect::<Vec<_>>()
        .join("x");
    let (bytes, _) = copy_size(elem, dims);
    let span = span_bytes(elem, dims).unwrap_or(0);
    let aliased = dims.iter().any(|d| d.stride == 0 && d.extent > 1);
    let size = if span == bytes {
        format!("{bytes} bytes")
    } else if aliased {
        let coords = bytes / elem.bytes() as u64;
        format!("a span of {span} bytes that its {coords} coordinates share (stride 0)")
    } else {
        format!("{bytes} bytes of elements in a span of {span} bytes")
    };
    format!(
        "{} {extents} (min {} stride {}), {size}",
        elem.name(),
        list(|d| d.min),
        list(|d| d.stride),
    )
}

/// Bytes of the elements of `dims` and the contiguous runs they lie in.
pub fn copy_size(elem: ElemType, dims: &[Dim]) -> (u64, u64) {
    let elements: u64 = dims.iter().map(|d| d.extent.max(0) as u64).product();
    // Dimensions whose stride continues the run below them merge into it.
    let mut run = 1i64;
    let mut merged = 0;
    for d in dims {
        if d.stride == run || d.extent == 1 {
            run = run.saturating_mul(d.extent);
            merged += 1;
        } else {
            break;
        }
    }
    let runs: u64 = dims[merged..]
        .iter()
        .map(|d| d.extent.max(0) as u64)
        .product();
    (
        elements * elem.bytes() as u64,
        if elements == 0 { 0 } else { runs },
    )
}

/// The bytes of the intersection of two boxes of `elem`.
fn overlap_bytes(elem: ElemType, a: &[Dim], b: &[Dim]) -> u64 {
    match a.len() == b.len() {
        true => intersection(a, b) * elem.bytes() as u64,
        false => 0,
    }
}

struct Ctx<'a> {
    r: &'a RuntimePlan,
    table: &'a MemoryTable,
    policy: Policy,
}

impl Ctx<'_> {
    fn name(&self, slot: usize) -> &str {
        &self.r.slots[slot]
    }

    fn shape(&self, slot: usize) -> String {
        format!(
            "{}: {}",
            self.name(slot),
            shape(self.r.slot_elems[slot], &self.r.slot_dims[slot])
        )
    }

    fn memory(&self, role: Role) -> String {
        match self.policy.select_role(self.table, role, u32::MAX) {
            Ok(t) => self.table.describe_type(t),
            Err(e) => format!("none: {e}"),
        }
    }

    /// Where slot `slot`'s device memory lands, and under which role: small
    /// buffers go where the CPU can write their uploads, as the runtime places them.
    fn device_memory(&self, slot: usize) -> String {
        let bytes = span_bytes(self.r.slot_elems[slot], &self.r.slot_dims[slot]).unwrap_or(0);
        let mapped = [self.r.mapped_upload, self.r.mapped_readback]
            .iter()
            .any(|m| m.unwrap_or_default() != MappedCopy::Never);
        let role = self.policy.device_role(self.table, u32::MAX, bytes, mapped);
        format!("device memory ({role}): {}", self.memory(role))
    }

    fn copy(&self, slot: usize, what: &str, role: Role) -> String {
        let (bytes, runs) = copy_size(self.r.slot_elems[slot], &self.r.slot_dims[slot]);
        format!(
            "{what} {}: {bytes} bytes in {runs} contiguous run(s); staging, if the runtime stages: {}",
            self.name(slot),
            self.memory(role)
        )
    }
}

fn runtime_lines(
    plan: &CasePlan,
    r: &RuntimePlan,
    table: &MemoryTable,
    policy: Policy,
    out: &mut String,
) {
    let c = Ctx { r, table, policy };
    let _ = writeln!(out, "memory types under {policy} on {}:", table.name);
    for role in Role::ALL {
        let _ = writeln!(out, "  {:<13} {}", role.name(), c.memory(role));
    }
    let _ = writeln!(out, "buffers:");
    for (i, b) in r.buffers.iter().enumerate() {
        let host = match (b.host, b.host_offset) {
            (false, _) => "no host memory".to_owned(),
            (true, None) => "host memory of vkcopy, page-aligned".to_owned(),
            (true, Some(o)) => format!("caller host memory {o} bytes past a page"),
        };
        let _ = writeln!(out, "  {}; {host}", c.shape(i));
    }
    let _ = writeln!(out, "steps ({}):", r.ops.len());
    for op in &r.ops {
        let _ = writeln!(out, "  {}: {}", op.place(), step_line(&c, op));
    }
    let _ = writeln!(
        out,
        "then: the buffers are freed, and the case fails on anything still alive or any validation message"
    );
    let kernels = plan.kernel_elem_types();
    if !kernels.is_empty() {
        let names: Vec<&str> = kernels.iter().map(|t| t.name()).collect();
        let _ = writeln!(out, "kernels on: {}", names.join(", "));
    }
}

fn step_line(c: &Ctx, op: &Op) -> String {
    match &op.kind {
        OpKind::Memory(m) => match m {
            memory::Op::DeviceMalloc(s) => {
                format!("device_malloc {}; {}", c.shape(*s), c.device_memory(*s))
            }
            memory::Op::DeviceFree(s) => format!("device_free {}", c.name(*s)),
            memory::Op::DeviceAndHostMalloc(s) => format!(
                "device_and_host_malloc {}; {}",
                c.shape(*s),
                c.device_memory(*s)
            ),
            memory::Op::DeviceAndHostFree(s) => format!("device_and_host_free {}", c.name(*s)),
            memory::Op::Release(s) => format!("release {}", c.name(*s)),
            memory::Op::SetDirty {
                buffer,
                host_dirty,
                device_dirty,
            } => {
                let bits: Vec<String> =
                    [("host_dirty", host_dirty), ("device_dirty", device_dirty)]
                        .into_iter()
                        .filter_map(|(n, v)| v.map(|v| format!("{n} {v}")))
                        .collect();
                format!("set_dirty {}: {}", c.name(*buffer), bits.join(", "))
            }
            memory::Op::FillHeap { heap, leave } => {
                format!("fill_heap {heap}, leaving {leave} bytes")
            }
            memory::Op::ReleaseUnused => "release_unused".into(),
            memory::Op::ReuseDeviceAllocations(on) => format!("reuse_device_allocations {on}"),
            memory::Op::DeviceRelease => "device_release".into(),
            memory::Op::NativeBuffer { native, bytes } => {
                format!("native_buffer #{native}: a VkBuffer of {bytes} bytes outside the runtime")
            }
            memory::Op::WrapNative {
                buffer,
                native,
                offset,
            } => format!(
                "wrap_native {} in native buffer #{native} at byte {offset}",
                c.shape(*buffer)
            ),
            memory::Op::DetachNative(s) => format!("detach_native {}", c.name(*s)),
        },
        OpKind::Copies(k) => match k {
            copies::Op::CopyToDevice(s) => format!(
                "{}; if it has none yet, {}",
                c.copy(*s, "copy_to_device (if host-dirty)", Role::Upload),
                c.device_memory(*s)
            ),
            copies::Op::CopyToHost(s) => {
                c.copy(*s, "copy_to_host (if device-dirty)", Role::Readback)
            }
            copies::Op::BufferCopy {
                from,
                to,
                to_device,
            } => {
                let elem = c.r.slot_elems[*from];
                let bytes = overlap_bytes(elem, &c.r.slot_dims[*from], &c.r.slot_dims[*to]);
                let side = if *to_device { "device" } else { "host" };
                format!(
                    "buffer_copy {} -> {}'s {side} memory: {bytes} bytes (the boxes' intersection)",
                    c.name(*from),
                    c.name(*to)
                )
            }
        },
        OpKind::AsyncCopies(k) => match k {
            async_copies::Op::StartCopyToDevice(s) => format!(
                "{} on the upload stream, in flight until its wait",
                c.copy(*s, "start_copy_to_device (if host-dirty)", Role::Upload)
            ),
            async_copies::Op::StartCopyToHost(s) => format!(
                "{} on the readback stream, in flight until its wait",
                c.copy(*s, "start_copy_to_host (if device-dirty)", Role::Readback)
            ),
            async_copies::Op::StartBufferCopy {
                from, to, after, ..
            } => {
                let after: Vec<&str> = after.iter().map(|a| c.name(*a)).collect();
                format!(
                    "start_buffer_copy {} -> {}, after the copies into [{}]",
                    c.name(*from),
                    c.name(*to),
                    after.join(", ")
                )
            }
            async_copies::Op::Wait(s) => format!("wait for the copy into {}", c.name(*s)),
            async_copies::Op::ExpectOrder { first, then } => format!(
                "expect the copy into {} to begin after the one into {} ended",
                c.name(*then),
                c.name(*first)
            ),
        },
        OpKind::Views(v) => {
            let (step, from, to) = match v {
                views::Op::Crop { from, to, .. } => ("crop", from, to),
                views::Op::Slice { from, to, .. } => ("slice", from, to),
                views::Op::View { from, to, .. } => ("view", from, to),
                views::Op::ViewNoHost { from, to } => ("view_no_host", from, to),
            };
            let line = format!("{step} of {} makes {}", c.name(*from), c.shape(*to));
            match v {
                // A crop keeps its parent's strides: where it starts in the
                // parent's memory follows from the mins.
                views::Op::Crop { from, min, .. } => {
                    let parent = &c.r.slot_dims[*from];
                    let elements: i64 = parent
                        .iter()
                        .zip(min)
                        .map(|(d, m)| (m - d.min) * d.stride)
                        .sum();
                    let at = elements * c.r.slot_elems[*from].bytes() as i64;
                    format!("{line}, starting {at} bytes into {}", c.name(*from))
                }
                _ => line,
            }
        }
        OpKind::Compute(k) => match k {
            compute::Op::FillHost { buffer, .. } => format!("fill_host {}", c.shape(*buffer)),
            compute::Op::FillDevice { buffer, .. } => {
                format!("fill_device {} (a kernel)", c.shape(*buffer))
            }
            compute::Op::AddHost { out, inputs, .. } => {
                format!("add_host into {} from {}", c.shape(*out), names(c, inputs))
            }
            compute::Op::AddDevice { out, inputs, .. } => format!(
                "add_device into {} from {} (a kernel)",
                c.shape(*out),
                names(c, inputs)
            ),
            compute::Op::MapDevice {
                out, inputs, value, ..
            } => format!(
                "map_device into {} = {value} from {} (a kernel)",
                c.shape(*out),
                names(c, inputs)
            ),
            compute::Op::SumDevice { out, input, dim } => format!(
                "sum_device of {} over dimension {dim} into {} (a kernel)",
                c.name(*input),
                c.shape(*out)
            ),
        },
        OpKind::Checks(k) => match k {
            checks::Op::Expect { buffer, region, .. } => match region {
                None => format!("expect every element of {}", c.shape(*buffer)),
                Some((min, extent)) => format!(
                    "expect {} over min {min:?} extent {extent:?}",
                    c.name(*buffer)
                ),
            },
            checks::Op::ExpectFlags { buffer, .. } => format!("expect_flags {}", c.name(*buffer)),
            checks::Op::ExpectCounters(list) => {
                let list: Vec<String> = list.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("expect_counters {}", list.join(", "))
            }
            checks::Op::ExpectConcurrent(n) => {
                format!("expect_concurrent: {n} pieces of work in flight at once, at least")
            }
            checks::Op::ExpectMemory {
                role,
                memory_type,
                flags,
                has,
                lacks,
                fallbacks,
            } => {
                let mut want = Vec::new();
                if let Some(t) = memory_type {
                    let t: Vec<String> = t.iter().map(u32::to_string).collect();
                    want.push(format!("type {}", t.join(" or ")));
                }
                for (what, f) in [("flags", flags), ("has", has), ("lacks", lacks)] {
                    if let Some((_, names)) = f {
                        want.push(format!("{what} {names}"));
                    }
                }
                if let Some(n) = fallbacks {
                    want.push(format!("{n} fallback(s)"));
                }
                format!(
                    "expect_memory {role} ({}): this table gives {}",
                    want.join(", "),
                    c.memory(*role)
                )
            }
        },
        OpKind::Measure(m) => match m {
            measure::Op::Profiling(on) => format!("profiling {on}"),
            measure::Op::Measure { timed, repeat, .. } => {
                let what = match timed {
                    Timed::CopyToHost(s) => c.copy(*s, "copy_to_host", Role::Readback),
                    Timed::CopyToDevice(s) => c.copy(*s, "copy_to_device", Role::Upload),
                    Timed::DeviceToDevice { from, to } => {
                        let (bytes, _) = copy_size(c.r.slot_elems[*from], &c.r.slot_dims[*from]);
                        format!(
                            "device to device {} -> {}: {bytes} bytes",
                            c.name(*from),
                            c.name(*to)
                        )
                    }
                };
                format!("measure {repeat} timed runs of {what}")
            }
        },
        OpKind::ExpectError { error, op } => {
            format!("expect_error {error} from: {}", step_line(c, op))
        }
        OpKind::Repeat { times, ops } => {
            let each: Vec<String> = ops.iter().map(|o| step_line(c, o)).collect();
            format!("{times} times: {}", each.join("; "))
        }
        OpKind::OnRuntime { halide, vkcopy } => {
            let list = |ops: &[Op]| {
                let each: Vec<String> = ops.iter().map(|o| step_line(c, o)).collect();
                if each.is_empty() {
                    "nothing".to_string()
                } else {
                    each.join("; ")
                }
            };
            format!(
                "under Halide's generic device layer: {}; on vkcopy: {}",
                list(halide),
                list(vkcopy)
            )
        }
        OpKind::Threads { count, ops } => {
            let lists: Vec<String> = ops
                .iter()
                .map(|list| {
                    let each: Vec<String> = list.iter().map(|o| step_line(c, o)).collect();
                    each.join("; ")
                })
                .collect();
            match lists.as_slice() {
                [one] => format!("{count} threads at once, each with its own buffers: {one}"),
                _ => format!(
                    "{count} threads at once, each with its own buffers: {}",
                    lists
                        .iter()
                        .enumerate()
                        .map(|(t, l)| format!("thread {t}: {l}"))
                        .collect::<Vec<_>>()
                        .join(" | ")
                ),
            }
        }
    }
}

fn names(c: &Ctx, slots: &[usize]) -> String {
    if slots.is_empty() {
        return "no inputs".into();
    }
    slots
        .iter()
        .map(|s| c.name(*s))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(v: &[(i64, i64)]) -> Vec<Dim> {
        v.iter()
            .map(|&(extent, stride)| Dim {
                min: 0,
                extent,
                stride,
            })
            .collect()
    }

    #[test]
    fn copy_sizes_count_contiguous_runs() {
        assert_eq!(
            copy_size(ElemType::I32, &dims(&[(128, 1), (128, 128)])),
            (65536, 1)
        );
        assert_eq!(
            copy_size(ElemType::U16, &dims(&[(100, 2), (50, 300)])),
            (10000, 5000)
        );
        assert_eq!(
            copy_size(ElemType::U8, &dims(&[(64, 1), (64, 256)])),
            (4096, 64)
        );
        assert_eq!(copy_size(ElemType::F32, &dims(&[(0, 1)])), (0, 0));
    }

    #[test]
    fn overlap_is_the_intersection() {
        let a = dims(&[(10, 1), (10, 10)]);
        let mut b = dims(&[(10, 1), (10, 10)]);
        b[0].min = 5;
        assert_eq!(overlap_bytes(ElemType::I32, &a, &b), 5 * 10 * 4);
    }
}
