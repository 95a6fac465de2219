//! One launch of an entry point: its specialization constants, pipeline,
//! uniform buffer of scalars and storage buffers, then the dispatch, in one
//! submission that vkcopy waits for.

use std::ffi::{c_int, c_void, CString};

use vkcopy::ash::vk;
use vkcopy::Role;

use super::{Compiled, Kernels};
use crate::buffer;
use crate::error::Failure;
use crate::ffi::{code, HalideBuffer};

/// The launch's grid, as `halide_vulkan_run` receives it.
pub(crate) struct Grid {
    pub(crate) blocks: [c_int; 3],
    pub(crate) threads: [c_int; 3],
    pub(crate) shared_mem_bytes: c_int,
}

/// The arguments: buffers in order, and the scalars' bytes packed in order
/// (Halide's codegen sorts them by falling size, so each is aligned).
pub(crate) struct Args {
    pub(crate) buffers: Vec<*mut HalideBuffer>,
    pub(crate) scalars: Vec<u8>,
    pub(crate) scalar_count: usize,
}

impl Args {
    /// # Safety
    /// The three arrays run to the first zero in `sizes`; each scalar points to
    /// its bytes, each buffer is a `halide_buffer_t`.
    pub(crate) unsafe fn read(
        sizes: *const usize,
        args: *const *mut c_void,
        is_buffer: *const i8,
    ) -> Args {
        let mut a = Args {
            buffers: Vec::new(),
            scalars: Vec::new(),
            scalar_count: 0,
        };
        if sizes.is_null() || args.is_null() || is_buffer.is_null() {
            return a;
        }
        let mut i = 0;
        // SAFETY: the caller's promise: the arrays run to the zero size.
        unsafe {
            while *sizes.add(i) > 0 {
                let p = *args.add(i);
                if *is_buffer.add(i) != 0 {
                    a.buffers.push(p.cast());
                } else {
                    let n = *sizes.add(i);
                    a.scalars
                        .extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), n));
                    a.scalar_count += 1;
                }
                i += 1;
            }
        }
        a
    }
}

fn fail(m: String) -> Failure {
    Failure::new(code::DEVICE_RUN_FAILED, m)
}

/// The specialization constants a launch sets, by Halide's rules: the
/// dynamic shared array's length (the bytes beyond the fixed arrays, in its
/// elements), then the workgroup size where the entry point takes it as
/// constants.
fn constants(e: &super::blob::Entry, g: &Grid) -> Result<Vec<(u32, u32)>, Failure> {
    let mut out = Vec::new();
    if !e.shared.is_empty() && g.shared_mem_bytes > 0 {
        let fixed: u64 = e
            .shared
            .iter()
            .filter(|s| s.constant_id == 0)
            .map(|s| u64::from(s.elem_bytes) * u64::from(s.elems))
            .sum();
        let mut dynamic = e.shared.iter().filter(|s| s.constant_id != 0);
        let first = dynamic.next();
        if dynamic.next().is_some() {
            return Err(fail(format!(
                "{}: more than one dynamically sized shared array",
                e.name
            )));
        }
        let avail = (g.shared_mem_bytes as u64)
            .checked_sub(fixed)
            .ok_or_else(|| {
                fail(format!(
                    "{}: {} bytes of shared memory, fewer than its fixed arrays' {fixed}",
                    e.name, g.shared_mem_bytes
                ))
            })?;
        if let Some(s) = first.filter(|_| avail > 0) {
            out.push((
                s.constant_id,
                (avail / u64::from(s.elem_bytes.max(1))) as u32,
            ));
        }
    }
    if e.local_size_ids[0] != 0 {
        for (id, t) in e.local_size_ids.iter().zip(g.threads) {
            out.push((*id, t.max(1) as u32));
        }
    }
    for (id, _) in &out {
        if !e.constants.iter().any(|c| c.id == *id) {
            return Err(fail(format!(
                "{}: no specialization constant {id} in its module",
                e.name
            )));
        }
    }
    Ok(out)
}

/// The entry point's pipeline for `consts`, made on first use.
fn pipeline(
    d: &vkcopy::ash::Device,
    m: &mut Compiled,
    n: usize,
    consts: Vec<(u32, u32)>,
) -> Result<vk::Pipeline, Failure> {
    let key = (n, consts);
    if let Some(p) = m.pipelines.get(&key) {
        return Ok(*p);
    }
    let name = CString::new(m.module.entries[n].name.clone())
        .map_err(|_| fail("an entry point name with a NUL".into()))?;
    let map: Vec<_> = (0..key.1.len() as u32)
        .map(|i| vk::SpecializationMapEntry {
            constant_id: key.1[i as usize].0,
            offset: 4 * i,
            size: 4,
        })
        .collect();
    let data: Vec<u8> = key.1.iter().flat_map(|(_, v)| v.to_ne_bytes()).collect();
    let spec = vk::SpecializationInfo::default()
        .map_entries(&map)
        .data(&data);
    let mut stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(m.shader)
        .name(&name);
    if !map.is_empty() {
        stage = stage.specialization_info(&spec);
    }
    let info = vk::ComputePipelineCreateInfo::default()
        .stage(stage)
        .layout(m.layout);
    // SAFETY: valid create info over locals; module and layout are alive.
    let p = unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) }
        .map_err(|(_, e)| {
            fail(format!(
                "{}: vkCreateComputePipelines failed: {e}",
                m.module.entries[n].name
            ))
        })?[0];
    m.pipelines.insert(key, p);
    Ok(p)
}

