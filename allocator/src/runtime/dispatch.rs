//! Dispatch of compute shaders the caller provides as SPIR-V (what Halide's
//! `halide_vulkan_run` does for generated kernels).
//!
//! A shader's entry point is `main`; it reads and writes storage buffers at
//! bindings `0..n` of descriptor set 0 and should loop over its work
//! (grid-stride), as the group count is clamped to `maxComputeWorkGroupCount`.
//! Every buffer binds its whole region (`VK_WHOLE_SIZE` from offset 0) and the
//! shader adds the view's element offset ([`Binding::base`]), so crops at offsets
//! that are not multiples of `minStorageBufferOffsetAlignment` work (Halide
//! #8944). A region larger than `maxStorageBufferRange` is bound from an aligned
//! offset below the view instead.
//!
//! A shader may declare up to [`MAX_PUSH_WORDS`] 32-bit words of immediates
//! (`var<immediate>` in WGSL, push constants in Vulkan) at offset 0, set per
//! dispatch ([`Dispatch::push_constants`]): one pipeline then serves every shape
//! its parameters describe. The shader's block must not be larger than the words
//! given.
//!
//! A dispatch call is synchronous: one submission with a compute-to-compute
//! barrier between dispatches, fence waited. Pipelines are cached per shader key
//! until [`Context::release_pipelines`] or the context goes; one descriptor pool
//! per call is destroyed after the fence wait.

use ash::vk;

use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::runtime::context::Context;
use crate::vk::copy_kernel::shader_write_barrier;
use crate::vk::descriptors::DescriptorSets;
pub use crate::vk::pipelines::PipelineStats;

/// Most storage buffers one dispatch binds.
const MAX_BINDINGS: u32 = 8;

/// Push-constant words a dispatch may set: the 128 bytes every Vulkan device allows.
pub const MAX_PUSH_WORDS: usize = crate::vk::pipelines::PUSH_WORDS;

/// How one buffer is bound: the range of its region, and the element index in
/// that range of the element at the buffer's mins.
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    buffer: vk::Buffer,
    offset: u64,
    range: u64,
    /// Element index, in the bound range, of the element at the buffer's mins.
    pub base: u64,
}

/// A compute shader: SPIR-V words under a key that names them in the cache.
pub struct Shader<'a> {
    /// Names the shader in the context's pipeline cache: equal keys, equal words.
    pub key: &'a str,
    /// The SPIR-V words; called once per key, on first use.
    pub spirv: &'a dyn Fn() -> Result<Vec<u32>>,
}

/// One dispatch: a shader, its bindings (binding `i` is `bindings[i]`) and the
/// number of workgroups (clamped to `maxComputeWorkGroupCount[0]`).
pub struct Dispatch<'a> {
    /// What runs.
    pub shader: Shader<'a>,
    /// The storage buffers, at bindings 0, 1, ...
    pub bindings: Vec<Binding>,
    /// Workgroups in x.
    pub groups: u64,
    /// Push-constant words from offset 0 (at most [`MAX_PUSH_WORDS`]); empty
    /// when the shader declares none.
    pub push_constants: &'a [u32],
}

/// The bound range of a view of bytes `start..end` of a `VkBuffer` of `vk_size`
/// bytes: `(offset, range, base)`, `base` being the view's element index in the
/// range. The whole buffer (`VK_WHOLE_SIZE` from 0) when it fits `max_range`;
/// otherwise from the highest offset at or below `start` that is a multiple of
/// both `min_align` and 8 (so element and 32-bit word indices stay whole), to the
/// view's end rounded up to 4 bytes. `Err(range)` when even that is too long.
fn binding_range(
    start: u64,
    end: u64,
    elem_bytes: u64,
    vk_size: u64,
    max_range: u64,
    min_align: u64,
) -> std::result::Result<(u64, u64, u64), u64> {
    if vk_size <= max_range {
        return Ok((0, vk::WHOLE_SIZE, start / elem_bytes));
    }
    let a = min_align.max(1);
    let (mut x, mut y) = (a, 8u64);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    let align = a / x * 8;
    let offset = start / align * align;
    let range = end.next_multiple_of(4).min(vk_size) - offset;
    if range > max_range {
        return Err(range);
    }
    Ok((offset, range, (start - offset) / elem_bytes))
}

