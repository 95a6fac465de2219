//! The staging chunks a context keeps: a few host-visible regions per direction,
//! allocated on first use and reused by every copy through staging.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::Result;
use crate::memory::policy::Role;
use crate::vk::allocator::Allocator;
use crate::vk::region::Region;

/// The staging chunks of one context, per direction.
#[derive(Default)]
pub(crate) struct Staging {
    upload: Mutex<Vec<Arc<Region>>>,
    readback: Mutex<Vec<Arc<Region>>>,
}

impl Staging {
    /// The chunks of `role` (upload or readback), at least `n` of at least `size`
    /// bytes, allocated from `allocator` where missing (smaller ones are freed);
    /// locked until the guard drops.
    pub(crate) fn ring(
        &self,
        allocator: &Arc<Allocator>,
        role: Role,
        n: usize,
        size: u64,
    ) -> Result<MutexGuard<'_, Vec<Arc<Region>>>> {
        let ring = match role {
            Role::Upload => &self.upload,
            _ => &self.readback,
        };
        let mut slots = ring.lock().unwrap_or_else(|p| p.into_inner());
        // Chunks too small for this copy's windows give way to larger ones.
        slots.retain(|s| s.size() >= size);
        while slots.len() < n {
            slots.push(Arc::new(Region::allocate_staging(allocator, role, size)?));
        }
        Ok(slots)
    }

    /// Gives the chunks back to the allocator; later copies allocate them again.
    pub(crate) fn release(&self) {
        for ring in [&self.upload, &self.readback] {
            ring.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }
}
