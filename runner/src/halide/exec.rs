//! Runs a checked case on Halide's runtime: each buffer is a `halide_buffer_t`
//! over host memory the suite owns, and each step calls the Halide entry point
//! of the same name. Device data that a step makes without a copy (a device
//! fill or add) is written through Halide's own `halide_buffer_copy` from a
//! host-only buffer, so Halide holds every byte of device memory and the target's
//! dirty bits change as a device write's would (device dirty, host untouched).

use std::ffi::c_int;
use std::time::Instant;

use super::ffi::{
    self, HalideBuffer, HalideDimension, HalideType, Library, DEVICE_DIRTY, HOST_DIRTY,
};
use super::shim;
use super::shim::StepKind;
use crate::outcome::{Outcome, Status};
use crate::plan::{CasePlan, RuntimePlan};
use crate::rt::{Buffer, Dim, ElemType, Expr, MappedUpload, SmallCopyQueue};
use crate::steps::{checks, compute, copies, memory, views, Op, OpKind};

/// Why a step failed.
enum Fail {
    /// A Halide call returned an error code: its name and message.
    Runtime(&'static str, String),
    Check(String),
    /// What this case does here is beyond Halide's API: the case is skipped.
    Unsupported(String),
}

impl From<String> for Fail {
    fn from(m: String) -> Self {
        Fail::Check(m)
    }
}

impl From<crate::rt::Error> for Fail {
    fn from(e: crate::rt::Error) -> Self {
        Fail::Check(e.to_string())
    }
}

/// One buffer or view as Halide sees it.
struct Slot {
    /// The host side: shape and memory, never given a device by vkcopy.
    host: Buffer,
    raw: Box<HalideBuffer>,
    /// The shape `raw.dim` points at.
    _dims: Box<[HalideDimension]>,
    /// Its device memory is a crop or slice of another slot's, made by Halide:
    /// given back with `halide_device_release_crop`.
    view: bool,
    /// The buffer whose device memory this one is or views, by a number unique
    /// in the case: a buffer released while views of it live keeps its device
    /// memory until the last view goes, as Halide's `Buffer` does.
    root: u64,
}

/// Numbers for [`Slot::root`].
fn next_root() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn halide_type(e: ElemType) -> HalideType {
    let code = match e.name().as_bytes()[0] {
        b'i' => 0,
        b'u' => 1,
        _ => 2,
    };
    HalideType {
        code,
        bits: (e.bytes() * 8) as u8,
        lanes: 1,
    }
}

impl Slot {
    fn new(host: Buffer, flags: u64, view: bool) -> Result<Slot, Fail> {
        let mut dims: Box<[HalideDimension]> = host
            .dims()
            .iter()
            .map(|d| -> Result<HalideDimension, Fail> {
                let n = |v: i64| {
                    i32::try_from(v).map_err(|_| {
                        Fail::Check(format!(
                            "{}: {v} does not fit halide_dimension_t's 32 bits",
                            host.name()
                        ))
                    })
                };
                Ok(HalideDimension {
                    min: n(d.min)?,
                    extent: n(d.extent)?,
                    stride: n(d.stride)?,
                    flags: 0,
                })
            })
            .collect::<Result<_, _>>()?;
        let ptr = host.host_view().map_or(std::ptr::null_mut(), |h| {
            let mem = h.memory.read().unwrap_or_else(|p| p.into_inner());
            // SAFETY: the offset is within the memory (the view's first element).
            unsafe { mem.as_ptr().add(h.offset) as *mut u8 }
        });
        let raw = Box::new(HalideBuffer {
            device: 0,
            device_interface: std::ptr::null(),
            host: ptr,
            flags,
            ty: halide_type(host.elem()),
            dimensions: dims.len() as i32,
            dim: dims.as_mut_ptr(),
            padding: std::ptr::null_mut(),
        });
        Ok(Slot {
            host,
            raw,
            _dims: dims,
            view,
            root: next_root(),
        })
    }

    fn flag(&self, f: u64) -> bool {
        self.raw.flags & f != 0
    }