impl Context {
    /// `buf`'s device view, which must be of this context.
    fn own_view<'b>(&self, buf: &'b Buffer) -> Result<&'b crate::buffer::DeviceView> {
        let view = buf
            .device
            .as_ref()
            .ok_or_else(|| Error::NoDeviceAllocation(buf.name().to_owned()))?;
        if !self.owns(view.region.device()) {
            return Err(Error::IncompatibleBuffers(format!(
                "{} has device memory of another context",
                buf.name()
            )));
        }
        Ok(view)
    }

    /// How `buf`'s device view is bound; see [`Binding`].
    pub fn bind(&self, buf: &Buffer) -> Result<Binding> {
        let view = self.own_view(buf)?;
        let eb = buf.elem().bytes() as u64;
        let region = view.region.size();
        let start = view
            .offset
            .checked_mul(eb)
            .ok_or_else(|| Error::BadDimensions(format!("{}: offset overflows", buf.name())))?;
        let end = start
            .checked_add(buf.size_in_bytes())
            .filter(|&e| e <= region)
            .ok_or_else(|| {
                Error::BadDimensions(format!(
                    "{}: view of {} bytes at byte {start} lies outside its {region}-byte region",
                    buf.name(),
                    buf.size_in_bytes()
                ))
            })?;
        // The VkBuffer is the region's size rounded up to 4 bytes (the allocator's rule).
        let vk_size = region.max(4).next_multiple_of(4);
        let info = self.info();
        let (offset, range, base) = binding_range(
            start,
            end,
            eb,
            vk_size,
            u64::from(info.max_storage_buffer_range),
            info.min_storage_buffer_offset_alignment,
        )
        .map_err(|range| {
            Error::BadDimensions(format!(
                "{}: a kernel would bind {range} bytes; maxStorageBufferRange is {}",
                buf.name(),
                info.max_storage_buffer_range
            ))
        })?;
        Ok(Binding {
            buffer: view.region.alloc.buffer,
            offset,
            range,
            base,
        })
    }

    /// Where `buf`'s device view lies: its `VkBuffer`, the byte offset of its
    /// element at the mins and its span (rounded up to 4 bytes, within the
    /// `VkBuffer`). For kernels that address a buffer from its mins (Halide 21's
    /// codegen binds crops by descriptor offset); the offset is a descriptor's
    /// only where it is a multiple of `minStorageBufferOffsetAlignment`.
    pub fn view_range(&self, buf: &Buffer) -> Result<vk::DescriptorBufferInfo> {
        let view = self.own_view(buf)?;
        let start = view.byte_offset(buf.elem().bytes());
        let vk_size = view.region.size().max(4).next_multiple_of(4);
        let range = buf
            .size_in_bytes()
            .max(4)
            .next_multiple_of(4)
            .min(vk_size.saturating_sub(start));
        if start >= vk_size {
            return Err(Error::BadDimensions(format!(
                "{}: its view starts at byte {start} of a {vk_size}-byte VkBuffer",
                buf.name()
            )));
        }
        Ok(vk::DescriptorBufferInfo {
            buffer: view.region.alloc.buffer,
            offset: start,
            range,
        })
    }

    /// Counts and times of pipeline creation in this context.
    pub fn pipeline_stats(&self) -> PipelineStats {
        self.inner.pipelines.lock().stats.clone()
    }

    /// Destroys the cached pipelines and layouts; later dispatches create them
    /// again. After this, [`Context::leak_check`] reports any pipeline object as a leak.
    pub fn release_pipelines(&self) {
        let device = &self.inner.device;
        let mut cache = self.inner.pipelines.lock();
        // SAFETY: dispatches hold the cache lock until their fence wait, so no
        // submission that uses these objects is pending.
        unsafe { cache.clear(device) };
    }

    /// Storage buffers a dispatch may bind.
    pub fn max_bindings(&self) -> u32 {
        self.info()
            .max_per_stage_descriptor_storage_buffers
            .clamp(2, MAX_BINDINGS)
    }

    /// Records `record` into one command buffer, runs it on the queue kernels
    /// run on ([`Context::kernel_queue`]) and waits, bounded by the context's
    /// timeout: for callers that bind pipelines of their own (Halide's kernel
    /// ABI). Copies before and after are ordered with it as with
    /// [`Context::dispatch`]; barriers inside are the caller's.
    pub fn run_commands(&self, record: impl FnOnce(vk::CommandBuffer)) -> Result<()> {
        let s = &*self.inner;
        s.device.usable("a command submission")?;
        let ran = s.submitters.take()?.run(record);
        s.device.settle_on_timeout(ran)
    }

    /// The queue and family that [`Context::dispatch`] and
    /// [`Context::run_commands`] submit to. vkcopy submits to it under its own
    /// lock: work submitted to it from outside must not overlap a call.
    pub fn kernel_queue(&self) -> (vk::Queue, u32) {
        let q = self
            .inner
            .device
            .queue(crate::vk::queue::QueueRole::Compute);
        // The caller may submit to it: vkcopy's work there no longer comes
        // only after its own barrier.
        q.share();
        (q.lock().0, q.family)
    }

    /// Compiles (or finds) each dispatch's pipeline and runs them in order in one
    /// submission, with a compute-to-compute barrier between them.
    pub fn dispatch(&self, dispatches: &[Dispatch]) -> Result<()> {
        let s = &*self.inner;
        let device = &s.device.raw();
        let stats = &s.device.stats;
        // Held until the fence wait: nothing this call uses is destroyed under it.
        let mut cache = s.pipelines.lock();
        let layout = cache.layout(device, stats, self.max_bindings())?;
        let (set_layout, pipeline_layout, max_bindings) =
            (layout.set_layout, layout.pipeline_layout, layout.bindings);
        let mut pipelines = Vec::with_capacity(dispatches.len());
        for d in dispatches {
            if d.bindings.len() > max_bindings as usize {
                return Err(Error::KernelCompileFailed(format!(
                    "{} bindings; the layout has {max_bindings}",
                    d.bindings.len()
                )));
            }
            if d.push_constants.len() > MAX_PUSH_WORDS {
                return Err(Error::KernelCompileFailed(format!(
                    "{} push-constant words; a dispatch sets at most {MAX_PUSH_WORDS}",
                    d.push_constants.len()
                )));
            }
            pipelines.push(cache.pipeline(device, stats, d.shader.key, d.shader.spirv)?);
        }

        let descriptors: u32 = dispatches.iter().map(|d| d.bindings.len() as u32).sum();
        let pool = DescriptorSets::new(device, stats, set_layout, dispatches.len(), descriptors)?;
        let sets = pool.sets.as_slice();

        let infos: Vec<Vec<[vk::DescriptorBufferInfo; 1]>> = dispatches
            .iter()
            .map(|d| {
                d.bindings
                    .iter()
                    .map(|b| {
                        [vk::DescriptorBufferInfo {
                            buffer: b.buffer,
                            offset: b.offset,
                            range: b.range,
                        }]
                    })
                    .collect()
            })
            .collect();
        let mut writes = Vec::new();
        for (set, infos) in sets.iter().zip(&infos) {
            for (b, info) in infos.iter().enumerate() {
                writes.push(
                    vk::WriteDescriptorSet::default()
                        .dst_set(*set)
                        .dst_binding(b as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info),
                );
            }
        }
        // SAFETY: the sets are not in use; every buffer is alive (its region is held
        // by the caller's buffers) and each range lies inside it.
        unsafe { device.update_descriptor_sets(&writes, &[]) };

        let max_groups = u64::from(s.device.info.max_compute_work_group_count[0].max(1));
        let ran = s.submitters.take()?.run(|cmd| {
            for (i, ((d, &pipeline), &set)) in
                dispatches.iter().zip(&pipelines).zip(sets).enumerate()
            {
                let groups = d.groups.clamp(1, max_groups) as u32;
                if i > 0 {
                    shader_write_barrier(device, cmd);
                }
                // SAFETY: the command buffer is recording; pipeline, layout and set
                // are alive until after the fence wait (cache lock and `pool` held).
                unsafe {
                    device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
                    device.cmd_bind_descriptor_sets(
                        cmd,
                        vk::PipelineBindPoint::COMPUTE,
                        pipeline_layout,
                        0,
                        &[set],
                        &[],
                    );
                    if !d.push_constants.is_empty() {
                        let bytes: Vec<u8> = d
                            .push_constants
                            .iter()
                            .flat_map(|w| w.to_ne_bytes())
                            .collect();
                        device.cmd_push_constants(
                            cmd,
                            pipeline_layout,
                            vk::ShaderStageFlags::COMPUTE,
                            0,
                            &bytes,
                        );
                    }
                    device.cmd_dispatch(cmd, groups, 1, 1);
                }
            }
        });
        // The descriptor pool goes when this returns, pending or not.
        s.device.settle_on_timeout(ran)?;
        cache.stats.dispatches += dispatches.len() as u64;
        drop(pool);
        drop(cache);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_ranges() {
        // Fits: the whole buffer, the view's offset in elements.
        assert_eq!(
            binding_range(132, 532, 4, 1024, 4096, 16),
            Ok((0, vk::WHOLE_SIZE, 33))
        );
        // Too large: from the aligned offset below the view.
        assert_eq!(
            binding_range(132, 532, 4, 8192, 4096, 16),
            Ok((128, 404, 1))
        );
        assert_eq!(
            binding_range(133, 135, 1, 8192, 4096, 256),
            Ok((0, 136, 133))
        );
        assert_eq!(
            binding_range(4100, 4102, 2, 8192, 4096, 4),
            Ok((4096, 8, 2))
        );
        // An odd alignment still gives offsets that are multiples of 8.
        assert_eq!(binding_range(104, 112, 8, 8192, 4096, 12), Ok((96, 16, 1)));
        // The view alone is longer than a binding may be.
        assert_eq!(binding_range(0, 5000, 4, 8192, 4096, 16), Err(5000));
        // The range never passes the end of the buffer.
        assert_eq!(
            binding_range(8190, 8191, 1, 8192, 4096, 16),
            Ok((8176, 16, 14))
        );
    }
}
