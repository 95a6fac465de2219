//! The copy paths between views: host to device and device to host (straight
//! to imported host memory, or through staging), device to device, host to host
//! (Halide's `halide_vulkan_copy_to_device` / `copy_to_host` in
//! `src/runtime/vulkan.cpp`).
//!
//! Staging buffers are requested with the policy's roles: `upload` for
//! host-to-device, `readback` for device-to-host; where they land is what the
//! readback fix is about. Staging is packed densely in the plan's order, so the
//! host side and the GPU side of a copy use the same layout.

use ash::vk;

use crate::buffer::host::HostBytes;
use crate::buffer::{DeviceView, HostView};
use crate::error::{Error, Result};
use crate::memory::policy::Role;
use crate::runtime::context::Context;
use crate::runtime::copy_choice::class_min_bytes;
use crate::runtime::copy_queue::{
    Choice as QueueChoice, QueueCalibration, QueueTime, ROUNDS as QUEUE_ROUNDS,
};
use crate::runtime::host_copy;
use crate::runtime::options::MappedCopy;
use crate::runtime::plan::CopyPlan;
use crate::runtime::route::{Route, Via, IMPORT_MIN_BYTES};
use crate::types::{CopyPath, Dim};
use crate::vk::allocator::Allocation;
use crate::vk::region::Region;
use crate::vk::submit::{HostAccess, Submitter, KEPT_REGIONS, LANES};

/// Regions per `vkCmdCopyBuffer` call; a copy with more is split over several calls.
pub(crate) const MAX_REGIONS_PER_CALL: usize = 1 << 16;

/// Host memory is read and written fastest in whole blocks of this many bytes:
/// a copy to or from imported host memory that starts inside a block is cut at
/// the block's end, so the rest of it moves whole blocks. The device side then
/// starts unaligned, which device memory does not mind.
const HOST_BLOCK: u64 = 256;

/// Chunks shorter than this are recorded whole: cutting them adds regions for
/// little gain.
const HOST_CUT_MIN: u64 = 4096;

/// Which side of a copy is imported host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostSide {
    Src,
    Dst,
}

/// The regions of one chunk of `len` bytes at `src` and `dst`: one, or two where
/// the host side starts inside a [`HOST_BLOCK`].
fn chunk_regions(
    src: u64,
    dst: u64,
    len: u64,
    host: Option<HostSide>,
) -> [Option<vk::BufferCopy>; 2] {
    let whole = vk::BufferCopy {
        src_offset: src,
        dst_offset: dst,
        size: len,
    };
    let at = match host {
        Some(HostSide::Src) => src,
        Some(HostSide::Dst) => dst,
        None => return [Some(whole), None],
    };
    let head = (HOST_BLOCK - at % HOST_BLOCK) % HOST_BLOCK;
    if head == 0 || len < HOST_CUT_MIN {
        return [Some(whole), None];
    }
    [
        Some(vk::BufferCopy {
            size: head,
            ..whole
        }),
        Some(vk::BufferCopy {
            src_offset: src + head,
            dst_offset: dst + head,
            size: len - head,
        }),
    ]
}

/// Records `plan` as buffer-to-buffer copies, offsets added to each side; `host`
/// names the side that is imported host memory, if any.
fn record_copy(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    plan: &CopyPlan,
    src: (vk::Buffer, u64),
    dst: (vk::Buffer, u64),
    host: Option<HostSide>,
) {
    record_chunks(
        device,
        cmd,
        plan.chunk_offsets(),
        plan.chunk,
        src,
        dst,
        host,
    );
}