/// Launches `name` of `k` and waits for it.
pub(crate) fn run(k: &mut Kernels, name: &str, g: &Grid, args: &Args) -> Result<(), Failure> {
    let (mi, n) = k
        .modules
        .iter()
        .enumerate()
        .find_map(|(mi, m)| {
            m.module
                .entries
                .iter()
                .position(|e| e.name == name)
                .map(|n| (mi, n))
        })
        .ok_or_else(|| fail(format!("no entry point {name} in the pipeline's kernels")))?;
    let device = k.device.clone();
    let ctx = &device.ctx;
    let d = &ctx.raw_device();
    let m = &mut k.modules[mi];
    let e = m.module.entries[n].clone();
    if e.uniform_buffers > 1 || (e.uniform_buffers == 1) != (args.scalar_count > 0) {
        return Err(fail(format!(
            "{name}: {} uniform buffers for {} scalar arguments: a blob of Halide's codegen after 21 \
             (one offset per buffer in the uniform buffer, Halide #8954)? This library serves Halide 21's",
            e.uniform_buffers, args.scalar_count
        )));
    }
    if e.storage_buffers as usize != args.buffers.len() {
        return Err(fail(format!(
            "{name}: {} storage buffers in its module, {} buffer arguments",
            e.storage_buffers,
            args.buffers.len()
        )));
    }
    if g.blocks.iter().chain(&g.threads).any(|&v| v < 0) {
        return Err(fail(format!(
            "{name}: a negative grid {:?} x {:?}",
            g.blocks, g.threads
        )));
    }
    let pipeline = pipeline(d, m, n, constants(&e, g)?)?;

    let mut infos = Vec::with_capacity(args.buffers.len() + 1);
    let uniform = if args.scalars.is_empty() {
        None
    } else {
        let mut bytes = args.scalars.clone();
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        let region = ctx
            .allocate(Role::Device, bytes.len() as u64)
            .map_err(|e| Failure::vk(code::DEVICE_RUN_FAILED, e))?;
        infos.push(vk::DescriptorBufferInfo {
            buffer: region.vk_buffer(),
            offset: 0,
            range: bytes.len() as u64,
        });
        Some((region, bytes))
    };
    let align = ctx.info().min_storage_buffer_offset_alignment.max(1);
    let mut views = Vec::with_capacity(args.buffers.len());
    let mut ranges = Vec::with_capacity(args.buffers.len());
    for (i, &b) in args.buffers.iter().enumerate() {
        // SAFETY: Halide's buffer argument.
        let buf = unsafe { b.as_ref() }
            .ok_or_else(|| fail(format!("{name}: buffer argument {i} is null")))?;
        // SAFETY: a handle on a buffer of this interface is one of ours.
        let h = unsafe { buffer::handle(buf) }.ok_or_else(|| {
            fail(format!(
                "{name}: buffer argument {i} has no device memory of this library"
            ))
        })?;
        // SAFETY: as above.
        let view = unsafe { buffer::shaped_like(h, buf, &format!("argument {i} of {name}")) }?;
        let range = ctx
            .view_range(&view)
            .map_err(|e| Failure::vk(code::DEVICE_RUN_FAILED, e))?;
        // Past this, binding it is invalid Vulkan, which some drivers run anyway.
        let max = u64::from(ctx.info().max_storage_buffer_range);
        if range.range > max {
            return Err(fail(format!(
                "{name}: buffer argument {i} spans {} bytes, more than the device's \
                 maxStorageBufferRange ({max}): no kernel can bind it",
                range.range
            )));
        }
        ranges.push(range);
        views.push(view);
    }
    // A view whose offset a descriptor cannot take (a crop: Halide 21 binds
    // crops by offset) goes through an aligned copy of its span, copied back
    // after the kernel; such a view must not overlap another argument.
    let mut staged = Vec::new();
    for (i, r) in ranges.iter().enumerate() {
        if r.offset.is_multiple_of(align) {
            infos.push(*r);
            continue;
        }
        let overlaps = ranges.iter().enumerate().any(|(j, o)| {
            j != i
                && o.buffer == r.buffer
                && o.offset < r.offset + r.range
                && r.offset < o.offset + o.range
        });
        if overlaps {
            return Err(fail(format!(
                "{name}: buffer argument {i} starts at byte {} of its VkBuffer, not a multiple of \
                 minStorageBufferOffsetAlignment ({align}), and overlaps another argument; Halide \
                 21's kernels take buffers at a descriptor offset, which cannot be this one",
                r.offset
            )));
        }
        let temp = ctx
            .allocate(Role::Device, r.range)
            .map_err(|e| Failure::vk(code::DEVICE_RUN_FAILED, e))?;
        infos.push(vk::DescriptorBufferInfo {
            buffer: temp.vk_buffer(),
            offset: 0,
            range: r.range,
        });
        staged.push((*r, temp));
    }

    let mut sizes = Vec::new();
    if uniform.is_some() {
        sizes.push(vk::DescriptorPoolSize {
            ty: vk::DescriptorType::UNIFORM_BUFFER,
            descriptor_count: 1,
        });
    }
    if !views.is_empty() {
        sizes.push(vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: views.len() as u32,
        });
    }
    let pool_info = vk::DescriptorPoolCreateInfo::default()
        .max_sets(1)
        .pool_sizes(&sizes);
    // SAFETY: valid create info over locals.
    let pool = unsafe { d.create_descriptor_pool(&pool_info, None) }
        .map_err(|e| fail(format!("{name}: vkCreateDescriptorPool failed: {e}")))?;
    let result = (|| {
        let layouts = [m.set_layouts[n]];
        let alloc = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: the pool has room for one set of this layout.
        let set = unsafe { d.allocate_descriptor_sets(&alloc) }
            .map_err(|e| fail(format!("{name}: vkAllocateDescriptorSets failed: {e}")))?[0];
        let writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(b, info)| {
                let ty = if uniform.is_some() && b == 0 {
                    vk::DescriptorType::UNIFORM_BUFFER
                } else {
                    vk::DescriptorType::STORAGE_BUFFER
                };
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(b as u32)
                    .descriptor_type(ty)
                    .buffer_info(std::slice::from_ref(info))
            })
            .collect();
        // SAFETY: the set is new; every buffer is alive (held by `views` and `uniform`).
        unsafe { d.update_descriptor_sets(&writes, &[]) };
        let before = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(
                vk::AccessFlags::TRANSFER_WRITE
                    | vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE
                    | vk::AccessFlags::UNIFORM_READ,
            )];
        let uniform_ready = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(
                vk::AccessFlags::UNIFORM_READ
                    | vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE,
            )];
        let written = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::TRANSFER_READ)];
        let after = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(
                vk::AccessFlags::MEMORY_READ
                    | vk::AccessFlags::MEMORY_WRITE
                    | vk::AccessFlags::HOST_READ,
            )];
        let [bx, by, bz] = g.blocks.map(|v| v as u32);
        let layout = m.layout;
        ctx.run_commands(|cmd| {
            // SAFETY: the command buffer is recording; pipeline, layout, set and
            // buffers are alive until run_commands has waited.
            unsafe {
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::ALL_COMMANDS,
                    vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::DependencyFlags::empty(),
                    &before,
                    &[],
                    &[],
                );
                for (r, temp) in &staged {
                    let region = [vk::BufferCopy {
                        src_offset: r.offset,
                        dst_offset: 0,
                        size: r.range,
                    }];
                    d.cmd_copy_buffer(cmd, r.buffer, temp.vk_buffer(), &region);
                }
                if let Some((region, bytes)) = &uniform {
                    d.cmd_update_buffer(cmd, region.vk_buffer(), 0, bytes);
                }
                if uniform.is_some() || !staged.is_empty() {
                    d.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::TRANSFER,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::DependencyFlags::empty(),
                        &uniform_ready,
                        &[],
                        &[],
                    );
                }
                d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
                d.cmd_bind_descriptor_sets(
                    cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    layout,
                    n as u32,
                    &[set],
                    &[],
                );
                d.cmd_dispatch(cmd, bx, by, bz);
                if !staged.is_empty() {
                    d.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::PipelineStageFlags::TRANSFER,
                        vk::DependencyFlags::empty(),
                        &written,
                        &[],
                        &[],
                    );
                }
                for (r, temp) in &staged {
                    let region = [vk::BufferCopy {
                        src_offset: 0,
                        dst_offset: r.offset,
                        size: r.range,
                    }];
                    d.cmd_copy_buffer(cmd, temp.vk_buffer(), r.buffer, &region);
                }
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::ALL_COMMANDS | vk::PipelineStageFlags::HOST,
                    vk::DependencyFlags::empty(),
                    &after,
                    &[],
                    &[],
                );
            }
        })
        .map_err(|e| Failure::vk(code::DEVICE_RUN_FAILED, e))
    })();
    // SAFETY: the submission was waited for (or never made); the set goes with the pool.
    unsafe { d.destroy_descriptor_pool(pool, None) };
    drop(views);
    result
}
