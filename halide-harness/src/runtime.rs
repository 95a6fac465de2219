//! Halide's runtime as a [`Runtime`]: each buffer is a `halide_buffer_t`
//! over host memory the suite owns, and each primitive calls the Halide entry
//! point of its name. Halide has no kernels of the suite's, so a device fill,
//! add or map is emulated: computed on the host from the inputs' current
//! values and written with Halide's own `halide_buffer_copy`, which leaves the
//! output's dirty bits as a pipeline's would (device dirty, host untouched). A
//! failure there says it came from the emulation.

use std::ffi::c_int;
use std::sync::MutexGuard;

use super::ffi::{
    self, HalideBuffer, HalideDimension, HalideType, Library, DEVICE_DIRTY, HOST_DIRTY,
};
use super::shim::{self, StepKind};
use vkcopy_engine::rt::{Buffer, DeviceType, Dim, ElemType, Expr};
use vkcopy_engine::runtime::{
    Capability, DeviceKernel, Finish, Flags, Runtime, StepError, ViewKind,
};
use vkcopy_engine::{add_sums, combine, sums_over};
use vkcopy_results::outcome::PlacementRecord;

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
    /// Its host memory is the runtime's (`halide_device_and_host_malloc`),
    /// which only `halide_device_and_host_free` may free.
    runtime_host: bool,
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
    fn new(host: Buffer, flags: u64, view: bool) -> Result<Slot, StepError> {
        let mut dims: Box<[HalideDimension]> = host
            .dims()
            .iter()
            .map(|d| -> Result<HalideDimension, StepError> {
                let n = |v: i64| {
                    i32::try_from(v).map_err(|_| {
                        StepError::Check(format!(
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
            runtime_host: false,
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

/// What Halide's runtime has beyond the primitives: none of vkcopy's own.
pub const CAPABILITIES: &[Capability] = &[Capability::SumKernel];

/// What a library that takes vkcopy's settings has beyond the primitives
/// (vkcopy's library, `ffi::Library::takes_settings`): vkcopy's
/// policies and routes, which its settings choose.
pub const WITH_SETTINGS: &[Capability] = &[
    Capability::SumKernel,
    Capability::Policies,
    Capability::MappedCopies,
    Capability::SecondQueue,
];

/// A case running on Halide's runtime. Halide's state is global to the
/// process, so one case runs at a time: the guard is held until it is dropped.
pub struct HalideRuntime {
    lib: &'static Library,
    slots: Vec<Option<Slot>>,
    names: Vec<String>,
    /// Host to host copies.
    host_copies: u64,
    host_bytes: u64,
    /// Released buffers whose views still live.
    deferred: Vec<Slot>,
    /// The library's own placements made before this case (in-process runs).
    placements_before: usize,
    _one: MutexGuard<'static, ()>,
}

/// The name of a Halide error code and `halide_error`'s words, as a failure.
fn check(call: &str, code: c_int) -> Result<(), StepError> {
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
    Err(StepError::Call {
        name,
        message: format!("{call} returned {code} ({name}){words}"),
    })
}

/// A failure of an emulated kernel, said to be one.
fn emulated(e: StepError) -> StepError {
    let how = "emulated kernel (computed on the host, written with halide_buffer_copy)";
    match e {
        StepError::Call { name, message } => StepError::Call {
            name,
            message: format!("{how}: {message}"),
        },
        StepError::Check(m) => StepError::Check(format!("{how}: {m}")),
        other => other,
    }
}

impl HalideRuntime {
    /// Device regions that buffers hold: Halide's runtime gives each buffer
    /// one (`halide_buffer_t::device`), and its crops and slices are regions
    /// over their parent's memory, not counted; released buffers whose views
    /// live still hold theirs.
    fn held_regions(&self) -> u64 {
        self.slots
            .iter()
            .flatten()
            .chain(&self.deferred)
            .filter(|s| !s.view && s.raw.device != 0)
            .count() as u64
    }

    /// A case on `lib` with `slots` named so, holding `one` (the process's turn).
    pub(super) fn new(
        lib: &'static Library,
        names: Vec<String>,
        one: MutexGuard<'static, ()>,
    ) -> Self {
        HalideRuntime {
            lib,
            slots: names.iter().map(|_| None).collect(),
            names,
            host_copies: 0,
            host_bytes: 0,
            deferred: Vec::new(),
            placements_before: lib.own_placements().map_or(0, |p| p.len()),
            _one: one,
        }
    }

    fn get(&self, i: usize) -> Result<&Slot, StepError> {
        self.slots[i]
            .as_ref()
            .ok_or_else(|| StepError::Check(format!("{} has no buffer here", self.names[i])))
    }

    fn get_mut(&mut self, i: usize) -> Result<&mut Slot, StepError> {
        let name = &self.names[i];
        self.slots[i]
            .as_mut()
            .ok_or_else(|| StepError::Check(format!("{name} has no buffer here")))
    }

    /// Gives back what Halide holds for slot `i` and empties it. A buffer with
    /// live views keeps its device memory until the last of them goes, as
    /// Halide's `Buffer` does.
    fn drop_slot(&mut self, i: usize) -> Result<(), StepError> {
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

    fn give_back(&self, mut s: Slot) -> Result<(), StepError> {
        let lib = self.lib;
        if s.runtime_host {
            // SAFETY: host and device memory Halide allocated, freed once.
            return check("halide_device_and_host_free", unsafe {
                lib.device_and_host_free(&mut *s.raw)
            });
        }
        if s.raw.device == 0 {
            return Ok(());
        }
        if s.view {
            // SAFETY: `raw` is a crop or slice Halide made.
            check("halide_device_release_crop", unsafe {
                lib.device_release_crop(&mut *s.raw)
            })
        } else {
            // SAFETY: `raw` is a buffer with a device allocation from Halide.
            check("halide_device_free", unsafe {
                lib.device_free(&mut *s.raw)
            })
        }
    }

    fn put_slot(&mut self, i: usize, s: Slot) -> Result<(), StepError> {
        self.drop_slot(i)?;
        self.slots[i] = Some(s);
        Ok(())
    }

    /// A host-only dense buffer of slot `i`'s shape.
    fn scratch(&self, i: usize) -> Result<Slot, StepError> {
        let src = self.get(i)?;
        // In the slot's own layout, so that the copy between the two is what a
        // kernel's own reads and writes amount to: Halide's staging copies
        // between different layouts take paths that no pipeline takes (and
        // some of them are wrong: `regressions::staging_layout_mismatch`).
        if src.host.dims().iter().all(|d| d.stride > 0) {
            let host =
                Buffer::with_dims("scratch", src.host.elem(), src.host.dims().to_vec(), true)?;
            return Slot::new(host, 0, false);
        }
        let dims: Vec<Dim> = vkcopy_engine::rt::dense_dims(
            &src.host.dims().iter().map(|d| d.extent).collect::<Vec<_>>(),
        )
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
    fn read_back(&mut self, i: usize) -> Result<Slot, StepError> {
        let mut out = self.scratch(i)?;
        let lib = self.lib;
        let src = self.get_mut(i)?;
        // SAFETY: both buffers are valid; the destination has host memory.
        check("halide_buffer_copy", unsafe {
            lib.buffer_copy(&mut *src.raw, false, &mut *out.raw)
        })?;
        Ok(out)
    }

    /// Writes `values` (a host-only buffer of slot `i`'s shape) to slot `i`'s
    /// device memory through `halide_buffer_copy`.
    fn write_device(&mut self, i: usize, mut values: Slot) -> Result<(), StepError> {
        values.set_flag(HOST_DIRTY, true);
        let lib = self.lib;
        let dst = self.get_mut(i)?;
        // SAFETY: both buffers are valid.
        check("halide_buffer_copy", unsafe {
            lib.buffer_copy(&mut *values.raw, true, &mut *dst.raw)
        })?;
        // As a pipeline leaves its output: on the device only.
        dst.set_flag(DEVICE_DIRTY, true);
        dst.set_flag(HOST_DIRTY, false);
        Ok(())
    }

    /// `call` on slot `i`'s buffer as a step of `kind`: what it binds is placed
    /// under the step's role, and device memory it gave the buffer under `device`.
    fn step(
        &mut self,
        i: usize,
        kind: StepKind,
        name: &str,
        call: impl FnOnce(&Library, &mut HalideBuffer) -> Result<(), StepError>,
    ) -> Result<(), StepError> {
        let lib = self.lib;
        let slot = self.get_mut(i)?;
        let had_device = slot.raw.device != 0;
        shim::begin_step(Some(kind));
        let r = call(lib, &mut slot.raw);
        if !had_device && slot.raw.device != 0 {
            shim::claim_device();
        }
        shim::end_step(name);
        r
    }

    fn upload(&mut self, i: usize, why: &str) -> Result<(), StepError> {
        self.step(i, StepKind::Upload, why, |lib, raw| {
            // SAFETY: a valid buffer.
            check("halide_copy_to_device", unsafe { lib.copy_to_device(raw) })
        })
    }

    fn malloc(&mut self, i: usize, why: &str) -> Result<(), StepError> {
        self.step(i, StepKind::Malloc, why, |lib, raw| {
            if raw.device != 0 {
                return Ok(());
            }
            // SAFETY: a valid buffer.
            check("halide_device_malloc", unsafe { lib.device_malloc(raw) })
        })
    }

    /// What a Halide pipeline does before a kernel: its inputs copied to the
    /// device, its output given device memory.
    fn kernel_prologue(&mut self, out: usize, inputs: &[usize]) -> Result<(), StepError> {
        for &i in inputs {
            self.upload(i, "the kernel's input")?;
        }
        self.malloc(out, "the kernel's output")
    }

    /// The emulated device kernels.
    fn emulate(&mut self, kernel: DeviceKernel<'_>) -> Result<(), StepError> {
        let in_place = |out: usize, inputs: &[usize]| {
            if inputs.is_empty() {
                vec![out]
            } else {
                inputs.to_vec()
            }
        };
        match kernel {
            DeviceKernel::Fill { buffer, value } => {
                self.kernel_prologue(buffer, &[])?;
                let mut values = self.scratch(buffer)?;
                fill_expr(&mut values.host, value)?;
                self.write_device(buffer, values)
            }
            DeviceKernel::Add {
                out,
                inputs,
                constant,
            } => {
                let inputs = in_place(out, inputs);
                self.kernel_prologue(out, &inputs)?;
                let read: Vec<Slot> = inputs
                    .iter()
                    .map(|&i| self.read_back(i))
                    .collect::<Result<_, _>>()?;
                let mut values = self.scratch(out)?;
                let ins: Vec<&Buffer> = read.iter().map(|r| &r.host).collect();
                let sums = add_sums(&values.host, &ins, None)?;
                let mut next = sums.into_iter();
                values
                    .host
                    .fill(|_| next.next().unwrap_or(0).wrapping_add(constant))?;
                self.write_device(out, values)
            }
            DeviceKernel::Map { out, inputs, value } => {
                self.kernel_prologue(out, inputs)?;
                // The output's own elements are the last operand (read in place).
                let read: Vec<Slot> = inputs
                    .iter()
                    .chain([&out])
                    .map(|&i| self.read_back(i))
                    .collect::<Result<_, _>>()?;
                let mut values = self.scratch(out)?;
                let ins: Vec<&Buffer> = read.iter().map(|r| &r.host).collect();
                let mapped = combine(&values.host, &ins, |c, v| value.eval_with(c, v))?;
                let mut next = mapped.into_iter();
                values.host.fill(|_| next.next().unwrap_or(0))?;
                self.write_device(out, values)
            }
            DeviceKernel::Sum { out, input, dim } => {
                self.kernel_prologue(out, &[input])?;
                let read = self.read_back(input)?;
                let mut values = self.scratch(out)?;
                let sums = sums_over(&values.host, &read.host, dim)?;
                let mut next = sums.into_iter();
                values.host.fill(|_| next.next().unwrap_or(0))?;
                self.write_device(out, values)
            }
        }
    }
}

/// Where `view` starts in `parent`'s coordinates, when it is a crop of
/// `parent` with other coordinates: the same strides, a box inside the
/// parent's. None for any other view.
fn crop_origin(parent: &Buffer, view: &Buffer) -> Option<Vec<i32>> {
    let (p, v) = (parent.dims(), view.dims());
    if p.len() != v.len()
        || p.iter()
            .zip(v)
            .any(|(a, b)| a.stride != b.stride || a.stride <= 0)
    {
        return None;
    }
    let bytes = parent.elem().bytes();
    let delta = view
        .host_view()?
        .offset
        .checked_sub(parent.host_view()?.offset)?;
    if delta % bytes != 0 {
        return None;
    }
    let mut left = (delta / bytes) as i64;
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(p[i].stride));
    let mut at = vec![0i64; p.len()];
    for i in order {
        at[i] = left / p[i].stride;
        left -= at[i] * p[i].stride;
    }
    let inside = at
        .iter()
        .zip(p.iter().zip(v))
        .all(|(&c, (pd, vd))| c + vd.extent <= pd.extent);
    if left != 0 || !inside {
        return None;
    }
    at.iter()
        .zip(p)
        .map(|(&c, d)| i32::try_from(d.min + c).ok())
        .collect()
}

fn fill_expr(b: &mut Buffer, value: &Expr) -> Result<(), StepError> {
    let f = value.compile();
    b.fill(|c| f.eval(c)).map_err(StepError::Runtime)
}

/// A counter Halide's runtime can be held to, read from the Vulkan objects it
/// holds (its blocks are its `VkDeviceMemory`s), the `vkCmdCopyBuffer`s of
/// each copy step and the regions its buffers hold (`SHARED_COUNTERS`).
fn counter(name: &str) -> Option<fn(&shim::Live, &HalideRuntime) -> u64> {
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
        "live_regions" => |_, s| s.held_regions(),
        "copies_host_to_host" => |_, s| s.host_copies,
        "bytes_host_to_host" => |_, s| s.host_bytes,
        _ => return None,
    })
}

impl<'a> Runtime<'a> for HalideRuntime {
    fn capabilities(&self) -> &'static [Capability] {
        if self.lib.takes_settings() {
            WITH_SETTINGS
        } else {
            CAPABILITIES
        }
    }

    fn device_type(&self) -> Option<DeviceType> {
        shim::device_type()
    }

    fn slot_name(&self, slot: usize) -> String {
        self.names[slot].clone()
    }

    fn put(&mut self, slot: usize, host: Buffer) -> Result<(), StepError> {
        let s = Slot::new(host, 0, false)?;
        self.put_slot(slot, s)
    }

    fn host(&self, slot: usize) -> Result<&Buffer, StepError> {
        Ok(&self.get(slot)?.host)
    }

    fn host_mut(&mut self, slot: usize) -> Result<&mut Buffer, StepError> {
        Ok(&mut self.get_mut(slot)?.host)
    }

    fn flags(&self, slot: usize) -> Result<Flags, StepError> {
        let s = self.get(slot)?;
        Ok(Flags {
            host_dirty: s.flag(HOST_DIRTY),
            device_dirty: s.flag(DEVICE_DIRTY),
            has_device: s.raw.device != 0,
        })
    }

    fn set_dirty(
        &mut self,
        slot: usize,
        host_dirty: Option<bool>,
        device_dirty: Option<bool>,
    ) -> Result<(), StepError> {
        let s = self.get_mut(slot)?;
        if let Some(h) = host_dirty {
            s.set_flag(HOST_DIRTY, h);
        }
        if let Some(d) = device_dirty {
            s.set_flag(DEVICE_DIRTY, d);
        }
        Ok(())
    }

    fn device_malloc(&mut self, slot: usize) -> Result<(), StepError> {
        self.step(slot, StepKind::Malloc, "device_malloc", |lib, raw| {
            // SAFETY: a valid buffer.
            check("halide_device_malloc", unsafe { lib.device_malloc(raw) })
        })
    }

    fn device_and_host_malloc(&mut self, slot: usize) -> Result<(), StepError> {
        let had_host = !self.get(slot)?.raw.host.is_null();
        self.step(
            slot,
            StepKind::Malloc,
            "device_and_host_malloc",
            |lib, raw| {
                // SAFETY: a valid buffer.
                check("halide_device_and_host_malloc", unsafe {
                    lib.device_and_host_malloc(raw)
                })
            },
        )?;
        let s = self.get_mut(slot)?;
        let Some(host) = std::ptr::NonNull::new(s.raw.host) else {
            return Err(StepError::Check(format!(
                "halide_device_and_host_malloc left {} without host memory",
                s.host.name()
            )));
        };
        if !had_host {
            // Halide's host memory (halide_malloc, not cleared) becomes the
            // slot's host side, for the steps that read and write it.
            let len = s.host.size_in_bytes() as usize;
            // SAFETY: Halide allocated the buffer's span at `host`; it lives
            // until halide_device_and_host_free, which drops this view first.
            let bytes = unsafe { vkcopy_engine::rt::HostBytes::from_raw_parts(host, len, None) };
            let name = s.host.name().to_string();
            s.host = Buffer::from_host(&name, s.host.elem(), s.host.dims().to_vec(), bytes)?;
            s.runtime_host = true;
        }
        Ok(())
    }

    fn device_and_host_free(&mut self, slot: usize) -> Result<(), StepError> {
        let lib = self.lib;
        let s = self.get_mut(slot)?;
        if !s.runtime_host {
            return Err(StepError::Check(format!(
                "device_and_host_free of {}, whose host memory Halide did not allocate: \
                 halide_device_and_host_free would give it to halide_free",
                s.host.name()
            )));
        }
        // SAFETY: host and device memory Halide allocated.
        check("halide_device_and_host_free", unsafe {
            lib.device_and_host_free(&mut *s.raw)
        })?;
        let name = s.host.name().to_string();
        s.host = s.host.without_host(&name);
        s.runtime_host = false;
        Ok(())
    }

    fn release_unused(&mut self) -> Result<(), StepError> {
        // Halide's generic layer gives each device API's pool back when reuse
        // is turned off; it is turned back on as it was.
        let on = self.lib.can_reuse_device_allocations();
        check(
            "halide_reuse_device_allocations",
            self.lib.reuse_device_allocations(false),
        )?;
        if on {
            check(
                "halide_reuse_device_allocations",
                self.lib.reuse_device_allocations(true),
            )?;
        }
        Ok(())
    }

    fn device_free(&mut self, slot: usize) -> Result<(), StepError> {
        let lib = self.lib;
        let s = self.get_mut(slot)?;
        // SAFETY: a valid buffer.
        check("halide_device_free", unsafe {
            lib.device_free(&mut *s.raw)
        })
    }

    fn release(&mut self, slot: usize) -> Result<(), StepError> {
        self.drop_slot(slot)
    }

    fn copy_to_device(&mut self, slot: usize) -> Result<(), StepError> {
        self.upload(slot, "copy_to_device")
    }

    fn copy_to_host(&mut self, slot: usize) -> Result<(), StepError> {
        self.step(slot, StepKind::Readback, "copy_to_host", |lib, raw| {
            // SAFETY: a valid buffer.
            check("halide_copy_to_host", unsafe { lib.copy_to_host(raw) })
        })
    }

    fn buffer_copy(&mut self, from: usize, to: usize, to_device: bool) -> Result<(), StepError> {
        // Halide's own choice in halide_buffer_copy.
        let src = self.get(from)?;
        let from_host = src.raw.device == 0 || (src.flag(HOST_DIRTY) && !src.raw.host.is_null());
        let kind = match (from_host, to_device) {
            (true, true) => StepKind::Upload,
            (false, false) => StepKind::Readback,
            (false, true) => StepKind::DeviceToDevice,
            (true, false) => {
                let bytes = src.host.size_in_bytes();
                self.host_copies += 1;
                self.host_bytes += bytes;
                StepKind::Kernel
            }
        };
        let mut src = self.slots[from].take();
        let r = (|| {
            let src = src.as_mut().ok_or_else(|| {
                StepError::Check(format!("{} has no buffer here", self.names[from]))
            })?;
            self.step(to, kind, "buffer_copy", |lib, dst| {
                // SAFETY: two distinct valid buffers.
                check("halide_buffer_copy", unsafe {
                    lib.buffer_copy(&mut *src.raw, to_device, dst)
                })
            })
        })();
        self.slots[from] = src;
        r
    }

    fn put_view(
        &mut self,
        from: usize,
        to: usize,
        view: Buffer,
        how: ViewKind,
    ) -> Result<(), StepError> {
        let lib = self.lib;
        let parent = self.get(from)?;
        if how == ViewKind::Strided {
            if parent.raw.device == 0 {
                let slot = Slot::new(view, parent.raw.flags, false)?;
                return self.put_slot(to, slot);
            }
            // A view with its parent's strides over a box inside it is a crop
            // whose coordinates were moved, as Halide's `Buffer::translate`
            // moves them: cropped at the parent's coordinates, then translated.
            let at = crop_origin(&parent.host, &view).ok_or_else(|| {
                StepError::Unsupported(
                    "a strided view of device memory; Halide's API views device memory only by crop and slice \
                     (a view with its parent's strides over a box inside it is a translated crop)"
                        .into(),
                )
            })?;
            let mut slot = Slot::new(view, parent.raw.flags, true)?;
            slot.root = parent.root;
            let mins: Vec<i32> = slot._dims.iter().map(|d| d.min).collect();
            for (d, a) in slot._dims.iter_mut().zip(&at) {
                d.min = *a;
            }
            let p: *const HalideBuffer = &*parent.raw;
            // SAFETY: the parent is valid and distinct from the new view, whose
            // dims (boxed in the slot) hold the crop's box in the parent.
            let code = unsafe { lib.device_crop(p, &mut *slot.raw) };
            for (d, m) in slot._dims.iter_mut().zip(mins) {
                d.min = m;
            }
            check("halide_device_crop", code)?;
            return self.put_slot(to, slot);
        }
        // As Halide's `Buffer::cropped`: the view starts with its parent's flags.
        // Its device memory is a crop of its parent's only when the parent has some;
        // else a later malloc gives it memory of its own.
        let parent_device = parent.raw.device != 0;
        let mut slot = Slot::new(view, parent.raw.flags, parent_device)?;
        slot.root = parent.root;
        if parent_device {
            let p: *const HalideBuffer = &*parent.raw;
            let (name, code) = match how {
                // SAFETY: the parent is valid and distinct from the new view.
                ViewKind::Slice { dim, pos } => ("halide_device_slice", unsafe {
                    lib.device_slice(p, dim as c_int, pos as c_int, &mut *slot.raw)
                }),
                // SAFETY: as above.
                _ => ("halide_device_crop", unsafe {
                    lib.device_crop(p, &mut *slot.raw)
                }),
            };
            check(name, code)?;
        }
        self.put_slot(to, slot)
    }

    fn kernel(&mut self, kernel: DeviceKernel<'_>) -> Result<(), StepError> {
        shim::begin_step(Some(StepKind::Kernel));
        let r = self.emulate(kernel).map_err(emulated);
        shim::end_step("kernel");
        r
    }

    fn reuse_device_allocations(&mut self, on: bool) -> Result<(), StepError> {
        check(
            "halide_reuse_device_allocations",
            self.lib.reuse_device_allocations(on),
        )
    }

    fn device_release(&mut self) -> Result<(), StepError> {
        // SAFETY: Halide frees what it cached and its context.
        unsafe { self.lib.device_release() };
        check("halide_device_release", 0)
    }

    fn fill_heap(&mut self, heap: u32, leave: u64) -> Result<(), StepError> {
        shim::fill_heap(heap, leave)
    }

    fn counter(&self, name: &str) -> Option<u64> {
        let live = shim::live();
        counter(name).map(|f| f(&live, self))
    }

    fn placements(&self) -> Vec<PlacementRecord> {
        // vkcopy's library says where it placed memory; for Halide's own
        // runtimes the shim infers it from the buffers each step binds.
        match self.lib.own_placements() {
            Some(all) => all.into_iter().skip(self.placements_before).collect(),
            None => shim::placements(),
        }
    }

    fn describe_type(&self, ty: u32) -> String {
        shim::describe_type(ty)
    }

    fn chooser(&self) -> String {
        "Halide's runtime".into()
    }

    fn finish(&mut self) -> Finish {
        let mut findings = Vec::new();
        // Views first, then the buffers they view; then Halide's context.
        let mut give_back = |r: Result<(), StepError>| {
            if let Err(e) = r {
                findings.push(format!("at the end: {e}"));
            }
        };
        for i in (0..self.slots.len()).rev() {
            if self.slots[i].as_ref().is_some_and(|s| s.view) {
                give_back(self.drop_slot(i));
            }
        }
        for i in 0..self.slots.len() {
            give_back(self.drop_slot(i));
        }
        for d in std::mem::take(&mut self.deferred) {
            give_back(self.give_back(d));
        }
        // SAFETY: no buffer holds a device allocation any more.
        unsafe { self.lib.device_release() };
        let live = shim::live();
        let leaks = (live.memories > 0 || live.buffers > 0 || live.devices > 0).then(|| {
            let devices = match live.devices {
                0 => String::new(),
                n => format!(" and {n} VkDevice"),
            };
            format!(
                "after halide_device_release, Halide still holds {} VkDeviceMemory ({} bytes) and {} VkBuffer{devices}",
                live.memories, live.memory_bytes, live.buffers
            )
        });
        findings.extend(
            shim::take_findings()
                .into_iter()
                .map(|f| format!("Vulkan use: {f}")),
        );
        Finish {
            leaks,
            findings,
            messages: shim::take_validation_messages(),
        }
    }

    fn generic_layer(&self) -> bool {
        true
    }
}