/// Records the copy of `len`-byte chunks at the (source, destination) offsets of
/// `chunks`.
fn record_chunks(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    chunks: impl Iterator<Item = (u64, u64)>,
    len: u64,
    src: (vk::Buffer, u64),
    dst: (vk::Buffer, u64),
    host: Option<HostSide>,
) {
    let mut regions = Vec::new();
    let flush = |regions: &mut Vec<vk::BufferCopy>| {
        if !regions.is_empty() {
            // SAFETY: both buffers are alive for the submission; regions lie within
            // them (the plan was checked against their sizes by the caller).
            unsafe { device.cmd_copy_buffer(cmd, src.0, dst.0, regions) };
            regions.clear();
        }
    };
    for (s, d) in chunks {
        for r in chunk_regions(src.1 + s, dst.1 + d, len, host)
            .into_iter()
            .flatten()
        {
            regions.push(r);
            if regions.len() == MAX_REGIONS_PER_CALL {
                flush(&mut regions);
            }
        }
    }
    flush(&mut regions);
}

/// The first word of a key of [`record_copy`]'s recordings.
const KEY_COPY: u64 = 0;

/// What [`record_copy`] records, as a key of the recording
/// ([`Submitter::run_kept`]); none for copies of many chunks.
fn copy_key(
    plan: &CopyPlan,
    src: (vk::Buffer, u64),
    dst: (vk::Buffer, u64),
    host: Option<HostSide>,
) -> Option<Vec<u64>> {
    use ash::vk::Handle;
    if plan.chunks() > KEPT_REGIONS as u64 {
        return None;
    }
    let host = match host {
        None => 0,
        Some(HostSide::Src) => 1,
        Some(HostSide::Dst) => 2,
    };
    let mut key = vec![
        KEY_COPY,
        src.0.as_raw(),
        src.1,
        dst.0.as_raw(),
        dst.1,
        plan.chunk,
        host,
    ];
    key.extend(plan.chunk_offsets().flat_map(|(s, d)| [s, d]));
    Some(key)
}

/// Checks that a device copy stays inside its region.
fn check_region(side: &str, end: u64, size: u64) -> Result<()> {
    if end > size {
        return Err(Error::BadDimensions(format!(
            "{side} of the copy ends at byte {end} of a {size}-byte device region"
        )));
    }
    Ok(())
}

/// A device write into a region that takes mapped uploads, marked before its
/// submission; marked again when dropped, after the write is done.
pub(crate) struct DeviceWrite<'r>(Option<&'r Region>);

impl Drop for DeviceWrite<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.0 {
            r.mark_unavailable();
        }
    }
}

/// The host memory of a copy between host and device memory, which is also its
/// direction: an upload reads it, a readback writes it.
pub(crate) enum HostMem<'m> {
    Upload(&'m HostBytes),
    Readback(&'m mut HostBytes),
}

impl HostMem<'_> {
    pub(crate) fn path(&self) -> CopyPath {
        match self {
            HostMem::Upload(_) => CopyPath::HostToDevice,
            HostMem::Readback(_) => CopyPath::DeviceToHost,
        }
    }

    /// The role of the copy's staging.
    fn role(&self) -> Role {
        match self {
            HostMem::Upload(_) => Role::Upload,
            HostMem::Readback(_) => Role::Readback,
        }
    }

    fn bytes(&self) -> &HostBytes {
        match self {
            HostMem::Upload(b) => b,
            HostMem::Readback(b) => b,
        }
    }

    /// The same memory, for one more copy.
    pub(crate) fn reborrow(&mut self) -> HostMem<'_> {
        match self {
            HostMem::Upload(b) => HostMem::Upload(b),
            HostMem::Readback(b) => HostMem::Readback(b),
        }
    }
}

