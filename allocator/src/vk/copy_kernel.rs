//! The Vulkan objects of the device-to-device copy kernel (`shaders/copy.wgsl`,
//! compiled by build.rs): its own layout (`descriptors::Layout`: source and
//! destination, each bound twice, as 16-byte and as 4-byte words, and the copy's
//! parameters as push constants), so that one pipeline serves every copy. Kept
//! in the context's pipeline cache; descriptor sets come from a pool made per
//! submission, as for caller kernels.

use ash::vk;

use crate::error::{Result, VkContext};
use crate::stats::Stats;
use crate::vk::descriptors::{DescriptorSets, Layout};

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
}

/// Descriptor sets of one submission, one per leg.
pub(crate) type LegSets<'a> = DescriptorSets<'a>;

impl CopyKernel {
    /// Creates the layouts, module and pipeline; nothing is left behind on failure.
    pub(crate) fn new(device: &ash::Device, stats: &Stats) -> Result<Self> {
        let mut k = CopyKernel {
            layout: Layout::new(device, stats, BINDINGS, PARAM_WORDS)?,
            module: vk::ShaderModule::null(),
            pipeline: vk::Pipeline::null(),
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

    /// One descriptor set per leg, written with the legs' ranges.
    pub(crate) fn sets<'a>(
        &self,
        device: &'a ash::Device,
        stats: &'a Stats,
        legs: &[Leg],
    ) -> Result<LegSets<'a>> {
        let out = DescriptorSets::new(
            device,
            stats,
            self.layout.set_layout,
            legs.len(),
            legs.len() as u32 * BINDINGS,
        )?;
        let infos: Vec<[[vk::DescriptorBufferInfo; 1]; 2]> = legs
            .iter()
            .map(|l| {
                [l.src, l.dst].map(|b| {
                    [vk::DescriptorBufferInfo {
                        buffer: b.buffer,
                        offset: b.offset,
                        range: b.range,
                    }]
                })
            })
            .collect();
        let mut writes = Vec::with_capacity(legs.len() * BINDINGS as usize);
        for (&set, info) in out.sets.iter().zip(&infos) {
            for b in 0..BINDINGS {
                writes.push(
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(b)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(&info[(b % 2) as usize]),
                );
            }
        }
        // SAFETY: the sets are new and unused; every buffer is alive (held by the
        // caller's regions) and each range lies inside it (checked by the planner).
        unsafe { device.update_descriptor_sets(&writes, &[]) };
        Ok(out)
    }

    /// Records leg `i` of `sets`: pipeline, descriptor set, parameters, dispatch.
    pub(crate) fn record(
        &self,
        device: &ash::Device,
        cmd: vk::CommandBuffer,
        sets: &LegSets,
        i: usize,
        leg: &Leg,
    ) {
        let bytes: Vec<u8> = leg.params.iter().flat_map(|w| w.to_ne_bytes()).collect();
        // SAFETY: the command buffer is recording; pipeline, layout and set stay alive
        // until after the fence wait (the caller holds the cache lock and `sets`).
        unsafe {
            device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            device.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.layout.pipeline_layout,
                0,
                &[sets.sets[i]],
                &[],
            );
            device.cmd_push_constants(
                cmd,
                self.layout.pipeline_layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &bytes,
            );
            device.cmd_dispatch(cmd, leg.groups.max(1), 1, 1);
        }
    }
}

/// Makes the kernel's writes visible to a later dispatch of it in the same submission.
pub(crate) fn shader_write_barrier(device: &ash::Device, cmd: vk::CommandBuffer) {
    let barrier = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE)
        .dst_access_mask(vk::AccessFlags::SHADER_READ)];
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
