//! WGSL → SPIR-V with naga, and the per-context pipeline cache.
//!
//! One `VkShaderModule` and one compute `VkPipeline` per distinct WGSL source,
//! kept until the context is dropped (or [`Context::release_kernels`]); every
//! kernel shares one descriptor set layout of `bindings` storage buffers and one
//! pipeline layout.
//!
//! [`Context::release_kernels`]: crate::Context::release_kernels

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::memory::stats::Stats;

/// Counts and times of kernel compilation, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Distinct sources compiled (each made one shader module and one pipeline).
    pub compiled: u64,
    /// Kernel calls that found their pipeline in the cache.
    pub cache_hits: u64,
    /// Dispatches recorded.
    pub dispatches: u64,
    /// Pipelines alive in the cache now.
    pub cached: u64,
    /// Total time in naga: WGSL parse, validation and SPIR-V generation.
    pub wgsl_to_spirv: Duration,
    /// Total time in `vkCreateShaderModule` + `vkCreateComputePipelines`.
    pub pipeline_creation: Duration,
}

pub(crate) struct Pipeline {
    module: vk::ShaderModule,
    pub(crate) pipeline: vk::Pipeline,
}

pub(crate) struct Layout {
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) pipeline_layout: vk::PipelineLayout,
    /// Storage-buffer bindings in the set layout (0 .. bindings).
    pub(crate) bindings: u32,
}

#[derive(Default)]
pub(crate) struct CacheInner {
    pub(crate) layout: Option<Layout>,
    pipelines: HashMap<String, Pipeline>,
    pub(crate) stats: KernelStats,
}

/// The cache; lives in the context's `Shared`.
#[derive(Default)]
pub(crate) struct KernelCache {
    inner: Mutex<CacheInner>,
}

/// Compiles WGSL to SPIR-V 1.3 (Vulkan 1.1) words, without debug info.
pub(crate) fn compile(source: &str, caps: naga::valid::Capabilities) -> Result<Vec<u32>> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| {
        Error::KernelCompileFailed(format!(
            "WGSL parse: {}\n{source}",
            e.emit_to_string(source)
        ))
    })?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| {
            Error::KernelCompileFailed(format!(
                "WGSL validation: {}\n{source}",
                e.emit_to_string(source)
            ))
        })?;
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        flags: naga::back::spv::WriterFlags::empty(),
        // Without a binding map, "fake" bindings are the WGSL's own @group/@binding.
        fake_missing_bindings: true,
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".into(),
    };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
        .map_err(|e| Error::KernelCompileFailed(format!("SPIR-V output: {e}\n{source}")))
}

impl CacheInner {
    fn publish(&self, stats: &Stats) {
        stats.kernels_kept(
            self.pipelines.len() as u64,
            u64::from(self.layout.is_some()),
        );
    }