    fn set_flag(&mut self, f: u64, on: bool) {
        if on {
            self.raw.flags |= f;
        } else {
            self.raw.flags &= !f;
        }
    }
}

/// A running case on Halide.
struct State<'l> {
    lib: &'l Library,
    slots: Vec<Option<Slot>>,
    names: Vec<String>,
    /// Host to host copies.
    host_copies: u64,
    host_bytes: u64,
    /// Released buffers whose views still live.
    deferred: Vec<Slot>,
}

/// The name of a Halide error code and `halide_error`'s words, as a failure.
fn check(call: &str, code: c_int) -> Result<(), Fail> {
    let said = ffi::take_errors();
    if code == 0 {
        return Ok(());
    }
    let name = ffi::error_name(code);
    let words = if said.is_empty() {
        String::new()
    } else {
        format!(": {}", said.join("; "))
    };
    Err(Fail::Runtime(
        name,
        format!("{call} returned {code} ({name}){words}"),
    ))
}

impl State<'_> {
    fn get(&self, i: usize) -> Result<&Slot, Fail> {
        self.slots[i]
            .as_ref()
            .ok_or_else(|| Fail::Check(format!("{} has no buffer here", self.names[i])))
    }

    fn get_mut(&mut self, i: usize) -> Result<&mut Slot, Fail> {
        let name = &self.names[i];
        self.slots[i]
            .as_mut()
            .ok_or_else(|| Fail::Check(format!("{name} has no buffer here")))
    }

    /// Gives back what Halide holds for slot `i` and empties it. A buffer with
    /// live views keeps its device memory until the last of them goes.
    fn drop_slot(&mut self, i: usize) -> Result<(), Fail> {
        let Some(s) = self.slots[i].take() else {
            return Ok(());
        };
        let root = s.root;
        let viewed = |slots: &[Option<Slot>]| {
            slots
                .iter()
                .flatten()
                .any(|v| v.view && v.root == root && v.raw.device != 0)
        };
        if !s.view && s.raw.device != 0 && viewed(&self.slots) {
            self.deferred.push(s);
            return Ok(());
        }
        self.give_back(s)?;
        // The last view of a released buffer: the buffer goes too.
        if !viewed(&self.slots) {
            if let Some(k) = self.deferred.iter().position(|d| d.root == root) {
                let d = self.deferred.swap_remove(k);
                self.give_back(d)?;
            }
        }
        Ok(())
    }

    fn give_back(&self, mut s: Slot) -> Result<(), Fail> {
        if s.raw.device == 0 {
            return Ok(());
        }
        let lib = self.lib;
        if s.view {
            // SAFETY: `raw` is a crop or slice Halide made.
            check("halide_device_release_crop", unsafe {
                (lib.device_release_crop)(std::ptr::null_mut(), &mut *s.raw)
            })
        } else {
            // SAFETY: `raw` is a buffer with a device allocation from Halide.
            check("halide_device_free", unsafe {
                (lib.device_free)(std::ptr::null_mut(), &mut *s.raw)
            })
        }
    }

    fn put(&mut self, i: usize, s: Slot) -> Result<(), Fail> {
        self.drop_slot(i)?;
        self.slots[i] = Some(s);
        Ok(())
    }

    /// A host-only dense buffer of slot `i`'s shape.
    fn scratch(&self, i: usize) -> Result<Slot, Fail> {
        let src = self.get(i)?;
        let dims: Vec<Dim> =
            crate::rt::dense_dims(&src.host.dims().iter().map(|d| d.extent).collect::<Vec<_>>())
                .into_iter()
                .zip(src.host.dims())
                .map(|(mut d, s)| {
                    d.min = s.min;
                    d
                })
                .collect();
        let host = Buffer::with_dims("scratch", src.host.elem(), dims, true)?;
        Slot::new(host, 0, false)
    }

    /// A host-only dense copy of slot `i`'s current values (its device data when
    /// that is newer), read through `halide_buffer_copy`.
    fn read_back(&mut self, i: usize) -> Result<Slot, Fail> {
        let mut out = self.scratch(i)?;
        let lib = self.lib;
        let src = self.get_mut(i)?;
        // SAFETY: both buffers are valid; the destination has host memory.
        check("halide_buffer_copy", unsafe {
            (lib.buffer_copy)(
                std::ptr::null_mut(),
                &mut *src.raw,
                std::ptr::null(),
                &mut *out.raw,
            )
        })?;
        Ok(out)
    }

    /// Writes `values` (a host-only buffer of slot `i`'s shape) to slot `i`'s
    /// device memory through `halide_buffer_copy`.
    fn write_device(&mut self, i: usize, mut values: Slot) -> Result<(), Fail> {
        values.set_flag(HOST_DIRTY, true);
        let lib = self.lib;
        let dst = self.get_mut(i)?;
        // SAFETY: both buffers are valid.
        check("halide_buffer_copy", unsafe {
            (lib.buffer_copy)(
                std::ptr::null_mut(),
                &mut *values.raw,
                lib.vulkan,
                &mut *dst.raw,
            )
        })?;
        // As a pipeline leaves its output: on the device only.
        dst.set_flag(DEVICE_DIRTY, true);
        dst.set_flag(HOST_DIRTY, false);
        Ok(())
    }

    /// What a Halide pipeline does before a kernel: its inputs copied to the
    /// device, its output given device memory.
    fn kernel_prologue(&mut self, out: usize, inputs: &[usize]) -> Result<(), Fail> {
        let lib = self.lib;
        for &i in inputs {
            shim::begin_step(Some(StepKind::Upload));
            let slot = self.get_mut(i)?;
            // SAFETY: a valid buffer.
            let r = check("halide_copy_to_device", unsafe {
                (lib.copy_to_device)(std::ptr::null_mut(), &mut *slot.raw, lib.vulkan)
            });
            shim::end_step("the kernel's input");
            r?;
        }
        shim::begin_step(Some(StepKind::Malloc));
        let slot = self.get_mut(out)?;
        let r = if slot.raw.device == 0 {
            // SAFETY: a valid buffer.
            check("halide_device_malloc", unsafe {
                (lib.device_malloc)(std::ptr::null_mut(), &mut *slot.raw, lib.vulkan)
            })
        } else {
            Ok(())
        };
        shim::end_step("the kernel's output");
        shim::begin_step(Some(StepKind::Kernel));
        r
    }
}

