//! Compute kernels written in WGSL, compiled by naga, run on the device.
//!
//! Three kernels, with Halide's pipeline semantics around them (inputs that are
//! host-dirty are uploaded first, the output gets device memory when it has
//! none, and ends device-dirty):
//!
//! - [`Context::kernel_fill`]: `out(c) = value(c)` for an [`Expr`] of the coordinates;
//! - [`Context::kernel_add`]: `out = sum(inputs) + constant`, or `out += constant`;
//! - [`Context::kernel_sum`]: `out = input` summed over one dimension.
//!
//! Each call generates WGSL with the shape baked in (module `wgsl`), compiles it with
//! naga to SPIR-V 1.3 on first use and keeps the pipeline in a per-context cache
//! keyed by the source text (module `pipeline`). Every buffer binds its whole region
//! (`VK_WHOLE_SIZE` from offset 0) and the shader adds the view's element
//! offset, so crops at offsets that are not multiples of
//! `minStorageBufferOffsetAlignment` work (Halide #8944). A region larger than
//! `maxStorageBufferRange` is bound from an aligned offset below the view instead.
//!
//! Element types: i32, u32, f32, and the 8/16-bit types everywhere (no device
//! feature needed); i64/u64 need `shaderInt64`, f64 needs `shaderFloat64`, else
//! [`Error::UnsupportedType`] names the missing feature. Values of a fill are
//! computed in `i32` and converted as a C cast does; an add or sum computes in the
//! element type (integers wrap, floats round).
//!
//! Inputs that overlap the output in memory at other coordinates give undefined
//! results, as in Halide. An output with a zero stride (several coordinates at
//! one element) ends with one of the values of a fill or sum; an in-place add
//! to it is undefined.
//!
//! Kernel calls are synchronous (one submission, fence waited) and hold the
//! context's kernel cache lock from pipeline lookup to the fence wait, so kernels
//! of one context run one at a time. Per call, one descriptor pool (with one set
//! per dispatch) is created and destroyed after the fence wait; pipelines, shader
//! modules and the two layouts live in the cache until the context is dropped or
//! [`Context::release_kernels`] is called, and [`Stats::leaks`] does not count them.

mod pipeline;
pub(crate) mod wgsl;

use ash::vk;

use crate::buffer::{Buffer, Dim, ElemType};
use crate::context::Context;
use crate::error::{Error, Result, VkContext};
use crate::expr::Expr;
use crate::memory::stats::Stats;
pub(crate) use pipeline::KernelCache;
pub use pipeline::KernelStats;
use wgsl::{Body, Kernel, Operand};

/// Most storage buffers one dispatch binds (output included). An add of more
/// inputs runs as several dispatches in one submission.
const MAX_BINDINGS: u32 = 8;

/// One buffer's binding: the range of its region that is bound, and the element
/// index in that range of the element at the buffer's mins.
#[derive(Clone, Copy, Debug)]
struct Bound {
    buffer: vk::Buffer,
    offset: u64,
    range: u64,
    base: u64,
}

/// One dispatch: source, bindings (output first), element count.
struct Dispatch {
    source: String,
    bindings: Vec<Bound>,
    elements: u64,
}

/// A descriptor pool for one kernel call, destroyed (with its sets) on drop.
struct Pool<'a> {
    device: &'a ash::Device,
    stats: &'a Stats,
    pool: vk::DescriptorPool,
    sets: u64,
}

impl Drop for Pool<'_> {
    fn drop(&mut self) {
        // SAFETY: the pool is dropped after the submission that used its sets
        // completed (the submitter waits for its fence) or was never submitted.
        unsafe { self.device.destroy_descriptor_pool(self.pool, None) };
        for _ in 0..self.sets {
            self.stats.descriptor_set_destroyed();
        }
        self.stats.descriptor_pool_destroyed();
    }
}

fn incompatible(msg: String) -> Error {
    Error::IncompatibleBuffers(msg)
}

