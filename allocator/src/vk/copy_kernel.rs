//! The Vulkan objects of the device-to-device copy kernel (`shaders/copy.wgsl`,
//! compiled by build.rs): its own layout (`descriptors::Layout`: source and
//! destination, each bound twice, as 16-byte and as 4-byte words, and the copy's
//! parameters as push constants), so that one pipeline serves every copy. Kept
//! in the context's pipeline cache. Its bindings are pushed into the command
//! buffer where the device has `VK_KHR_push_descriptor`: a pool, its sets and
//! their updates cost microseconds per copy, a large share of a small one.
//! Elsewhere they come from a pool made per submission, as for caller kernels.

use ash::vk;

use crate::error::{Result, VkContext};
use crate::stats::Stats;
use crate::vk::descriptors::{DescriptorSets, Layout};
use crate::vk::device::DeviceShared;

include!(concat!(env!("OUT_DIR"), "/copy_spirv.rs"));

/// Push-constant words of the kernel (`Params` in copy.wgsl).
pub(crate) const PARAM_WORDS: usize = 12;

/// Invocations per workgroup (`@workgroup_size` in copy.wgsl).
pub(crate) const GROUP_SIZE: u64 = 256;

/// Storage-buffer bindings: source and destination as 16-byte words, then as 4-byte words.
const BINDINGS: u32 = 4;

/// A range of a `VkBuffer` bound as one side of a copy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bound {
    pub(crate) buffer: vk::Buffer,
    pub(crate) offset: u64,
    pub(crate) range: u64,
}

/// One dispatch of the kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Leg {
    pub(crate) src: Bound,
    pub(crate) dst: Bound,
    pub(crate) params: [u32; PARAM_WORDS],
    pub(crate) groups: u32,
}

/// The kernel's layouts, module and pipeline.
pub(crate) struct CopyKernel {
    layout: Layout,
    module: vk::ShaderModule,
    pipeline: vk::Pipeline,
    /// Where the bindings are pushed into command buffers.
    push: Option<ash::khr::push_descriptor::Device>,
}