/// What of the vkcopy-only vocabulary `ops` use, if any: the case is then
/// skipped on Halide with that named.
pub fn needs(plan: &RuntimePlan) -> Option<String> {
    if plan.policy.is_some() {
        return Some("a vkcopy selection policy (`policy:`)".into());
    }
    if plan.mapped_upload.is_some_and(|m| m != MappedUpload::Never) {
        return Some("vkcopy's uploads written by the CPU (`mapped_upload:`)".into());
    }
    if plan.small_copy_queue == Some(SmallCopyQueue::Other) {
        return Some("vkcopy's small copies on a second queue (`small_copy_queue:`)".into());
    }
    plan.ops.iter().find_map(op_needs)
}

fn op_needs(op: &Op) -> Option<String> {
    let what = |s: &str| Some(format!("{s} (step {}, line {})", op.step, op.line));
    match &op.kind {
        OpKind::AsyncCopies(_) => what("async copies"),
        OpKind::Memory(m) => match m {
            memory::Op::ReleaseUnused => what("release_unused"),
            memory::Op::NativeBuffer { .. }
            | memory::Op::WrapNative { .. }
            | memory::Op::DetachNative(_) => what("native Vulkan buffers on the suite's device"),
            memory::Op::DeviceAndHostMalloc(_) | memory::Op::DeviceAndHostFree(_) => {
                what("host memory allocated by the runtime")
            }
            _ => None,
        },
        OpKind::Compute(compute::Op::SumDevice { .. }) => what("a sum kernel on Halide's device"),
        OpKind::Checks(checks::Op::ExpectConcurrent(_)) => what("work-in-flight accounting"),
        OpKind::Checks(checks::Op::ExpectCounters(c)) => c
            .iter()
            .all(|(n, _)| counter(n).is_none())
            .then(|| what("only counters of vkcopy's own accounting"))
            .flatten(),
        OpKind::Measure(_) => what("timed copies (`measure`)"),
        OpKind::Threads { .. } => what("threads on one context"),
        OpKind::Repeat { ops, .. } => ops.iter().find_map(op_needs),
        OpKind::ExpectError { op, .. } => op_needs(op),
        _ => None,
    }
}