    /// The shared layouts, created on first use with `bindings` storage buffers.
    pub(crate) fn layout(
        &mut self,
        device: &ash::Device,
        stats: &Stats,
        bindings: u32,
    ) -> Result<&Layout> {
        if self.layout.is_none() {
            let binding: Vec<vk::DescriptorSetLayoutBinding> = (0..bindings)
                .map(|b| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding);
            // SAFETY: valid create info referring to a local; destroyed in `destroy`
            // or below on failure.
            let set_layout = unsafe { device.create_descriptor_set_layout(&info, None) }
                .vk("vkCreateDescriptorSetLayout")?;
            stats.descriptor_set_layout_created();
            let layouts = [set_layout];
            let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts);
            // SAFETY: as above; the set layout is alive.
            let pipeline_layout = match unsafe { device.create_pipeline_layout(&info, None) } {
                Ok(l) => l,
                Err(e) => {
                    // SAFETY: the set layout is not used by anything.
                    unsafe { device.destroy_descriptor_set_layout(set_layout, None) };
                    stats.descriptor_set_layout_destroyed();
                    return Err(e).vk("vkCreatePipelineLayout");
                }
            };
            stats.pipeline_layout_created();
            self.layout = Some(Layout {
                set_layout,
                pipeline_layout,
                bindings,
            });
            self.publish(stats);
        }
        self.layout
            .as_ref()
            .ok_or_else(|| Error::KernelCompileFailed("no pipeline layout".into()))
    }

    /// The pipeline of `source`, compiled and created on first use. The layout
    /// must exist.
    pub(crate) fn pipeline(
        &mut self,
        device: &ash::Device,
        stats: &Stats,
        source: &str,
        caps: naga::valid::Capabilities,
    ) -> Result<vk::Pipeline> {
        if let Some(p) = self.pipelines.get(source) {
            self.stats.cache_hits += 1;
            return Ok(p.pipeline);
        }
        let pipeline_layout = self
            .layout
            .as_ref()
            .map(|l| l.pipeline_layout)
            .ok_or_else(|| Error::KernelCompileFailed("no pipeline layout".into()))?;
        let start = Instant::now();
        let words = compile(source, caps)?;
        let compiled = Instant::now();
        self.stats.wgsl_to_spirv += compiled - start;
        let info = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: `words` is SPIR-V produced and validated by naga; destroyed in
        // `destroy` (or below on failure).
        let module =
            unsafe { device.create_shader_module(&info, None) }.vk("vkCreateShaderModule")?;
        stats.shader_module_created();
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(pipeline_layout)];
        // SAFETY: the module and layout are alive; the create info refers to locals.
        let created =
            unsafe { device.create_compute_pipelines(vk::PipelineCache::null(), &info, None) };
        let pipeline = match created {
            Ok(v) if !v.is_empty() => v[0],
            Ok(_) => {
                // SAFETY: the module is used by no pipeline.
                unsafe { device.destroy_shader_module(module, None) };
                stats.shader_module_destroyed();
                return Err(Error::Vulkan {
                    call: "vkCreateComputePipelines",
                    result: vk::Result::ERROR_UNKNOWN,
                });
            }
            Err((pipelines, e)) => {
                // SAFETY: failed creation returns null handles or pipelines nothing
                // uses; the module is used by none of them.
                unsafe {
                    for p in pipelines {
                        if p != vk::Pipeline::null() {
                            device.destroy_pipeline(p, None);
                        }
                    }
                    device.destroy_shader_module(module, None);
                }
                stats.shader_module_destroyed();
                return Err(e).vk("vkCreateComputePipelines");
            }
        };
        stats.pipeline_created();
        self.stats.pipeline_creation += compiled.elapsed();
        self.stats.compiled += 1;
        self.pipelines
            .insert(source.to_owned(), Pipeline { module, pipeline });
        self.stats.cached = self.pipelines.len() as u64;
        self.publish(stats);
        Ok(pipeline)
    }

    /// Destroys every pipeline, module and layout.
    ///
    /// # Safety
    /// No submission that uses them may be pending.
    pub(crate) unsafe fn clear(&mut self, device: &ash::Device, stats: &Stats) {
        for (_, p) in self.pipelines.drain() {
            // SAFETY: the caller guarantees nothing pending uses them.
            unsafe {
                device.destroy_pipeline(p.pipeline, None);
                device.destroy_shader_module(p.module, None);
            }
            stats.pipeline_destroyed();
            stats.shader_module_destroyed();
        }
        if let Some(l) = self.layout.take() {
            // SAFETY: as above; the pipelines that used the layouts are gone.
            unsafe {
                device.destroy_pipeline_layout(l.pipeline_layout, None);
                device.destroy_descriptor_set_layout(l.set_layout, None);
            }
            stats.pipeline_layout_destroyed();
            stats.descriptor_set_layout_destroyed();
        }
        self.stats.cached = 0;
        self.publish(stats);
    }
}

impl KernelCache {
    /// Locks the cache. Kernel calls hold the lock from pipeline lookup until their
    /// fence wait, so nothing they use is destroyed under them.
    pub(crate) fn lock(&self) -> MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Destroys everything; called by `Shared::drop` before the device.
    ///
    /// # Safety
    /// The device must be idle.
    pub(crate) unsafe fn destroy(&self, device: &ash::Device, stats: &Stats) {
        // SAFETY: the caller guarantees the device is idle.
        unsafe { self.lock().clear(device, stats) };
    }
}