/// The bindings of one submission's legs.
pub(crate) enum LegSets<'a> {
    /// Pushed as each leg is recorded, through the extension's functions.
    Pushed(&'a ash::khr::push_descriptor::Device),
    /// One descriptor set per leg.
    Sets(DescriptorSets<'a>),
}

impl CopyKernel {
    /// Creates the layouts, module and pipeline; nothing is left behind on failure.
    pub(crate) fn new(shared: &DeviceShared) -> Result<Self> {
        let (device, stats) = (&shared.raw(), &shared.stats);
        let push = shared.push_descriptor.clone();
        let mut k = CopyKernel {
            layout: Layout::new(device, stats, BINDINGS, PARAM_WORDS, push.is_some())?,
            module: vk::ShaderModule::null(),
            pipeline: vk::Pipeline::null(),
            push,
        };
        match k.create(device, stats) {
            Ok(()) => Ok(k),
            Err(e) => {
                // SAFETY: nothing uses the objects made so far.
                unsafe { k.destroy(device, stats) };
                Err(e)
            }
        }
    }

    fn create(&mut self, device: &ash::Device, stats: &Stats) -> Result<()> {
        let info = vk::ShaderModuleCreateInfo::default().code(COPY_SPIRV);
        // SAFETY: the words are naga's SPIR-V of copy.wgsl, validated at build time.
        self.module =
            unsafe { device.create_shader_module(&info, None) }.vk("vkCreateShaderModule")?;
        stats.shader_module_created();
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(self.module)
            .name(c"main");
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.layout.pipeline_layout)];
        // SAFETY: the module and layout are alive; the create info refers to locals.
        let created =
            unsafe { device.create_compute_pipelines(vk::PipelineCache::null(), &info, None) };
        match created {
            Ok(v) => {
                self.pipeline = v.first().copied().unwrap_or_default();
                if self.pipeline == vk::Pipeline::null() {
                    return Err(crate::error::Error::Vulkan {
                        call: "vkCreateComputePipelines",
                        result: vk::Result::ERROR_UNKNOWN,
                    });
                }
                stats.pipeline_created();
                Ok(())
            }
            Err((pipelines, e)) => {
                for p in pipelines.into_iter().filter(|p| *p != vk::Pipeline::null()) {
                    // SAFETY: a pipeline from failed creation that nothing uses.
                    unsafe { device.destroy_pipeline(p, None) };
                }
                Err(e).vk("vkCreateComputePipelines")
            }
        }
    }

    /// Destroys whatever of the kernel exists.
    ///
    /// # Safety
    /// No pending submission may use it.
    pub(crate) unsafe fn destroy(&mut self, device: &ash::Device, stats: &Stats) {
        // SAFETY: the caller guarantees nothing pending uses these objects; each is
        // destroyed once (set to null after).
        unsafe {
            if self.pipeline != vk::Pipeline::null() {
                device.destroy_pipeline(self.pipeline, None);
                stats.pipeline_destroyed();
            }
            if self.module != vk::ShaderModule::null() {
                device.destroy_shader_module(self.module, None);
                stats.shader_module_destroyed();
            }
            self.layout.destroy(device, stats);
        }
        self.pipeline = vk::Pipeline::null();
        self.module = vk::ShaderModule::null();
    }

    /// The bindings of `legs`: nothing to make where they are pushed, else one
    /// descriptor set per leg, written with the legs' ranges.
    pub(crate) fn sets<'a>(
        &'a self,
        device: &'a ash::Device,
        stats: &'a Stats,
        legs: &[Leg],
    ) -> Result<LegSets<'a>> {
        if let Some(push) = &self.push {
            return Ok(LegSets::Pushed(push));
        }
        let out = DescriptorSets::new(
            device,
            stats,
            self.layout.set_layout,
            legs.len(),
            legs.len() as u32 * BINDINGS,
        )?;
        let infos: Vec<_> = legs.iter().map(buffer_infos).collect();
        let writes: Vec<_> = out
            .sets
            .iter()
            .zip(&infos)
            .flat_map(|(&set, info)| writes(set, info))
            .collect();
        // SAFETY: the sets are new and unused; every buffer is alive (held by the
        // caller's regions) and each range lies inside it (checked by the planner).
        unsafe { device.update_descriptor_sets(&writes, &[]) };
        Ok(LegSets::Sets(out))
    }

    /// Records leg `i` of `sets`: pipeline, bindings, parameters, dispatch.
    pub(crate) fn record(
        &self,
        device: &ash::Device,
        cmd: vk::CommandBuffer,
        sets: &LegSets,
        i: usize,
        leg: &Leg,
    ) {
        let bytes: Vec<u8> = leg.params.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let (bind, layout) = (vk::PipelineBindPoint::COMPUTE, self.layout.pipeline_layout);
        // SAFETY: the command buffer is recording; pipeline, layout and set stay alive
        // until after the fence wait (the caller holds the cache lock and `sets`);
        // pushed bindings name buffers the caller's regions hold, ranges inside them.
        unsafe {
            device.cmd_bind_pipeline(cmd, bind, self.pipeline);
            match sets {
                LegSets::Sets(s) => {
                    device.cmd_bind_descriptor_sets(cmd, bind, layout, 0, &[s.sets[i]], &[])
                }
                LegSets::Pushed(push) => {
                    let info = buffer_infos(leg);
                    let w = writes(vk::DescriptorSet::null(), &info);
                    push.cmd_push_descriptor_set(cmd, bind, layout, 0, &w);
                }
            }
            device.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
            device.cmd_dispatch(cmd, leg.groups.max(1), 1, 1);
        }
    }
}

/// The first word of a key of [`CopyKernel::key`]'s recordings.
const KEY_KERNEL: u64 = 1;

impl CopyKernel {
    /// What recording `legs` with `sets` records, as a key of the recording
    /// (`Submitter::run_kept`): none where the bindings are in descriptor sets,
    /// which go with their submission.
    pub(crate) fn key(&self, sets: &LegSets, legs: &[Leg]) -> Option<Vec<u64>> {
        use ash::vk::Handle;
        let LegSets::Pushed(_) = sets else {
            return None;
        };
        let mut key = vec![KEY_KERNEL, self.pipeline.as_raw()];
        for l in legs {
            for b in [l.src, l.dst] {
                key.extend([b.buffer.as_raw(), b.offset, b.range]);
            }
            key.extend(l.params.iter().map(|&w| w as u64));
            key.push(l.groups as u64);
        }
        Some(key)
    }
}

/// A leg's source and destination ranges.
fn buffer_infos(leg: &Leg) -> [[vk::DescriptorBufferInfo; 1]; 2] {
    [leg.src, leg.dst].map(|b| {
        [vk::DescriptorBufferInfo {
            buffer: b.buffer,
            offset: b.offset,
            range: b.range,
        }]
    })
}

/// The writes of every binding of `set` (null where pushed): source, destination,
/// source, destination.
fn writes(
    set: vk::DescriptorSet,
    info: &[[vk::DescriptorBufferInfo; 1]; 2],
) -> Vec<vk::WriteDescriptorSet<'_>> {
    (0..BINDINGS)
        .map(|b| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(b)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(&info[(b % 2) as usize])
        })
        .collect()
}

/// Orders a dispatch's writes before the reads and writes of a later dispatch
/// in the same submission (the copy kernel's legs, a caller's kernels).
pub(crate) fn shader_write_barrier(device: &ash::Device, cmd: vk::CommandBuffer) {
    let barrier = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE)
        .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
    // SAFETY: the command buffer is recording; a compute-to-compute barrier.
    unsafe {
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
}