/// A counter Halide's runtime can be held to, read from the Vulkan objects it
/// holds (its blocks are its `VkDeviceMemory`s) and the `vkCmdCopyBuffer`s of
/// each copy step. Its regions are not among them: Halide makes a `VkBuffer`
/// for free regions too, so vkcopy's region counts (`live_regions`,
/// `live_buffers`, `device_mallocs`, `device_frees`) have no Halide meaning.
fn counter(name: &str) -> Option<fn(&shim::Live, &State) -> u64> {
    Some(match name {
        "live_device_memories" | "blocks" => |l, _| l.memories,
        "live_device_memory_bytes" | "block_bytes" => |l, _| l.memory_bytes,
        "live_mappings" => |l, _| l.mappings,
        "copies_to_device" => |l, _| l.copies[0],
        "bytes_to_device" => |l, _| l.bytes[0],
        "copies_to_host" => |l, _| l.copies[1],
        "bytes_to_host" => |l, _| l.bytes[1],
        "copies_device_to_device" => |l, _| l.copies[2],
        "bytes_device_to_device" => |l, _| l.bytes[2],
        "copies_host_to_host" => |_, s| s.host_copies,
        "bytes_host_to_host" => |_, s| s.host_bytes,
        _ => return None,
    })
}

/// Runs `plan` on the Halide runtime `lib`.
pub fn run(plan: &CasePlan, r: &RuntimePlan, lib: &Library, validation: bool) -> Outcome {
    let start = Instant::now();
    if let Some(why) = needs(r) {
        return Outcome::new(
            Status::Skip,
            format!("needs {why}, which Halide's runtime lacks"),
            start.elapsed(),
        );
    }
    shim::begin_case(r.simulate_memory.as_ref(), validation);
    ffi::take_errors();
    let mut state = State {
        lib,
        slots: r.slots.iter().map(|_| None).collect(),
        names: r.slots.clone(),
        host_copies: 0,
        host_bytes: 0,
        deferred: Vec::new(),
    };
    let mut problems = Vec::new();
    let mut status = Status::Pass;
    let mut skip = None;
    match run_steps(plan, r, &mut state) {
        Ok(()) => {}
        Err((Status::Skip, m)) => skip = Some(m),
        Err((s, m)) => {
            status = s;
            problems.push(m);
        }
    }
    // Views first, then the buffers they view; then Halide's context.
    for i in (0..state.slots.len()).rev() {
        if state.slots[i].as_ref().is_some_and(|s| s.view) {
            if let Err(f) = state.drop_slot(i) {
                problems.push(format!("at the end: {}", message(f)));
            }
        }
    }
    for i in 0..state.slots.len() {
        if let Err(f) = state.drop_slot(i) {
            problems.push(format!("at the end: {}", message(f)));
        }
    }
    for d in std::mem::take(&mut state.deferred) {
        if let Err(f) = state.give_back(d) {
            problems.push(format!("at the end: {}", message(f)));
        }
    }
    // SAFETY: no buffer holds a device allocation any more.
    unsafe { (lib.device_release)(std::ptr::null_mut(), lib.vulkan) };
    let live = shim::live();
    if live.memories > 0 || live.buffers > 0 {
        problems.push(format!(
            "leak check: after halide_device_release, Halide still holds {} VkDeviceMemory ({} bytes) and {} VkBuffer",
            live.memories, live.memory_bytes, live.buffers
        ));
    }
    for f in shim::take_findings() {
        problems.push(format!("Vulkan use: {f}"));
    }
    if !problems.is_empty() && status == Status::Pass {
        status = Status::Fail;
    }
    let mut out = match (skip, problems.is_empty()) {
        (Some(why), true) => Outcome::new(Status::Skip, why, start.elapsed()),
        (_, true) => Outcome::new(Status::Pass, String::new(), start.elapsed()),
        (_, false) => Outcome::new(status, problems.join("\n"), start.elapsed()),
    };
    // The layer's words are findings about Halide, listed apart; they do not
    // change the case's status.
    let said = shim::take_validation_messages();
    if !said.is_empty() {
        if !out.message.is_empty() {
            out.message.push('\n');
        }
        out.message.push_str(&format!(
            "validation layer on Halide's runtime: {} message(s):\n  {}",
            said.len(),
            said.join("\n  ")
        ));
    }
    out.placements = shim::placements();
    out
}

