//! Whether a new block may be allocated: the limits of the heap it comes from,
//! apart from the Vulkan queries that give them (`vk::allocator`).

#![forbid(unsafe_code)]

/// Bytes allocated from a heap and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeapUse {
    /// Bytes allocated (or taken, as by `fill_heap`).
    pub used: u64,
    /// Bytes of the heap.
    pub size: u64,
}

impl HeapUse {
    fn fits(self, bytes: u64) -> bool {
        self.used.saturating_add(bytes) <= self.size
    }
}

/// The limits a new block must respect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The simulated heap, under simulation.
    pub simulated: Option<HeapUse>,
    /// The real heap behind the memory type (its `size` is the heap's).
    pub real: HeapUse,
    /// `maxMemoryAllocationSize`; 0 = not known.
    pub max_allocation: u64,
    /// `VK_EXT_memory_budget`'s usage and budget of the real heap (`size` is the
    /// budget; 0 = none given).
    pub budget: Option<HeapUse>,
}

/// Why a block may not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoRoom {
    /// Past the simulated heap.
    Simulated,
    /// Past the real heap behind a simulated one.
    Real(HeapUse),
    /// Larger than `maxMemoryAllocationSize`.
    TooLarge { max: u64 },
    /// Past the driver's budget.
    Budget(HeapUse),
}

impl Limits {
    /// None when a block of `bytes` may be allocated. The real heap's size bounds
    /// simulated tables only: on a real device the driver says when it is full.
    pub(crate) fn refuse(&self, bytes: u64) -> Option<NoRoom> {
        if let Some(sim) = self.simulated {
            if !sim.fits(bytes) {
                return Some(NoRoom::Simulated);
            }
            if !self.real.fits(bytes) {
                return Some(NoRoom::Real(self.real));
            }
        }
        if self.max_allocation != 0 && bytes > self.max_allocation {
            return Some(NoRoom::TooLarge {
                max: self.max_allocation,
            });
        }
        match self.budget {
            Some(b) if b.size != 0 && !b.fits(bytes) => Some(NoRoom::Budget(b)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
