//! Copies between host and device memory through staging buffers
//! (Halide's `halide_vulkan_copy_to_device` / `copy_to_host` in `src/runtime/vulkan.cpp`,
//! with the generic dirty-bit rules of `src/runtime/device_interface.cpp`).
//!
//! Staging buffers are requested with the policy's roles: `upload` for
//! host-to-device, `readback` for device-to-host; where they land is what the
//! readback fix is about. Staging is packed densely in the plan's order, so the
//! host side and the GPU side of a copy use the same layout.

pub mod plan;

use ash::vk;

use crate::buffer::{Buffer, Dim, HostView};
use crate::context::Context;
use crate::device::DeviceView;
use crate::error::{Error, Result};
use crate::import::IMPORT_MIN_BYTES;
use crate::memory::allocator::Allocation;
use crate::memory::policy::Role;
use crate::profile::Direction;
pub use plan::CopyPlan;

/// Regions per `vkCmdCopyBuffer` call; a copy with more is split over several calls.
const MAX_REGIONS_PER_CALL: usize = 1 << 16;

/// Which way [`Context::buffer_copy`] moved the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyPath {
    HostToHost,
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

fn no_valid_data(src: &Buffer) -> Error {
    Error::NoDeviceAllocation(format!(
        "{} holds no valid data: no host memory, or a stale host (device_dirty), and no device memory",
        src.name()
    ))
}