fn run_steps(plan: &CasePlan, r: &RuntimePlan, s: &mut State) -> Result<(), (Status, String)> {
    for (i, d) in r.buffers.iter().enumerate() {
        let b = crate::exec::new_buffer(d)
            .map_err(|e| (Status::Fail, format!("buffer {}: {e}", d.name)))?;
        let slot = Slot::new(b, 0, false).map_err(|f| (Status::Fail, message(f)))?;
        s.slots[i] = Some(slot);
    }
    let mut checked_type = false;
    for op in &r.ops {
        run_op(op, s).map_err(|f| {
            let status = match f {
                Fail::Unsupported(_) => Status::Skip,
                _ => Status::Fail,
            };
            (status, format!("{}: {}", op.located(), message(f)))
        })?;
        if !checked_type {
            if let Some(t) = shim::device_type() {
                checked_type = true;
                if let Some(why) = plan.unmet(t) {
                    return Err((Status::Skip, why));
                }
            }
        }
    }
    Ok(())
}

fn message(f: Fail) -> String {
    match f {
        Fail::Runtime(_, m) | Fail::Check(m) | Fail::Unsupported(m) => m,
    }
}

fn run_op(op: &Op, s: &mut State) -> Result<(), Fail> {
    run_kind(op, s)
}

fn run_kind(op: &Op, s: &mut State) -> Result<(), Fail> {
    match &op.kind {
        OpKind::Repeat { times, ops } => {
            for run in 0..*times {
                for inner in ops {
                    run_op(inner, s).map_err(|f| {
                        Fail::Check(format!(
                            "{} (run {} of {times} of the repeat at line {})",
                            message(f),
                            run + 1,
                            op.line
                        ))
                    })?;
                }
            }
            Ok(())
        }
        OpKind::ExpectError { error, op: inner } => match run_op(inner, s) {
            Ok(()) => Err(Fail::Check(format!(
                "expect_error: the step succeeded; expected error {error}"
            ))),
            Err(Fail::Runtime(name, _)) if name == error => Ok(()),
            Err(f) => Err(Fail::Check(format!(
                "expect_error: expected {error}, got: {}",
                message(f)
            ))),
        },
        OpKind::Memory(m) => run_memory(m, s),
        OpKind::Copies(c) => {
            let kind = match c {
                copies::Op::CopyToDevice(_) => Some(StepKind::Upload),
                copies::Op::CopyToHost(_) => Some(StepKind::Readback),
                copies::Op::BufferCopy {
                    from, to_device, ..
                } => {
                    // Halide's own choice in halide_buffer_copy.
                    let src = s.get(*from)?;
                    let from_host =
                        src.raw.device == 0 || (src.flag(HOST_DIRTY) && !src.raw.host.is_null());
                    match (from_host, *to_device) {
                        (true, true) => Some(StepKind::Upload),
                        (false, false) => Some(StepKind::Readback),
                        (false, true) => Some(StepKind::DeviceToDevice),
                        (true, false) => {
                            let bytes = src.host.size_in_bytes();
                            s.host_copies += 1;
                            s.host_bytes += bytes;
                            None
                        }
                    }
                }
            };
            shim::begin_step(kind);
            let r = run_copy(c, s);
            shim::end_step(op.step);
            r
        }
        OpKind::Views(v) => run_view(v, s),
        OpKind::Compute(c) => {
            shim::begin_step(Some(StepKind::Kernel));
            let r = run_compute(c, s);
            shim::end_step(op.step);
            r
        }
        OpKind::Checks(c) => run_check(c, s),
        _ => Err(Fail::Check(format!(
            "{}: not supported on Halide's runtime",
            op.step
        ))),
    }
}