impl Context {
    /// Submits one planned copy; with profiling on, returns its GPU time in ns.
    /// A plan of more chunks than a submission holds ([`Context::max_pieces`]) goes
    /// in several, in order, so that no command buffer records more regions.
    fn submit_copy(
        &self,
        sub: &Submitter,
        plan: &CopyPlan,
        src: (vk::Buffer, u64),
        dst: (vk::Buffer, u64),
        host: Option<HostSide>,
        reads: HostAccess,
    ) -> Result<Option<u64>> {
        let device = &self.raw_device();
        // A chunk is at most two regions (the host-side cut).
        let per_submission = (self.max_pieces() / 2).max(1);
        if plan.chunks() <= per_submission as u64 {
            let key = copy_key(plan, src, dst, host);
            let timed = self.inner.profile.enabled();
            return sub.run_kept(key, timed, reads, |cmd| {
                record_copy(device, cmd, plan, src, dst, host)
            });
        }
        let mut lanes = sub.lanes(self.inner.profile.enabled());
        lanes.host_access(reads);
        let mut chunks = plan.chunk_offsets().peekable();
        let mut lane = 0;
        while chunks.peek().is_some() {
            let batch: Vec<(u64, u64)> = chunks.by_ref().take(per_submission).collect();
            let last = chunks.peek().is_none();
            lanes.submit(lane, last, |cmd| {
                record_chunks(device, cmd, batch.into_iter(), plan.chunk, src, dst, host)
            })?;
            lane = (lane + 1) % LANES;
        }
        lanes.finish()
    }

    /// Runs `copy`, a blocking copy of `bytes` on `path` that may be made
    /// again with the same result, on the queue [`CopyQueue`] chooses: the
    /// first copy of a path and size class is made on every queue in turn,
    /// once untimed and then timed, and the fastest queue is kept for the
    /// class.
    ///
    /// Async copies (whose `sub` is their stream's), copies of a caller's
    /// `VkBuffer` (which may be exclusive to the compute family), and every
    /// copy once the caller may submit to the compute queue itself (its work
    /// there is ordered with vkcopy's by that queue's barriers only) stay on
    /// `sub`'s queue. After a wait that timed out, the device is let go idle
    /// first: work the host never saw finish orders nothing on another queue.
    ///
    /// [`CopyQueue`]: crate::runtime::copy_queue::CopyQueue
    pub(crate) fn on_copy_queue<T>(
        &self,
        sub: &Submitter,
        (path, bytes, wrapped): (CopyPath, u64, bool),
        mut copy: impl FnMut(&Submitter) -> Result<T>,
    ) -> Result<T> {
        let queues = &self.inner.copy_submitters;
        if queues.is_empty() || !sub.blocking() || wrapped || sub.queue().shared() {
            return copy(sub);
        }
        let taken = match self.inner.copy_queue.choice(path, bytes) {
            QueueChoice::Compute => return copy(sub),
            QueueChoice::Queue(i) => {
                let Some(Ok(other)) = queues.get(i).map(|q| q.take()) else {
                    return copy(sub);
                };
                self.inner.device.settle();
                return copy(&other);
            }
            QueueChoice::Calibrate => queues.iter().map(|q| q.take()).collect::<Result<Vec<_>>>(),
        };
        let Ok(taken) = taken else {
            return copy(sub);
        };
        self.inner.device.settle();
        let all: Vec<&Submitter> = std::iter::once(sub)
            .chain(taken.iter().map(|t| &**t))
            .collect();
        // Each queue's copies one after another: on some devices a queue left
        // idle while the others run answers its next submission far later,
        // which a class's repeated copies never see (bench/README.md).
        let mut best = vec![f64::INFINITY; all.len()];
        let mut last = None;
        for (s, b) in all.iter().zip(&mut best) {
            copy(s)?;
            for _ in 0..QUEUE_ROUNDS {
                let t = std::time::Instant::now();
                last = Some(copy(s)?);
                *b = b.min(t.elapsed().as_secs_f64());
            }
        }
        let times: Vec<QueueTime> = all
            .iter()
            .zip(best)
            .map(|(s, seconds)| QueueTime {
                family: s.queue().family,
                seconds,
            })
            .collect();
        self.inner.copy_queue.learn(QueueCalibration {
            path,
            min_bytes: class_min_bytes(bytes),
            bytes,
            chosen: QueueCalibration::fastest(&times),
            times,
        });
        Ok(last.expect("at least one round"))
    }

