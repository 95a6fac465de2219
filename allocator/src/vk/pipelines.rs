//! The per-context pipeline cache: one `VkShaderModule` and one compute
//! `VkPipeline` per shader key, kept until the context is dropped (or
//! [`Context::release_pipelines`]); every pipeline shares one descriptor set
//! layout of storage buffers and one pipeline layout, which has a push-constant
//! range of [`PUSH_WORDS`] words for the shapes of kernels. The runtime's own
//! device-to-device copy kernel is kept here too, with a layout of the same
//! shape (`descriptors::Layout`) and its own bindings and push constants.
//!
//! [`Context::release_pipelines`]: crate::Context::release_pipelines

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::stats::Stats;
use crate::vk::copy_kernel::CopyKernel;
use crate::vk::descriptors::Layout;
use crate::vk::device::DeviceShared;

/// Counts and times of pipeline creation, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Distinct shaders compiled (each made one shader module and one pipeline).
    pub compiled: u64,
    /// Dispatches that found their pipeline in the cache.
    pub cache_hits: u64,
    /// Dispatches recorded.
    pub dispatches: u64,
    /// Pipelines alive in the cache now.
    pub cached: u64,
    /// Total time producing SPIR-V (the callers' compilers).
    pub to_spirv: Duration,
    /// Total time in `vkCreateShaderModule` + `vkCreateComputePipelines`.
    pub pipeline_creation: Duration,
}

/// Push-constant words of the shared pipeline layout: 128 bytes, the least
/// `maxPushConstantsSize` a Vulkan device may have.
pub(crate) const PUSH_WORDS: usize = 32;

pub(crate) struct Pipeline {
    module: vk::ShaderModule,
    pub(crate) pipeline: vk::Pipeline,
}

#[derive(Default)]
pub(crate) struct CacheInner {
    pub(crate) layout: Option<Layout>,
    pipelines: HashMap<String, Pipeline>,
    /// The device-to-device copy kernel, made on first use.
    copy: Option<CopyKernel>,
    pub(crate) stats: PipelineStats,
}

/// The cache of one context.
pub(crate) struct PipelineCache {
    device: Arc<DeviceShared>,
    inner: Mutex<CacheInner>,
}

impl CacheInner {
    fn publish(&self, stats: &Stats) {
        let copy = u64::from(self.copy.is_some());
        stats.kernels_kept(
            self.pipelines.len() as u64 + copy,
            u64::from(self.layout.is_some()) + copy,
        );
    }

    /// The device-to-device copy kernel, created on first use.
    pub(crate) fn copy_kernel(&mut self, device: &DeviceShared) -> Result<&CopyKernel> {
        if self.copy.is_none() {
            self.copy = Some(CopyKernel::new(device)?);
            self.publish(&device.stats);
        }
        self.copy
            .as_ref()
            .ok_or_else(|| Error::KernelCompileFailed("no copy kernel".into()))
    }

    /// The shared layouts, created on first use with `bindings` storage buffers.
    pub(crate) fn layout(
        &mut self,
        device: &ash::Device,
        stats: &Stats,
        bindings: u32,
    ) -> Result<&Layout> {
        if self.layout.is_none() {
            self.layout = Some(Layout::new(device, stats, bindings, PUSH_WORDS, false)?);
            self.publish(stats);
        }
        self.layout
            .as_ref()
            .ok_or_else(|| Error::KernelCompileFailed("no pipeline layout".into()))
    }

    /// The pipeline of shader `key`, made from the words `spirv` returns on first
    /// use. The layout must exist.
    pub(crate) fn pipeline(
        &mut self,
        device: &ash::Device,
        stats: &Stats,
        key: &str,
        spirv: &dyn Fn() -> Result<Vec<u32>>,
    ) -> Result<vk::Pipeline> {
        if let Some(p) = self.pipelines.get(key) {
            self.stats.cache_hits += 1;
            return Ok(p.pipeline);
        }
        let pipeline_layout = self
            .layout
            .as_ref()
            .map(|l| l.pipeline_layout)
            .ok_or_else(|| Error::KernelCompileFailed("no pipeline layout".into()))?;
        let start = Instant::now();
        let words = spirv()?;
        let compiled = Instant::now();
        self.stats.to_spirv += compiled - start;
        let info = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: `words` is the caller's SPIR-V (the `dispatch` contract); destroyed
        // in `clear` (or below on failure).
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
            .insert(key.to_owned(), Pipeline { module, pipeline });
        self.stats.cached = self.pipelines.len() as u64;
        self.publish(stats);
        Ok(pipeline)
    }

    /// Destroys every pipeline, module and layout.
    ///
    /// # Safety
    /// No submission that uses them may be pending.
    pub(crate) unsafe fn clear(&mut self, shared: &DeviceShared) {
        let (device, stats) = (&shared.raw(), &shared.stats);
        shared.retire();
        for (_, p) in self.pipelines.drain() {
            // SAFETY: the caller guarantees nothing pending uses them.
            unsafe {
                device.destroy_pipeline(p.pipeline, None);
                device.destroy_shader_module(p.module, None);
            }
            stats.pipeline_destroyed();
            stats.shader_module_destroyed();
        }
        if let Some(mut k) = self.copy.take() {
            // SAFETY: as above.
            unsafe { k.destroy(device, stats) };
        }
        if let Some(mut l) = self.layout.take() {
            // SAFETY: as above; the pipelines that used the layouts are gone.
            unsafe { l.destroy(device, stats) };
        }
        self.stats.cached = 0;
        self.publish(stats);
    }
}

impl PipelineCache {
    pub(crate) fn new(device: &Arc<DeviceShared>) -> Self {
        PipelineCache {
            device: device.clone(),
            inner: Mutex::default(),
        }
    }

    /// Locks the cache. Dispatches hold the lock from pipeline lookup until their
    /// fence wait, so nothing they use is destroyed under them.
    pub(crate) fn lock(&self) -> MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for PipelineCache {
    fn drop(&mut self) {
        let device = &self.device;
        // SAFETY: dispatches wait for their fence before releasing the lock; the
        // cache is gone, so no dispatch is running.
        unsafe { self.lock().clear(device) };
    }
}