fn run_memory(m: &memory::Op, s: &mut State) -> Result<(), Fail> {
    let lib = s.lib;
    match m {
        memory::Op::DeviceMalloc(b) => {
            shim::begin_step(Some(StepKind::Malloc));
            let slot = s.get_mut(*b)?;
            // SAFETY: a valid buffer.
            let r = check("halide_device_malloc", unsafe {
                (lib.device_malloc)(std::ptr::null_mut(), &mut *slot.raw, lib.vulkan)
            });
            shim::end_step("device_malloc");
            r
        }
        memory::Op::DeviceFree(b) => {
            let slot = s.get_mut(*b)?;
            // SAFETY: a valid buffer.
            check("halide_device_free", unsafe {
                (lib.device_free)(std::ptr::null_mut(), &mut *slot.raw)
            })
        }
        memory::Op::Release(b) => s.drop_slot(*b),
        memory::Op::SetDirty {
            buffer,
            host_dirty,
            device_dirty,
        } => {
            let slot = s.get_mut(*buffer)?;
            if let Some(h) = host_dirty {
                slot.set_flag(HOST_DIRTY, *h);
            }
            if let Some(d) = device_dirty {
                slot.set_flag(DEVICE_DIRTY, *d);
            }
            Ok(())
        }
        memory::Op::ReuseDeviceAllocations(on) => {
            // SAFETY: a plain call.
            check("halide_reuse_device_allocations", unsafe {
                (lib.reuse_device_allocations)(std::ptr::null_mut(), *on)
            })
        }
        memory::Op::FillHeap { heap, leave } => {
            shim::fill_heap(*heap, *leave).map_err(Fail::Unsupported)
        }
        memory::Op::DeviceRelease => {
            // SAFETY: Halide frees what it cached and its context.
            unsafe { (lib.device_release)(std::ptr::null_mut(), lib.vulkan) };
            check("halide_device_release", 0)
        }
        _ => Err(Fail::Check("not supported on Halide's runtime".into())),
    }
}

fn run_copy(c: &copies::Op, s: &mut State) -> Result<(), Fail> {
    let lib = s.lib;
    match c {
        copies::Op::CopyToDevice(b) => {
            let slot = s.get_mut(*b)?;
            // SAFETY: a valid buffer.
            check("halide_copy_to_device", unsafe {
                (lib.copy_to_device)(std::ptr::null_mut(), &mut *slot.raw, lib.vulkan)
            })
        }
        copies::Op::CopyToHost(b) => {
            let slot = s.get_mut(*b)?;
            // SAFETY: a valid buffer.
            check("halide_copy_to_host", unsafe {
                (lib.copy_to_host)(std::ptr::null_mut(), &mut *slot.raw)
            })
        }
        copies::Op::BufferCopy {
            from,
            to,
            to_device,
        } => {
            let mut src = s.slots[*from].take();
            let r = (|| {
                let src = src
                    .as_mut()
                    .ok_or_else(|| Fail::Check(format!("{} has no buffer here", s.names[*from])))?;
                let dst = s.get_mut(*to)?;
                let iface = if *to_device {
                    lib.vulkan
                } else {
                    std::ptr::null()
                };
                // SAFETY: two distinct valid buffers.
                check("halide_buffer_copy", unsafe {
                    (lib.buffer_copy)(std::ptr::null_mut(), &mut *src.raw, iface, &mut *dst.raw)
                })
            })();
            s.slots[*from] = src;
            r
        }
    }
}