/// Byte range of a mapping (`offset` from the start of the memory), aligned to
/// `nonCoherentAtomSize` and clamped to the memory (VUID-VkMappedMemoryRange-size-01390).
fn atom_range(a: &Allocation, atom: u64, offset: u64, size: u64) -> (u64, u64) {
    let atom = atom.max(1);
    let start = offset / atom * atom;
    let end = (offset + size).div_ceil(atom) * atom;
    let end = end.min(a.memory_size);
    (start, end - start)
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

/// Checks that a host copy stays inside the host memory of a view.
fn check_host(side: &str, view: &HostView, len: usize, end: u64) -> Result<()> {
    if view.offset as u64 + end > len as u64 {
        return Err(Error::BadDimensions(format!(
            "{side} of the copy ends at byte {} of {len} bytes of host memory",
            view.offset as u64 + end
        )));
    }
    Ok(())
}

impl Context {
    /// Submits one planned copy; with profiling on, returns its GPU time in ns.
    fn submit_copy(
        &self,
        plan: &CopyPlan,
        src: (vk::Buffer, u64),
        dst: (vk::Buffer, u64),
    ) -> Result<Option<u64>> {
        self.submit(|cmd| self.record_copy(cmd, plan, src, dst))
    }

    /// Submits recorded work; with profiling on, returns its GPU time in ns.
    fn submit(&self, record: impl FnOnce(vk::CommandBuffer)) -> Result<Option<u64>> {
        let timed = self.shared.profile.enabled();
        self.shared
            .submitter
            .run_timed(&self.shared.device, timed, record)
    }

    fn record(&self, d: Direction, bytes: u64, start: std::time::Instant, gpu_ns: Option<u64>) {
        let host_ns = start.elapsed().as_nanos() as u64;
        self.shared.profile.record(d, bytes, host_ns, gpu_ns);
    }

    /// Plans a copy; Halide's planning when its bug is emulated.
    pub(crate) fn plan(&self, src: &[Dim], dst: &[Dim], elem_bytes: usize) -> Result<CopyPlan> {
        if self.shared.emulate.min_extent_copy {
            CopyPlan::halide(src, dst, elem_bytes)
        } else {
            CopyPlan::new(src, dst, elem_bytes)
        }
    }

    /// Makes host writes to bytes `offset..offset + size` of a non-coherent region
    /// visible to the device (`vkFlushMappedMemoryRanges`, atom-aligned).
    pub(crate) fn flush(&self, a: &Allocation, offset: u64, size: u64) -> Result<()> {
        self.sync_mapping(a, offset, size, true)
    }

    /// Makes device writes to bytes `offset..offset + size` of a non-coherent region
    /// visible to the host (`vkInvalidateMappedMemoryRanges`, atom-aligned).
    pub(crate) fn invalidate(&self, a: &Allocation, offset: u64, size: u64) -> Result<()> {
        self.sync_mapping(a, offset, size, false)
    }

    fn sync_mapping(&self, a: &Allocation, offset: u64, size: u64, flush: bool) -> Result<()> {
        if a.coherent() || a.mapped.is_none() || self.shared.emulate.no_flush_invalidate {
            return Ok(());
        }
        let atom = self.shared.allocator.non_coherent_atom();
        let (start, len) = atom_range(a, atom, a.offset + offset, size);
        if let Some(sh) = a.shadow {
            // The simulated CPU cache: copy between it and the real memory. Both
            // pointers address the region's first byte; `start` is block-relative.
            let from_region = start as isize - a.offset as isize;
            // SAFETY: the range lies inside the block (clamped by atom_range) and both
            // buffers span the block; no one else writes the range meanwhile.
            unsafe {
                let real = sh.real.as_ptr().offset(from_region);
                let cache = sh.cache.as_ptr().offset(from_region);
                if flush {
                    std::ptr::copy_nonoverlapping(cache, real, len as usize);
                } else {
                    std::ptr::copy_nonoverlapping(real, cache, len as usize);
                }
            }
        }
        let range = vk::MappedMemoryRange::default()
            .memory(a.memory)
            .offset(start)
            .size(len);
        // SAFETY: the memory is mapped for its whole size; the range is atom-aligned
        // and inside the allocation.
        let result = unsafe {
            if flush {
                self.shared.device.flush_mapped_memory_ranges(&[range])
            } else {
                self.shared.device.invalidate_mapped_memory_ranges(&[range])
            }
        };
        result.map_err(|result| Error::Vulkan {
            call: if flush {
                "vkFlushMappedMemoryRanges"
            } else {
                "vkInvalidateMappedMemoryRanges"
            },
            result,
        })
    }

    /// Records `plan` as buffer-to-buffer copies, offsets added to each side.
    pub(crate) fn record_copy(
        &self,
        cmd: vk::CommandBuffer,
        plan: &CopyPlan,
        src: (vk::Buffer, u64),
        dst: (vk::Buffer, u64),
    ) {
        let mut regions =
            Vec::with_capacity(plan.chunks().min(MAX_REGIONS_PER_CALL as u64) as usize);
        let flush = |regions: &mut Vec<vk::BufferCopy>| {
            if !regions.is_empty() {
                // SAFETY: both buffers are alive for the submission; regions lie within
                // them (the plan was checked against their sizes by the caller).
                unsafe {
                    self.shared
                        .device
                        .cmd_copy_buffer(cmd, src.0, dst.0, regions)
                };
                regions.clear();
            }
        };
        plan.for_each_chunk(|s, d| {
            regions.push(vk::BufferCopy {
                src_offset: src.1 + s,
                dst_offset: dst.1 + d,
                size: plan.chunk,
            });
            if regions.len() == MAX_REGIONS_PER_CALL {
                flush(&mut regions);
            }
        });
        flush(&mut regions);
    }

    /// How a copy goes through staging: the plan into staging, the plan out of it,
    /// and the staging size in bytes. Staging is packed densely in the plan's order;
    /// with Halide's bug emulated it is written in the destination's layout and read
    /// in the source's.
    fn staging(&self, plan: &CopyPlan) -> (CopyPlan, CopyPlan, u64) {
        if self.shared.emulate.staging_layout_mismatch {
            let size = plan.src_end().max(plan.dst_end());
            (plan.clone(), plan.clone(), size)
        } else {
            (plan.to_dense_dst(), plan.from_dense_src(), plan.bytes())
        }
    }

    /// Copies the intersection of a host view and a device view, host to device,
    /// through an `upload` staging buffer.
    pub fn upload(
        &self,
        src: (&HostView, &[Dim]),
        dst: (&DeviceView, &[Dim]),
        elem_bytes: usize,
    ) -> Result<()> {
        let plan = self.plan(src.1, dst.1, elem_bytes)?;
        if plan.chunks() == 0 {
            return Ok(());
        }
        let start = std::time::Instant::now();
        let dst_off = dst.0.byte_offset(elem_bytes);
        check_region("destination", dst_off + plan.dst_end(), dst.0.region.size())?;
        if plan.bytes() >= IMPORT_MIN_BYTES {
            let mem = src.0.memory.read().unwrap_or_else(|p| p.into_inner());
            check_host("source", src.0, mem.len(), plan.src_end())?;
            if let Some(imported) = self.import_host(&mem, Role::Upload) {
                let gpu = self.submit_copy(
                    &plan,
                    (imported, src.0.offset as u64),
                    (dst.0.region.alloc.buffer, dst_off),
                )?;
                self.record(Direction::ToDevice, plan.bytes(), start, gpu);
                return Ok(());
            }
        }
        let (pack, unpack, size) = self.staging(&plan);
        let staging = self.allocate_region(Role::Upload, size)?;
        {
            let mem = src.0.memory.read().unwrap_or_else(|p| p.into_inner());
            check_host("source", src.0, mem.len(), plan.src_end())?;
            let ptr = staging.host_ptr()?;
            // SAFETY: `size` bytes are mapped; this staging region was made for this
            // copy alone, so nothing else touches it.
            let out = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), size as usize) };
            pack.copy_host(&mem[src.0.offset..], out);
        }
        self.flush(&staging.alloc, 0, size)?;
        let gpu = self.submit_copy(
            &unpack,
            (staging.alloc.buffer, 0),
            (dst.0.region.alloc.buffer, dst_off),
        )?;
        self.record(Direction::ToDevice, plan.bytes(), start, gpu);
        Ok(())
    }

    /// Copies the intersection of a device view and a host view, device to host,
    /// through a `readback` staging buffer.
    pub fn readback(
        &self,
        src: (&DeviceView, &[Dim]),
        dst: (&HostView, &[Dim]),
        elem_bytes: usize,
    ) -> Result<()> {
        let plan = self.plan(src.1, dst.1, elem_bytes)?;
        if plan.chunks() == 0 {
            return Ok(());
        }
        let start = std::time::Instant::now();
        let src_off = src.0.byte_offset(elem_bytes);
        check_region("source", src_off + plan.src_end(), src.0.region.size())?;
        let mut mem = dst.0.memory.write().unwrap_or_else(|p| p.into_inner());
        check_host("destination", dst.0, mem.len(), plan.dst_end())?;
        if plan.bytes() >= IMPORT_MIN_BYTES {
            if let Some(imported) = self.import_host(&mem, Role::Readback) {
                // The GPU writes the user's memory; the submission ends with a barrier
                // to HOST_READ and the memory is coherent.
                let gpu = self.submit_copy(
                    &plan,
                    (src.0.region.alloc.buffer, src_off),
                    (imported, dst.0.offset as u64),
                )?;
                self.record(Direction::ToHost, plan.bytes(), start, gpu);
                return Ok(());
            }
        }
        let (pack, unpack, size) = self.staging(&plan);
        let staging = self.allocate_region(Role::Readback, size)?;
        let gpu = self.submit_copy(
            &pack,
            (src.0.region.alloc.buffer, src_off),
            (staging.alloc.buffer, 0),
        )?;
        self.invalidate(&staging.alloc, 0, size)?;
        // The fence was waited for and the submission ends with a barrier to HOST_READ.
        let ptr = staging.host_ptr()?;
        // SAFETY: `size` bytes are mapped; the GPU is done with them and nothing
        // else uses this staging region.
        let staged = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), size as usize) };
        unpack.copy_host(staged, &mut mem[dst.0.offset..]);
        self.record(Direction::ToHost, plan.bytes(), start, gpu);
        Ok(())
    }

    /// Copies the intersection of two device views on the device. Copies within one
    /// region go through a temporary buffer: `vkCmdCopyBuffer` regions of one buffer
    /// must not overlap (VUID-vkCmdCopyBuffer-pRegions-00117).
    pub fn device_to_device(
        &self,
        src: (&DeviceView, &[Dim]),
        dst: (&DeviceView, &[Dim]),
        elem_bytes: usize,
    ) -> Result<()> {
        let plan = self.plan(src.1, dst.1, elem_bytes)?;
        if plan.chunks() == 0 {
            return Ok(());
        }
        let start = std::time::Instant::now();
        let src_off = src.0.byte_offset(elem_bytes);
        let dst_off = dst.0.byte_offset(elem_bytes);
        check_region("source", src_off + plan.src_end(), src.0.region.size())?;
        check_region("destination", dst_off + plan.dst_end(), dst.0.region.size())?;
        let (sb, db) = (src.0.region.alloc.buffer, dst.0.region.alloc.buffer);
        if !std::sync::Arc::ptr_eq(&src.0.region, &dst.0.region) {
            let gpu = self.submit_copy(&plan, (sb, src_off), (db, dst_off))?;
            self.record(Direction::DeviceToDevice, plan.bytes(), start, gpu);
            return Ok(());
        }
        let temp = self.allocate_region(Role::Device, plan.bytes())?;
        let tb = temp.alloc.buffer;
        let gpu = self.submit(|cmd| {
            self.record_copy(cmd, &plan.to_dense_dst(), (sb, src_off), (tb, 0));
            let barrier = [vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::TRANSFER_READ)];
            // SAFETY: the command buffer is recording; a transfer-to-transfer barrier.
            unsafe {
                self.shared.device.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &barrier,
                    &[],
                    &[],
                );
            }
            self.record_copy(cmd, &plan.from_dense_src(), (tb, 0), (db, dst_off));
        })?;
        self.record(Direction::DeviceToDevice, plan.bytes(), start, gpu);
        Ok(())
    }

    /// Copies the intersection of two host views; views of one host memory are
    /// copied through a temporary, so overlapping boxes behave as `memmove`.
    pub fn host_to_host(
        &self,
        src: (&HostView, &[Dim]),
        dst: (&HostView, &[Dim]),
        elem_bytes: usize,
    ) -> Result<()> {
        let plan = self.plan(src.1, dst.1, elem_bytes)?;
        if plan.chunks() == 0 {
            return Ok(());
        }
        let start = std::time::Instant::now();
        if std::sync::Arc::ptr_eq(&src.0.memory, &dst.0.memory) {
            let mut mem = dst.0.memory.write().unwrap_or_else(|p| p.into_inner());
            check_host("source", src.0, mem.len(), plan.src_end())?;
            check_host("destination", dst.0, mem.len(), plan.dst_end())?;
            let mut temp = vec![0u8; plan.bytes() as usize];
            plan.to_dense_dst()
                .copy_host(&mem[src.0.offset..], &mut temp);
            plan.from_dense_src()
                .copy_host(&temp, &mut mem[dst.0.offset..]);
            self.record(Direction::HostToHost, plan.bytes(), start, None);
            return Ok(());
        }
        let s = src.0.memory.read().unwrap_or_else(|p| p.into_inner());
        let mut d = dst.0.memory.write().unwrap_or_else(|p| p.into_inner());
        check_host("source", src.0, s.len(), plan.src_end())?;
        check_host("destination", dst.0, d.len(), plan.dst_end())?;
        plan.copy_host(&s[src.0.offset..], &mut d[dst.0.offset..]);
        self.record(Direction::HostToHost, plan.bytes(), start, None);
        Ok(())
    }

    /// Halide's `halide_buffer_copy` (`src/runtime/device_interface.cpp`): copies the
    /// intersection of `src` and `dst` to `dst`'s device memory (`to_device`) or
    /// host memory, from whichever side of `src` holds valid data, preferring the
    /// device for a device destination and the host for a host destination. On
    /// success `dst` is dirty on the side written and clean on the other.
    pub fn buffer_copy(&self, src: &Buffer, dst: &mut Buffer, to_device: bool) -> Result<CopyPath> {
        if src.elem().bytes() != dst.elem().bytes() {
            return Err(Error::IncompatibleBuffers(format!(
                "{} has {}-byte elements, {} has {}-byte elements",
                src.name(),
                src.elem().bytes(),
                dst.name(),
                dst.elem().bytes()
            )));
        }
        if src.dimensions() != dst.dimensions() {
            return Err(Error::IncompatibleBuffers(format!(
                "{} has {} dimensions, {} has {}",
                src.name(),
                src.dimensions(),
                dst.name(),
                dst.dimensions()
            )));
        }
        if !to_device && !dst.has_host() {
            return Err(Error::HostIsNull(format!(
                "buffer_copy to the host of {}, which has no host memory",
                dst.name()
            )));
        }
        let from_device_valid = src.device.is_some() && (!src.has_host() || !src.host_dirty);
        let from_host_valid = src.has_host() && (!src.device_dirty || src.device.is_none());
        let eb = src.elem().bytes();
        let path = if to_device {
            self.device_malloc(dst)?;
            let d = dst.device.as_ref().expect("device_malloc succeeded");
            if from_device_valid {
                let s = src.device.as_ref().expect("checked");
                self.device_to_device((s, src.dims()), (d, dst.dims()), eb)?;
                CopyPath::DeviceToDevice
            } else if from_host_valid {
                let s = src.host.as_ref().expect("checked");
                self.upload((s, src.dims()), (d, dst.dims()), eb)?;
                CopyPath::HostToDevice
            } else {
                return Err(no_valid_data(src));
            }
        } else {
            let d = dst.host.as_ref().expect("checked");
            if from_host_valid {
                let s = src.host.as_ref().expect("checked");
                self.host_to_host((s, src.dims()), (d, dst.dims()), eb)?;
                CopyPath::HostToHost
            } else if from_device_valid {
                let s = src.device.as_ref().expect("checked");
                self.readback((s, src.dims()), (d, dst.dims()), eb)?;
                CopyPath::DeviceToHost
            } else {
                return Err(no_valid_data(src));
            }
        };
        dst.host_dirty = !to_device;
        dst.device_dirty = to_device;
        Ok(path)
    }

    /// Halide's `copy_to_device`: allocates device memory when needed and copies the
    /// host data when the host is dirty; clears `host_dirty`.
    pub fn copy_to_device(&self, buf: &mut Buffer) -> Result<()> {
        if buf.host_dirty && buf.device_dirty {
            return Err(Error::BothDirty(buf.name().to_owned()));
        }
        self.device_malloc(buf)?;
        if buf.host_dirty {
            let host = buf
                .host
                .as_ref()
                .ok_or_else(|| Error::HostIsNull(buf.name().to_owned()))?;
            let dev = buf.device.as_ref().expect("device_malloc succeeded");
            self.upload((host, buf.dims()), (dev, buf.dims()), buf.elem().bytes())?;
            buf.host_dirty = false;
        }
        Ok(())
    }

    /// Halide's `copy_to_host`: copies device data to the host when the device is
    /// dirty; clears `device_dirty`.
    pub fn copy_to_host(&self, buf: &mut Buffer) -> Result<()> {
        if !buf.device_dirty {
            return Ok(());
        }
        if buf.host_dirty {
            return Err(Error::BothDirty(buf.name().to_owned()));
        }
        let host = buf
            .host
            .as_ref()
            .ok_or_else(|| Error::HostIsNull(buf.name().to_owned()))?;
        let dev = buf
            .device
            .as_ref()
            .ok_or_else(|| Error::NoDeviceAllocation(buf.name().to_owned()))?;
        self.readback((dev, buf.dims()), (host, buf.dims()), buf.elem().bytes())?;
        buf.device_dirty = false;
        Ok(())
    }
}