    /// Submits recorded work; with profiling on, returns its GPU time in ns.
    fn submit(
        &self,
        sub: &Submitter,
        reads: HostAccess,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<Option<u64>> {
        sub.run_with(self.inner.profile.enabled(), reads, record)
    }

    /// Counts a copy on its route, and its times in the profile.
    fn record(
        &self,
        path: CopyPath,
        via: Option<Via>,
        bytes: u64,
        start: std::time::Instant,
        gpu_ns: Option<u64>,
    ) {
        let host_ns = start.elapsed().as_nanos() as u64;
        self.inner.profile.record(path, bytes, host_ns, gpu_ns);
        if let Some(via) = via {
            self.inner.routes.count(Route { path, via }, bytes);
        }
    }

    /// The imported buffer over host memory `mem` for a copy of `plan`, and
    /// the offset of its first byte, where the context's routes import a copy
    /// of its size and the import succeeds; None to stage. A small readback
    /// also imports small host memory that it reads into again: the CPU's copy
    /// out of staging is most of what a 64 KiB readback adds to a 4 KiB one.
    /// (Small uploads are written by the CPU where they can.)
    fn imported(&self, plan: &CopyPlan, mem: &HostMem<'_>) -> Option<(vk::Buffer, u64)> {
        let import = self.inner.host_import.as_ref()?;
        let (bytes, role) = (mem.bytes(), mem.role());
        match self.inner.host_routes.choose(plan.bytes()) {
            Via::Imported => import.buffer(bytes, role),
            _ if role == Role::Readback => {
                import.buffer_when_reused(bytes, role, IMPORT_MIN_BYTES as usize)
            }
            _ => None,
        }
    }

    /// Flushes host writes to a staging region, unless Halide's missing flush is
    /// emulated.
    pub(crate) fn flush(&self, a: &Allocation, offset: u64, size: u64) -> Result<()> {
        if self.inner.emulate.no_flush_invalidate() {
            return Ok(());
        }
        self.inner.allocator.flush(a, offset, size)
    }

    /// Invalidates a staging region before the host reads it, unless Halide's
    /// missing invalidate is emulated.
    pub(crate) fn invalidate(&self, a: &Allocation, offset: u64, size: u64) -> Result<()> {
        if self.inner.emulate.no_flush_invalidate() {
            return Ok(());
        }
        self.inner.allocator.invalidate(a, offset, size)
    }

    /// Plans a copy; Halide's planning when its bug is emulated.
    pub(crate) fn plan(&self, src: &[Dim], dst: &[Dim], elem_bytes: usize) -> Result<CopyPlan> {
        if self.inner.emulate.min_extent_copy() {
            CopyPlan::halide(src, dst, elem_bytes)
        } else {
            CopyPlan::new(src, dst, elem_bytes)
        }
    }

    /// [`Context::plan`], or None where the views share no element.
    fn plan_some(&self, src: &[Dim], dst: &[Dim], elem_bytes: usize) -> Result<Option<CopyPlan>> {
        let plan = self.plan(src, dst, elem_bytes)?;
        Ok((plan.chunks() > 0).then_some(plan))
    }

    /// How a copy goes through per-copy staging: the plan into staging, the plan out of it,
    /// and the staging size in bytes. Staging is packed densely in the plan's order;
    /// with Halide's bug emulated it is written in the destination's layout and read
    /// in the source's.
    fn staging(&self, plan: &CopyPlan) -> (CopyPlan, CopyPlan, u64) {
        if self.inner.emulate.staging_layout_mismatch() {
            let size = plan.src_end().max(plan.dst_end());
            (plan.clone(), plan.clone(), size)
        } else {
            (plan.with_dense_dst(), plan.with_dense_src(), plan.bytes())
        }
    }

    /// Copies the intersection of a host view and a device view, host to
    /// device (`path` `HostToDevice`) or device to host.
    pub(crate) fn host_device_copy(
        &self,
        sub: &Submitter,
        host: (&HostView, &[Dim]),
        device: (&DeviceView, &[Dim]),
        elem_bytes: usize,
        path: CopyPath,
    ) -> Result<()> {
        let upload = path == CopyPath::HostToDevice;
        let (src, dst) = if upload {
            (host.1, device.1)
        } else {
            (device.1, host.1)
        };
        let Some(plan) = self.plan_some(src, dst, elem_bytes)? else {
            return Ok(());
        };
        let memory = &host.0.memory;
        let (read, mut write);
        let mem = if upload {
            read = memory.read().unwrap_or_else(|p| p.into_inner());
            HostMem::Upload(&read)
        } else {
            write = memory.write().unwrap_or_else(|p| p.into_inner());
            HostMem::Readback(&mut write)
        };
        let at = device.0.byte_offset(elem_bytes);
        self.host_device(sub, &plan, (mem, host.0), (&device.0.region, at))
    }

    /// Carries out `plan` between host memory (`mem`, of `view`) and `region`
    /// from byte `at`, either way: by the CPU where the memory is mapped for it
    /// and the CPU is the faster, else by the GPU (on the queue
    /// [`Context::on_copy_queue`] chooses), straight to or from imported host
    /// memory, or through staging.
    fn host_device(
        &self,
        sub: &Submitter,
        plan: &CopyPlan,
        (mut mem, view): (HostMem<'_>, &HostView),
        (region, at): (&Region, u64),
    ) -> Result<()> {
        let start = std::time::Instant::now();
        let path = mem.path();
        let upload = path == CopyPath::HostToDevice;
        let ((device, device_end), (host, host_end)) = match upload {
            true => (("destination", plan.dst_end()), ("source", plan.src_end())),
            false => (("source", plan.src_end()), ("destination", plan.dst_end())),
        };
        check_region(device, at + device_end, region.size())?;
        host_copy::check(host, view, mem.bytes().len(), host_end)?;
        let offset = view.offset;
        let gpu_route = self.inner.host_routes.choose(plan.bytes());
        // Streaming loads pay a PCIe round trip per run of bytes, which a
        // class measured on one run does not show: under `auto` only a
        // contiguous readback is measured or read by the CPU.
        let choices = self.mapped_choices(path);
        let runs_ok = upload || plan.chunks() == 1 || choices.mode != MappedCopy::Auto;
        let route = match self.takes_mapped_copies(region) && !region.writes_unavailable() {
            true if runs_ok => choices.route(plan.bytes(), gpu_route),
            _ => Some(gpu_route),
        };
        let cpu = |mem: HostMem<'_>| self.cpu_copy(plan, mem, offset, (region, at));
        if route == Some(Via::Mapped) {
            cpu(mem)?;
            self.record(path, Some(Via::Mapped), plan.bytes(), start, None);
            return Ok(());
        }
        let imported = self.imported(plan, &mem);
        let device = (region.vk_buffer(), at);
        let by_gpu = |mut mem: HostMem<'_>, access: HostAccess| {
            let class = (path, plan.bytes(), region.is_wrapped());
            self.on_copy_queue(sub, class, |sub| {
                self.by_gpu(
                    sub,
                    plan,
                    (mem.reborrow(), offset),
                    imported,
                    device,
                    access,
                )
            })
        };
        // A readback by the GPU ends with a barrier to the host, after every
        // earlier device write the host waited for (and so every later
        // submission on any queue waits for too); it clears the region's marks.
        let seen = region.unavailable_marks();
        let (via, gpu) = match route {
            // An upload by the GPU ends without that barrier and marks the
            // region (see `device_writes_into`).
            Some(_) if upload => {
                let _write = self.device_writes_into(region);
                by_gpu(mem, HostAccess::No)?
            }
            Some(_) => by_gpu(mem, HostAccess::Yes)?,
            // Measuring ends on the GPU's copy, whose route is counted; the
            // CPU may copy next, so the GPU's writes are made available.
            None => {
                let gpu = |mem: HostMem<'_>| by_gpu(mem, HostAccess::Yes);
                self.measure_mapped(path, plan, &mut mem, cpu, gpu)?.1
            }
        };
        if !upload || route.is_none() {
            region.clear_unavailable(seen);
        }
        self.record(path, Some(via), plan.bytes(), start, gpu);
        Ok(())
    }

    /// A copy of `plan` by the GPU on `sub`'s queue, between the host memory
    /// (the view's bytes from `offset`) and a device buffer at a byte offset,
    /// ending with a barrier to the host where `access` says the host touches
    /// the device memory next: straight to or from the `imported` buffer over
    /// the host memory (with the offset of its first byte), else through
    /// staging. Returns the route and, when profiling, the GPU time in ns.
    fn by_gpu(
        &self,
        sub: &Submitter,
        plan: &CopyPlan,
        (mem, offset): (HostMem<'_>, usize),
        imported: Option<(vk::Buffer, u64)>,
        device: (vk::Buffer, u64),
        access: HostAccess,
    ) -> Result<(Via, Option<u64>)> {
        if let Some((buffer, base)) = imported {
            let host = (buffer, base + offset as u64);
            let gpu = match mem {
                HostMem::Upload(_) => {
                    self.submit_copy(sub, plan, host, device, Some(HostSide::Src), access)
                }
                // The GPU writes the user's memory; the submission ends with a
                // barrier to HOST_READ and the memory is coherent.
                HostMem::Readback(_) => {
                    let gpu = self.submit_copy(
                        sub,
                        plan,
                        device,
                        host,
                        Some(HostSide::Dst),
                        HostAccess::Yes,
                    );
                    if let Err(Error::Timeout { .. }) = gpu {
                        // The GPU may still be writing the memory: the write lock
                        // is held until it is idle, so no reader of the host
                        // memory races it.
                        self.inner.device.settle();
                    }
                    gpu
                }
            };
            return Ok((Via::Imported, gpu?));
        }
        let via = self.inner.host_routes.staging();
        let gpu = match (via, mem) {
            (Via::Ring, HostMem::Upload(h)) => {
                self.upload_staged(sub, plan, &h[offset..], device, access)?
            }
            (Via::Ring, HostMem::Readback(h)) => {
                self.readback_staged(sub, plan, device, &mut h[offset..])?
            }
            (_, mem) => self.per_copy(sub, plan, (mem, offset), device, access)?,
        };
        Ok((via, gpu))
    }

    /// A copy through a staging buffer made for it, as Halide stages.
    fn per_copy(
        &self,
        sub: &Submitter,
        plan: &CopyPlan,
        (mem, offset): (HostMem<'_>, usize),
        device: (vk::Buffer, u64),
        access: HostAccess,
    ) -> Result<Option<u64>> {
        let (pack, unpack, size) = self.staging(plan);
        let staging = self.allocate_region(mem.role(), size)?;
        let ptr = staging.host_ptr()?.as_ptr();
        let buffer = (staging.alloc.buffer, 0);
        match mem {
            HostMem::Upload(host) => {
                // SAFETY: `size` bytes are mapped; this staging region was made
                // for this copy alone, so nothing else touches it.
                let out = unsafe { std::slice::from_raw_parts_mut(ptr, size as usize) };
                pack.copy_host(&host[offset..], out);
                self.flush(&staging.alloc, 0, size)?;
                self.submit_copy(sub, &unpack, buffer, device, None, access)
            }
            HostMem::Readback(host) => {
                let gpu = self.submit_copy(sub, &pack, device, buffer, None, HostAccess::Yes)?;
                self.invalidate(&staging.alloc, 0, size)?;
                // SAFETY: `size` bytes are mapped; the submission was waited for
                // and ends with a barrier to HOST_READ, so the GPU is done with
                // them; nothing else uses this staging region.
                let staged = unsafe { std::slice::from_raw_parts(ptr, size as usize) };
                unpack.copy_host(staged, &mut host[offset..]);
                Ok(gpu)
            }
        }
    }

    /// Called before a device write into `dst` is submitted, and held until the
    /// write is done. A barrier to the host costs microseconds in every such
    /// submission, so device writes end without one (`HostAccess::No`); memory
    /// that takes mapped copies is marked instead, and the CPU copies it again
    /// only after a readback from it, which ends with that barrier (uploads in
    /// between go by the GPU's copy, ordered after the device's writes).
    pub(crate) fn device_writes_into<'r>(&self, dst: &'r Region) -> DeviceWrite<'r> {
        let marked = self.takes_mapped_copies(dst).then_some(dst);
        if let Some(r) = marked {
            r.mark_unavailable();
        }
        DeviceWrite(marked)
    }

    /// Copies the intersection of two device views on the device. Copies within one
    /// region go through a temporary buffer: `vkCmdCopyBuffer` regions of one buffer
    /// must not overlap (VUID-vkCmdCopyBuffer-pRegions-00117).
    pub(crate) fn device_to_device(
        &self,
        sub: &Submitter,
        src: (&DeviceView, &[Dim]),
        dst: (&DeviceView, &[Dim]),
        elem_bytes: usize,
    ) -> Result<()> {
        let Some(plan) = self.plan_some(src.1, dst.1, elem_bytes)? else {
            return Ok(());
        };
        let start = std::time::Instant::now();
        let src_off = src.0.byte_offset(elem_bytes);
        let dst_off = dst.0.byte_offset(elem_bytes);
        check_region("source", src_off + plan.src_end(), src.0.region.size())?;
        check_region("destination", dst_off + plan.dst_end(), dst.0.region.size())?;
        let (sb, db) = (src.0.region.vk_buffer(), dst.0.region.vk_buffer());
        let (sr, dr) = (&*src.0.region, &*dst.0.region);
        // Held to the end: every route below writes `dr`.
        let _write = self.device_writes_into(dr);
        let access = HostAccess::No;
        let wrapped = sr.is_wrapped() || dr.is_wrapped();
        let d2d = (CopyPath::DeviceToDevice, plan.bytes(), wrapped);
        // The same copy by vkCmdCopyBuffer on the queue such copies take, to
        // time against the copy kernel.
        let transfer = || {
            self.on_copy_queue(sub, d2d, |s| {
                self.submit_copy(s, &plan, (sb, src_off), (db, dst_off), None, access)
            })
            .map(|_| ())
        };
        if let Some((via, gpu)) =
            self.device_copy_by_shader(sub, &plan, (sr, src_off), (dr, dst_off), &transfer)?
        {
            self.record(
                CopyPath::DeviceToDevice,
                Some(via),
                plan.bytes(),
                start,
                gpu,
            );
            return Ok(());
        }
        if !std::sync::Arc::ptr_eq(&src.0.region, &dst.0.region) {
            let (src, dst) = ((sb, src_off), (db, dst_off));
            let gpu = self.on_copy_queue(sub, d2d, |s| {
                self.submit_copy(s, &plan, src, dst, None, access)
            })?;
            self.record(
                CopyPath::DeviceToDevice,
                Some(Via::Transfer),
                plan.bytes(),
                start,
                gpu,
            );
            return Ok(());
        }
        let temp = self.allocate_region(Role::Device, plan.bytes())?;
        let tb = temp.alloc.buffer;
        if plan.chunks() > (self.max_pieces() / 2) as u64 {
            // In two capped copies, the second after the first (submissions wait
            // for the transfer writes before them).
            let (dense_dst, dense_src) = (plan.with_dense_dst(), plan.with_dense_src());
            let no = HostAccess::No;
            let into = self.submit_copy(sub, &dense_dst, (sb, src_off), (tb, 0), None, no)?;
            let out = self.submit_copy(sub, &dense_src, (tb, 0), (db, dst_off), None, access)?;
            let gpu = into.zip(out).map(|(a, b)| a + b);
            self.record(
                CopyPath::DeviceToDevice,
                Some(Via::Transfer),
                plan.bytes(),
                start,
                gpu,
            );
            return Ok(());
        }
        let device = &self.raw_device();
        let gpu = self.submit(sub, access, |cmd| {
            record_copy(
                device,
                cmd,
                &plan.with_dense_dst(),
                (sb, src_off),
                (tb, 0),
                None,
            );
            let barrier = [vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::TRANSFER_READ)];
            // SAFETY: the command buffer is recording; a transfer-to-transfer barrier.
            unsafe {
                device.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &barrier,
                    &[],
                    &[],
                );
            }
            record_copy(
                device,
                cmd,
                &plan.with_dense_src(),
                (tb, 0),
                (db, dst_off),
                None,
            );
        })?;
        self.record(
            CopyPath::DeviceToDevice,
            Some(Via::Transfer),
            plan.bytes(),
            start,
            gpu,
        );
        Ok(())
    }

    /// Copies the intersection of two host views; views of one host memory are
    /// copied through a temporary, so overlapping boxes behave as `memmove`.
    pub(crate) fn host_to_host(
        &self,
        src: (&HostView, &[Dim]),
        dst: (&HostView, &[Dim]),
        elem_bytes: usize,
    ) -> Result<()> {
        let Some(plan) = self.plan_some(src.1, dst.1, elem_bytes)? else {
            return Ok(());
        };
        let start = std::time::Instant::now();
        host_copy::copy_views(src, dst, &plan)?;
        self.record(CopyPath::HostToHost, None, plan.bytes(), start, None);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(src: u64, dst: u64, len: u64, host: Option<HostSide>) -> Vec<(u64, u64, u64)> {
        chunk_regions(src, dst, len, host)
            .into_iter()
            .flatten()
            .map(|r| (r.src_offset, r.dst_offset, r.size))
            .collect()
    }

    #[test]
    fn host_side_starting_inside_a_block_is_cut_at_its_end() {
        assert_eq!(
            regions(0, 16, 1 << 20, Some(HostSide::Dst)),
            [(0, 16, 240), (240, 256, (1 << 20) - 240)]
        );
        assert_eq!(
            regions(4112, 8, 1 << 20, Some(HostSide::Src)),
            [(4112, 8, 240), (4352, 248, (1 << 20) - 240)]
        );
    }

    #[test]
    fn aligned_short_or_device_only_chunks_stay_whole() {
        assert_eq!(
            regions(16, 512, 8192, Some(HostSide::Dst)),
            [(16, 512, 8192)]
        );
        assert_eq!(regions(0, 16, 4095, Some(HostSide::Dst)), [(0, 16, 4095)]);
        assert_eq!(regions(0, 16, 8192, None), [(0, 16, 8192)]);
    }

    #[test]
    fn cut_regions_cover_every_byte_once() {
        for at in 0..HOST_BLOCK {
            for len in [HOST_CUT_MIN, HOST_CUT_MIN + 1, 1 << 16] {
                let r = regions(at, 1000 + at, len, Some(HostSide::Src));
                let mut next = (at, 1000 + at);
                for &(s, d, n) in &r {
                    assert_eq!((s, d), next);
                    assert!(n > 0);
                    next = (s + n, d + n);
                }
                assert_eq!(next, (at + len, 1000 + at + len));
                assert_eq!(r.last().unwrap().0 % HOST_BLOCK, 0, "at {at}");
            }
        }
    }
}