/// Whether `outer`'s box contains `inner`'s, dimension by dimension.
fn contains(outer: &[Dim], inner: &[Dim]) -> bool {
    outer
        .iter()
        .zip(inner)
        .all(|(o, i)| o.min <= i.min && i.min + i.extent <= o.min + o.extent)
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

fn elements(buf: &Buffer) -> Result<u64> {
    let n = buf.len();
    if n > u64::from(u32::MAX) {
        return Err(Error::BadDimensions(format!(
            "{}: {n} elements; kernels run over at most 2^32 - 1",
            buf.name()
        )));
    }
    Ok(n)
}

impl Context {
    /// The naga capabilities this device's enabled features allow.
    fn kernel_capabilities(&self) -> naga::valid::Capabilities {
        use naga::valid::Capabilities as C;
        let mut caps = C::empty();
        let f = &self.shared.info.features;
        if f.contains(&"shaderInt64") {
            caps |= C::SHADER_INT64;
        }
        if f.contains(&"shaderFloat64") {
            caps |= C::FLOAT64;
        }
        caps
    }

    /// Errors when the device cannot run kernels on `elem`.
    pub fn kernel_supports(&self, elem: ElemType) -> Result<()> {
        let needed = match elem {
            ElemType::I64 | ElemType::U64 => "shaderInt64",
            ElemType::F64 => "shaderFloat64",
            _ => return Ok(()),
        };
        if self.shared.info.features.contains(&needed) {
            Ok(())
        } else {
            Err(Error::UnsupportedType {
                elem,
                missing_feature: needed,
            })
        }
    }

    /// Counts and times of kernel compilation in this context.
    pub fn kernel_stats(&self) -> KernelStats {
        self.shared.kernels.lock().stats.clone()
    }

    /// Destroys the cached kernel pipelines and layouts; later kernels compile
    /// again. After this, `stats().leaks()` reports any kernel object as a leak.
    pub fn release_kernels(&self) {
        let mut cache = self.shared.kernels.lock();
        // SAFETY: kernel calls hold the cache lock until their fence wait, so no
        // submission that uses these objects is pending.
        unsafe { cache.clear(&self.shared.device, &self.shared.stats) };
    }

    /// How `buf`'s device view is bound; see [`Bound`].
    fn bind(&self, buf: &Buffer) -> Result<Bound> {
        let view = buf
            .device
            .as_ref()
            .ok_or_else(|| Error::NoDeviceAllocation(buf.name().to_owned()))?;
        if !std::sync::Arc::ptr_eq(&view.region.shared, &self.shared) {
            return Err(incompatible(format!(
                "{} has device memory of another context",
                buf.name()
            )));
        }
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
        let info = &self.shared.info;
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
        Ok(Bound {
            buffer: view.region.alloc.buffer,
            offset,
            range,
            base,
        })
    }

    /// `out(c) = value(c)` for every element `c` of `out`'s box, written through its
    /// strides and view offset. Allocates device memory when `out` has none; `out`
    /// ends device-dirty and not host-dirty.
    pub fn kernel_fill(&self, out: &mut Buffer, value: &Expr) -> Result<()> {
        self.kernel_supports(out.elem())?;
        let n = elements(out)?;
        self.device_malloc(out)?;
        if n > 0 {
            let bound = self.bind(out)?;
            let kernel = Kernel {
                elem: out.elem(),
                extents: out.dims().iter().map(|d| d.extent as u64).collect(),
                out: Operand {
                    base: bound.base,
                    strides: out.dims().iter().map(|d| d.stride as u64).collect(),
                },
                body: Body::Fill {
                    value,
                    mins: out.dims().iter().map(|d| d.min).collect(),
                },
            };
            self.dispatch(&[Dispatch {
                source: kernel.source(),
                bindings: vec![bound],
                elements: n,
            }])?;
        }
        out.device_dirty = true;
        out.host_dirty = false;
        Ok(())
    }

    /// `out = sum(inputs) + constant`, element-wise over `out`'s box; each input is
    /// read at the same coordinates and must contain `out`'s box and have its
    /// element type. With no inputs, `out = out + constant` in place (uploading
    /// `out` first when it is host-dirty). The arithmetic is the element type's.
    pub fn kernel_add(
        &self,
        out: &mut Buffer,
        inputs: &mut [&mut Buffer],
        constant: i64,
    ) -> Result<()> {
        self.kernel_supports(out.elem())?;
        let n = elements(out)?;
        for input in inputs.iter() {
            if input.elem() != out.elem() {
                return Err(incompatible(format!(
                    "kernel_add: input {} is {}, output {} is {}",
                    input.name(),
                    input.elem(),
                    out.name(),
                    out.elem()
                )));
            }
            if input.dimensions() != out.dimensions() {
                return Err(incompatible(format!(
                    "kernel_add: input {} has {} dimensions, output {} has {}",
                    input.name(),
                    input.dimensions(),
                    out.name(),
                    out.dimensions()
                )));
            }
            if n > 0 && !contains(input.dims(), out.dims()) {
                return Err(incompatible(format!(
                    "kernel_add: input {} ({:?}) does not contain the box of output {} ({:?})",
                    input.name(),
                    input.dims(),
                    out.name(),
                    out.dims()
                )));
            }
        }
        for input in inputs.iter_mut() {
            self.copy_to_device(input)?;
        }
        let in_place = inputs.is_empty();
        if in_place {
            self.copy_to_device(out)?;
        } else {
            self.device_malloc(out)?;
        }
        if n > 0 {
            let out_bound = self.bind(out)?;
            let extents: Vec<u64> = out.dims().iter().map(|d| d.extent as u64).collect();
            let out_op = Operand {
                base: out_bound.base,
                strides: out.dims().iter().map(|d| d.stride as u64).collect(),
            };
            let mut operands = Vec::with_capacity(inputs.len());
            for input in inputs.iter() {
                let b = self.bind(input)?;
                let delta: u64 = input
                    .dims()
                    .iter()
                    .zip(out.dims())
                    .map(|(i, o)| (o.min - i.min) as u64 * i.stride as u64)
                    .sum();
                operands.push((
                    b,
                    Operand {
                        base: b.base + delta,
                        strides: input.dims().iter().map(|d| d.stride as u64).collect(),
                    },
                ));
            }
            let per_dispatch = (self.kernel_bindings() - 1) as usize;
            let mut dispatches = Vec::new();
            let mut chunks: Vec<&[(Bound, Operand)]> = operands.chunks(per_dispatch).collect();
            if chunks.is_empty() {
                chunks.push(&[]);
            }
            for (i, chunk) in chunks.iter().enumerate() {
                let kernel = Kernel {
                    elem: out.elem(),
                    extents: extents.clone(),
                    out: out_op.clone(),
                    body: Body::Add {
                        inputs: chunk.iter().map(|(_, op)| op.clone()).collect(),
                        read_out: in_place || i > 0,
                        constant: if i == 0 { constant } else { 0 },
                    },
                };
                let mut bindings = vec![out_bound];
                bindings.extend(chunk.iter().map(|(b, _)| *b));
                dispatches.push(Dispatch {
                    source: kernel.source(),
                    bindings,
                    elements: n,
                });
            }
            self.dispatch(&dispatches)?;
        }
        out.device_dirty = true;
        out.host_dirty = false;
        Ok(())
    }

    /// `out(c without dim) = sum over k of input(c with dim = k)`, k over the whole
    /// extent of `input`'s dimension `dim`. `out` has `input`'s dimensions without
    /// `dim`, its element type, and a box inside `input`'s in those dimensions
    /// (normally the same mins and extents). The sum is in the element type.
    pub fn kernel_sum(&self, out: &mut Buffer, input: &mut Buffer, dim: usize) -> Result<()> {
        self.kernel_supports(out.elem())?;
        if dim >= input.dimensions() {
            return Err(Error::BadDimensions(format!(
                "kernel_sum: dimension {dim} of {}, which has {}",
                input.name(),
                input.dimensions()
            )));
        }
        if input.elem() != out.elem() {
            return Err(incompatible(format!(
                "kernel_sum: input {} is {}, output {} is {}",
                input.name(),
                input.elem(),
                out.name(),
                out.elem()
            )));
        }
        let mut rest: Vec<Dim> = input.dims().to_vec();
        let reduced = rest.remove(dim);
        if out.dimensions() != rest.len() {
            return Err(incompatible(format!(
                "kernel_sum: output {} has {} dimensions; the sum of {} over dimension {dim} has {}",
                out.name(),
                out.dimensions(),
                input.name(),
                rest.len()
            )));
        }
        let n = elements(out)?;
        if n > 0 && !contains(&rest, out.dims()) {
            return Err(incompatible(format!(
                "kernel_sum: output {} ({:?}) is not inside {} without dimension {dim} ({:?})",
                out.name(),
                out.dims(),
                input.name(),
                rest
            )));
        }
        if reduced.extent as u64 > u64::from(u32::MAX) {
            return Err(Error::BadDimensions(format!(
                "kernel_sum: dimension {dim} of {} has extent {}",
                input.name(),
                reduced.extent
            )));
        }
        self.copy_to_device(input)?;
        self.device_malloc(out)?;
        if n > 0 {
            let out_bound = self.bind(out)?;
            let in_bound = self.bind(input)?;
            let delta: u64 = rest
                .iter()
                .zip(out.dims())
                .map(|(i, o)| (o.min - i.min) as u64 * i.stride as u64)
                .sum();
            let kernel = Kernel {
                elem: out.elem(),
                extents: out.dims().iter().map(|d| d.extent as u64).collect(),
                out: Operand {
                    base: out_bound.base,
                    strides: out.dims().iter().map(|d| d.stride as u64).collect(),
                },
                body: Body::Sum {
                    input: Operand {
                        base: in_bound.base + delta,
                        strides: rest.iter().map(|d| d.stride as u64).collect(),
                    },
                    stride: reduced.stride as u64,
                    extent: reduced.extent as u64,
                },
            };
            self.dispatch(&[Dispatch {
                source: kernel.source(),
                bindings: vec![out_bound, in_bound],
                elements: n,
            }])?;
        }
        out.device_dirty = true;
        out.host_dirty = false;
        Ok(())
    }

    /// Storage buffers in the shared descriptor set layout.
    fn kernel_bindings(&self) -> u32 {
        self.shared
            .info
            .max_per_stage_descriptor_storage_buffers
            .clamp(2, MAX_BINDINGS)
    }

    /// Compiles (or finds) each dispatch's pipeline and runs them in order in one
    /// submission, with a compute-to-compute barrier between them.
    fn dispatch(&self, dispatches: &[Dispatch]) -> Result<()> {
        let s = &*self.shared;
        let device = &s.device;
        let stats = &s.stats;
        let caps = self.kernel_capabilities();
        // Held until the fence wait: nothing this call uses is destroyed under it.
        let mut cache = s.kernels.lock();
        let layout = cache.layout(device, stats, self.kernel_bindings())?;
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
            pipelines.push(cache.pipeline(device, stats, &d.source, caps)?);
        }

        let count = dispatches.len() as u32;
        let descriptors: u32 = dispatches.iter().map(|d| d.bindings.len() as u32).sum();
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: descriptors.max(1),
        }];
        let info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(count.max(1))
            .pool_sizes(&sizes);
        // SAFETY: valid create info referring to a local; destroyed by `Pool::drop`.
        let pool =
            unsafe { device.create_descriptor_pool(&info, None) }.vk("vkCreateDescriptorPool")?;
        stats.descriptor_pool_created();
        let mut pool = Pool {
            device,
            stats,
            pool,
            sets: 0,
        };
        let layouts = vec![set_layout; dispatches.len()];
        let alloc = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool.pool)
            .set_layouts(&layouts);
        // SAFETY: the pool has room for `count` sets of these layouts.
        let sets =
            unsafe { device.allocate_descriptor_sets(&alloc) }.vk("vkAllocateDescriptorSets")?;
        for _ in &sets {
            stats.descriptor_set_created();
        }
        pool.sets = sets.len() as u64;

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

        let max_groups = u64::from(s.info.max_compute_work_group_count[0].max(1));
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
        s.submitter.run(device, |cmd| {
            for (i, ((d, &pipeline), &set)) in
                dispatches.iter().zip(&pipelines).zip(&sets).enumerate()
            {
                let groups = d
                    .elements
                    .div_ceil(u64::from(wgsl::WORKGROUP_SIZE))
                    .clamp(1, max_groups) as u32;
                // SAFETY: the command buffer is recording; pipeline, layout and set
                // are alive until after the fence wait (cache lock and `pool` held).
                unsafe {
                    if i > 0 {
                        device.cmd_pipeline_barrier(
                            cmd,
                            vk::PipelineStageFlags::COMPUTE_SHADER,
                            vk::PipelineStageFlags::COMPUTE_SHADER,
                            vk::DependencyFlags::empty(),
                            &barrier,
                            &[],
                            &[],
                        );
                    }
                    device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
                    device.cmd_bind_descriptor_sets(
                        cmd,
                        vk::PipelineBindPoint::COMPUTE,
                        pipeline_layout,
                        0,
                        &[set],
                        &[],
                    );
                    device.cmd_dispatch(cmd, groups, 1, 1);
                }
            }
        })?;
        cache.stats.dispatches += dispatches.len() as u64;
        drop(pool);
        drop(cache);
        Ok(())
    }
}

/// A view of `parent`'s memory with its own shape, `offset` elements past
/// `parent`'s element at its mins, on the host and on the device: what a crop or a
/// strided slice is. For tests until the `view` module exists; not a stable API.
#[doc(hidden)]
pub fn test_view(parent: &Buffer, name: &str, dims: Vec<Dim>, offset: u64) -> Result<Buffer> {
    parent.view_at(name, dims, offset)
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
