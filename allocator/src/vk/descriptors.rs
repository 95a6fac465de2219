//! Descriptors of compute shaders over storage buffers: the one shape of set
//! layout and pipeline layout every shader of the runtime uses, and the sets of
//! one submission, from a pool made for them and destroyed, with its sets, when
//! they are dropped after the submission's fence wait.

use ash::vk;

use crate::error::{Result, VkContext};
use crate::stats::Stats;

/// A descriptor set layout of storage buffers for compute shaders, and a
/// pipeline layout of that one set and a push-constant range.
pub(crate) struct Layout {
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) pipeline_layout: vk::PipelineLayout,
    /// Storage-buffer bindings in the set layout (0 .. bindings).
    pub(crate) bindings: u32,
}

impl Layout {
    /// `bindings` storage buffers and `push_words` words of push constants, at
    /// most 32 (128 bytes, the least `maxPushConstantsSize` a device may have).
    /// With `pushed`, the bindings are written into command buffers
    /// (`VK_KHR_push_descriptor`) instead of sets. Nothing is left behind on failure.
    pub(crate) fn new(
        device: &ash::Device,
        stats: &Stats,
        bindings: u32,
        push_words: usize,
        pushed: bool,
    ) -> Result<Self> {
        debug_assert!(push_words <= 32, "{push_words} push-constant words");
        let binding: Vec<vk::DescriptorSetLayoutBinding> = (0..bindings)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let flags = match pushed {
            true => vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR,
            false => vk::DescriptorSetLayoutCreateFlags::empty(),
        };
        let info = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(flags)
            .bindings(&binding);
        // SAFETY: valid create info referring to a local; destroyed in `destroy`
        // or below on failure.
        let set_layout = unsafe { device.create_descriptor_set_layout(&info, None) }
            .vk("vkCreateDescriptorSetLayout")?;
        stats.descriptor_set_layout_created();
        let layouts = [set_layout];
        let ranges = [vk::PushConstantRange {
            stage_flags: vk::ShaderStageFlags::COMPUTE,
            offset: 0,
            size: (push_words * 4) as u32,
        }];
        let info = vk::PipelineLayoutCreateInfo::default()
            .set_layouts(&layouts)
            .push_constant_ranges(&ranges);
        // SAFETY: as above; the set layout is alive; the push constants are within
        // what every device allows.
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
        Ok(Layout {
            set_layout,
            pipeline_layout,
            bindings,
        })
    }

    /// Destroys both layouts; a second call does nothing.
    ///
    /// # Safety
    /// No pipeline made with them may be alive, nor any pending submission use them.
    pub(crate) unsafe fn destroy(&mut self, device: &ash::Device, stats: &Stats) {
        if self.pipeline_layout != vk::PipelineLayout::null() {
            // SAFETY: the caller guarantees nothing uses it.
            unsafe { device.destroy_pipeline_layout(self.pipeline_layout, None) };
            stats.pipeline_layout_destroyed();
        }
        if self.set_layout != vk::DescriptorSetLayout::null() {
            // SAFETY: as above.
            unsafe { device.destroy_descriptor_set_layout(self.set_layout, None) };
            stats.descriptor_set_layout_destroyed();
        }
        self.pipeline_layout = vk::PipelineLayout::null();
        self.set_layout = vk::DescriptorSetLayout::null();
    }
}

/// `count` descriptor sets of one layout of storage buffers.
pub(crate) struct DescriptorSets<'a> {
    device: &'a ash::Device,
    stats: &'a Stats,
    pool: vk::DescriptorPool,
    pub(crate) sets: Vec<vk::DescriptorSet>,
}

impl<'a> DescriptorSets<'a> {
    /// A pool with room for `count` sets of `layout` and `buffers` storage-buffer
    /// descriptors in all, and the sets allocated from it.
    pub(crate) fn new(
        device: &'a ash::Device,
        stats: &'a Stats,
        layout: vk::DescriptorSetLayout,
        count: usize,
        buffers: u32,
    ) -> Result<Self> {
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: buffers.max(1),
        }];
        let info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(count.max(1) as u32)
            .pool_sizes(&sizes);
        // SAFETY: valid create info referring to locals; destroyed on drop.
        let pool =
            unsafe { device.create_descriptor_pool(&info, None) }.vk("vkCreateDescriptorPool")?;
        stats.descriptor_pool_created();
        let mut out = DescriptorSets {
            device,
            stats,
            pool,
            sets: Vec::new(),
        };
        let layouts = vec![layout; count];
        let alloc = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: the pool has room for `count` sets of this layout.
        out.sets =
            unsafe { device.allocate_descriptor_sets(&alloc) }.vk("vkAllocateDescriptorSets")?;
        for _ in &out.sets {
            stats.descriptor_set_created();
        }
        Ok(out)
    }
}

impl Drop for DescriptorSets<'_> {
    fn drop(&mut self) {
        // SAFETY: dropped after the submission that used the sets completed (the
        // submitter waits for its fence) or when nothing was submitted.
        unsafe { self.device.destroy_descriptor_pool(self.pool, None) };
        for _ in &self.sets {
            self.stats.descriptor_set_destroyed();
        }
        self.stats.descriptor_pool_destroyed();
    }
}