fn run_view(v: &views::Op, s: &mut State) -> Result<(), Fail> {
    let lib = s.lib;
    let (from, to, host) = match v {
        views::Op::Crop {
            from,
            to,
            min,
            extent,
        } => {
            let f = s.get(*from)?;
            (*from, *to, f.host.cropped(&s.names[*to], min, extent)?)
        }
        views::Op::Slice { from, to, dim, pos } => {
            let f = s.get(*from)?;
            (*from, *to, f.host.sliced(&s.names[*to], *dim, *pos)?)
        }
        views::Op::ViewNoHost { from, to } => {
            let f = s.get(*from)?;
            (*from, *to, f.host.without_host(&s.names[*to]))
        }
        views::Op::View { from, to, at, dims } => {
            let f = s.get(*from)?;
            if f.raw.device != 0 {
                return Err(Fail::Unsupported(
                    "a strided view of device memory; Halide's API views device memory only by crop and slice".into(),
                ));
            }
            let host = f.host.strided_view(&s.names[*to], at, dims.clone())?;
            let slot = Slot::new(host, f.raw.flags, false)?;
            return s.put(*to, slot);
        }
    };
    // As Halide's `Buffer::cropped`: the view starts with its parent's flags.
    // Its device memory is a crop of its parent's only when the parent has some;
    // else a later malloc gives it memory of its own.
    let parent_device = s.get(from)?.raw.device != 0;
    let mut slot = Slot::new(host, s.get(from)?.raw.flags, parent_device)?;
    slot.root = s.get(from)?.root;
    let parent = s.get(from)?;
    if parent.raw.device != 0 {
        let p: *const HalideBuffer = &*parent.raw;
        let code = match v {
            // SAFETY: the parent is valid and distinct from the new view.
            views::Op::Slice { dim, pos, .. } => unsafe {
                (lib.device_slice)(
                    std::ptr::null_mut(),
                    p,
                    *dim as c_int,
                    *pos as c_int,
                    &mut *slot.raw,
                )
            },
            // SAFETY: as above.
            _ => unsafe { (lib.device_crop)(std::ptr::null_mut(), p, &mut *slot.raw) },
        };
        check(
            if matches!(v, views::Op::Slice { .. }) {
                "halide_device_slice"
            } else {
                "halide_device_crop"
            },
            code,
        )?;
    }
    s.put(to, slot)
}

fn run_compute(c: &compute::Op, s: &mut State) -> Result<(), Fail> {
    match c {
        compute::Op::FillHost { buffer, value } => {
            let slot = s.get_mut(*buffer)?;
            let f = value.compile();
            slot.host.fill(|c| f.eval(c))?;
            slot.set_flag(HOST_DIRTY, true);
            Ok(())
        }
        compute::Op::FillDevice { buffer, value } => {
            s.kernel_prologue(*buffer, &[])?;
            let mut values = s.scratch(*buffer)?;
            fill_expr(&mut values.host, value)?;
            s.write_device(*buffer, values)
        }
        compute::Op::AddHost { out, inputs, value } => {
            let inputs = if inputs.is_empty() {
                vec![*out]
            } else {
                inputs.clone()
            };
            for &i in &inputs {
                let b = s.get(i)?;
                if b.flag(DEVICE_DIRTY) {
                    return Err(Fail::Check(format!(
                        "add_host: input {} is device-dirty: its host memory is stale (copy_to_host first)",
                        b.host.name()
                    )));
                }
            }
            let ins: Vec<&Buffer> = inputs
                .iter()
                .map(|&i| s.get(i).map(|b| &b.host))
                .collect::<Result<_, _>>()?;
            let sums = compute::add_sums(&s.get(*out)?.host, &ins, value.as_ref())
                .map_err(|e| Fail::Check(e.to_string()))?;
            let o = s.get_mut(*out)?;
            let mut next = sums.into_iter();
            o.host.fill(|_| next.next().unwrap_or(0))?;
            o.set_flag(HOST_DIRTY, true);
            Ok(())
        }
        compute::Op::AddDevice {
            out,
            inputs,
            constant,
        } => {
            let inputs = if inputs.is_empty() {
                vec![*out]
            } else {
                inputs.clone()
            };
            s.kernel_prologue(*out, &inputs)?;
            let read: Vec<Slot> = inputs
                .iter()
                .map(|&i| s.read_back(i))
                .collect::<Result<_, _>>()?;
            let mut values = s.scratch(*out)?;
            let ins: Vec<&Buffer> = read.iter().map(|r| &r.host).collect();
            let sums = compute::add_sums(&values.host, &ins, None)
                .map_err(|e| Fail::Check(e.to_string()))?;
            let mut next = sums.into_iter();
            values
                .host
                .fill(|_| next.next().unwrap_or(0).wrapping_add(*constant))?;
            s.write_device(*out, values)
        }
        compute::Op::MapDevice { out, inputs, value } => {
            s.kernel_prologue(*out, inputs)?;
            // The output's own elements are the last operand (read in place).
            let read: Vec<Slot> = inputs
                .iter()
                .chain([out])
                .map(|&i| s.read_back(i))
                .collect::<Result<_, _>>()?;
            let mut values = s.scratch(*out)?;
            let ins: Vec<&Buffer> = read.iter().map(|r| &r.host).collect();
            let mapped = compute::combine(&values.host, &ins, |c, v| value.eval_with(c, v))
                .map_err(|e| Fail::Check(e.to_string()))?;
            let mut next = mapped.into_iter();
            values.host.fill(|_| next.next().unwrap_or(0))?;
            s.write_device(*out, values)
        }
        _ => Err(Fail::Check("not supported on Halide's runtime".into())),
    }
}

