//! Descriptor sets of one submission: a pool made for them and destroyed, with
//! its sets, when they are dropped after the submission's fence wait.

use ash::vk;

use crate::error::{Result, VkContext};
use crate::stats::Stats;

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