fn fill_expr(b: &mut Buffer, value: &Expr) -> Result<(), Fail> {
    let f = value.compile();
    b.fill(|c| f.eval(c)).map_err(Fail::from)
}

fn run_check(c: &checks::Op, s: &mut State) -> Result<(), Fail> {
    match c {
        checks::Op::Expect {
            buffer,
            value,
            region,
        } => checks::expect_in(&s.get(*buffer)?.host, value, region.as_ref())
            .map_err(|e| Fail::Check(e.to_string())),
        checks::Op::ExpectFlags {
            buffer,
            host_dirty,
            device_dirty,
            has_device,
        } => {
            let b = s.get(*buffer)?;
            let got = [b.flag(HOST_DIRTY), b.flag(DEVICE_DIRTY), b.raw.device != 0];
            checks::flags_as_expected(
                b.host.name(),
                [*host_dirty, *device_dirty, *has_device],
                got,
            )
            .map_err(Fail::Check)
        }
        checks::Op::ExpectCounters(want) => {
            let live = shim::live();
            // Counters without a Halide meaning are left out (see `counter`).
            checks::counters_as_expected(
                "expect_counters (Halide's VkBuffers and VkDeviceMemory)",
                want,
                |name| counter(name).map(|f| f(&live, s)),
            )
            .map_err(Fail::Check)
        }
        checks::Op::ExpectMemory {
            role,
            memory_type,
            flags,
            fallbacks,
        } => {
            let placements = shim::placements();
            let name = role.to_string();
            let p = placements
                .iter()
                .rev()
                .find(|p| p.role == name)
                .ok_or_else(|| format!("expect_memory: no {role} allocation was made"))?;
            let landed = shim::describe_type(p.memory_type);
            if let Some(t) = memory_type.filter(|t| *t != p.memory_type) {
                return Err(Fail::Check(format!(
                    "expect_memory: {role} landed in {landed}, expected {} (Halide's runtime)",
                    shim::describe_type(t)
                )));
            }
            if let Some(f) = fallbacks.filter(|f| *f != p.fallbacks) {
                return Err(Fail::Check(format!(
                    "expect_memory: {role} landed in {landed} after {} fallback(s), expected {f}",
                    p.fallbacks
                )));
            }
            if let Some((want, names)) = flags {
                if crate::rt::property_flags_name(*want) != p.flags {
                    return Err(Fail::Check(format!(
                        "expect_memory: {role} landed in {landed}, expected flags {names}"
                    )));
                }
            }
            Ok(())
        }
        checks::Op::ExpectConcurrent(_) => Err(Fail::Check(
            "expect_concurrent: not supported on Halide's runtime".into(),
        )),
    }
}
