//! Simulation of a recorded memory table on the real device (Cargo feature
//! `simulate`). Each simulated memory type is backed by a compatible real type;
//! the allocator enforces the simulated heap sizes, and simulated non-coherent
//! types model the CPU cache: the host sees a shadow copy that only an invalidate
//! refreshes and whose writes reach the device only through a flush. Without the
//! feature the types here are uninhabited, so every simulation path compiles away.

#[cfg(not(feature = "simulate"))]
use {crate::memory::table::MemoryTable, std::ptr::NonNull};

#[cfg(feature = "simulate")]
mod on {
    use std::ptr::NonNull;

    use crate::memory::table::MemoryTable;

    /// How a simulated table maps onto the real device.
    pub(crate) struct Simulation {
        /// The real memory type behind each simulated one.
        backing: Vec<u32>,
    }

    impl Simulation {
        /// The table to select from, and the simulation when there is one.
        pub(crate) fn start(
            real: &MemoryTable,
            simulated: Option<MemoryTable>,
        ) -> (MemoryTable, Option<Simulation>) {
            match simulated {
                Some(sim) => {
                    let backing = backing_types(real, &sim);
                    (sim, Some(Simulation { backing }))
                }
                None => (real.clone(), None),
            }
        }

        /// The real type behind simulated type `ty`.
        pub(crate) fn real_type(&self, ty: u32) -> u32 {
            self.backing[ty as usize]
        }

        /// The simulated table's buffer type bits, less the types whose real backing
        /// a buffer cannot use.
        pub(crate) fn type_bits(&self, table: &MemoryTable, real_bits: u32) -> u32 {
            let mut bits = table.buffer_memory_type_bits;
            for (i, real) in self.backing.iter().enumerate() {
                if real_bits & (1 << real) == 0 {
                    bits &= !(1 << i);
                }
            }
            bits
        }
    }

    /// The real type that stands in for each simulated one.
    pub(crate) fn backing_types(real: &MemoryTable, simulated: &MemoryTable) -> Vec<u32> {
        crate::memory::table::backing_types(&real.types, simulated)
    }

    /// The host's view of a simulated non-coherent region: `cache` is what the CPU
    /// sees, `real` the mapping of the memory the device uses; both address the
    /// region's first byte.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Shadow {
        real: NonNull<u8>,
        cache: NonNull<u8>,
    }

    impl Shadow {
        /// The shadow of a region: `at` moves a block address to the region's.
        pub(crate) fn at(
            real: NonNull<u8>,
            cache: *mut [u8],
            at: impl Fn(NonNull<u8>) -> NonNull<u8>,
        ) -> Shadow {
            Shadow {
                real: at(real),
                cache: at(NonNull::new(cache.cast::<u8>()).expect("boxed slice")),
            }
        }

        /// Copies `len` bytes at `from_region` (bytes from the region's start) from
        /// the cache to the memory (`flush`) or back (invalidate).
        ///
        /// # Safety
        /// The range lies inside the block, and no one else writes it meanwhile.
        pub(crate) unsafe fn sync(self, from_region: isize, len: usize, flush: bool) {
            // SAFETY: the caller guarantees the range; both buffers span the block.
            unsafe {
                let real = self.real.as_ptr().offset(from_region);
                let cache = self.cache.as_ptr().offset(from_region);
                if flush {
                    std::ptr::copy_nonoverlapping(cache, real, len);
                } else {
                    std::ptr::copy_nonoverlapping(real, cache, len);
                }
            }
        }
    }

    /// A CPU-cache shadow of a block mapped at `real`, starting as what memory holds.
    pub(crate) fn shadow_block(real: NonNull<u8>, size: u64) -> (NonNull<u8>, *mut [u8]) {
        let mut cache = vec![0u8; size as usize].into_boxed_slice();
        // SAFETY: `real` maps `size` bytes; the cache is a fresh allocation of as many.
        unsafe { std::ptr::copy_nonoverlapping(real.as_ptr(), cache.as_mut_ptr(), size as usize) };
        let raw = Box::into_raw(cache);
        (NonNull::new(raw.cast::<u8>()).expect("boxed slice"), raw)
    }

    /// Frees a shadow made by [`shadow_block`].
    ///
    /// # Safety
    /// `raw` came from `shadow_block` and is not used again.
    pub(crate) unsafe fn free_shadow(raw: *mut [u8]) {
        // SAFETY: made by Box::into_raw in shadow_block.
        drop(unsafe { Box::from_raw(raw) });
    }
}

#[cfg(feature = "simulate")]
pub(crate) use on::*;

/// No simulation without the `simulate` feature.
#[cfg(not(feature = "simulate"))]
pub(crate) enum Simulation {}

/// No shadow without the `simulate` feature.
#[cfg(not(feature = "simulate"))]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shadow {}

#[cfg(not(feature = "simulate"))]
impl Simulation {
    pub(crate) fn start(
        real: &MemoryTable,
        simulated: Option<MemoryTable>,
    ) -> (MemoryTable, Option<Simulation>) {
        let _ = simulated;
        (real.clone(), None)
    }

    pub(crate) fn real_type(&self, _ty: u32) -> u32 {
        match *self {}
    }

    pub(crate) fn type_bits(&self, _table: &MemoryTable, _real_bits: u32) -> u32 {
        match *self {}
    }
}

#[cfg(not(feature = "simulate"))]
impl Shadow {
    pub(crate) fn at(
        _real: NonNull<u8>,
        _cache: *mut [u8],
        _at: impl Fn(NonNull<u8>) -> NonNull<u8>,
    ) -> Shadow {
        unreachable!("no block has a shadow without the simulate feature")
    }

    pub(crate) unsafe fn sync(self, _from_region: isize, _len: usize, _flush: bool) {
        match self {}
    }
}

#[cfg(not(feature = "simulate"))]
pub(crate) fn shadow_block(_real: NonNull<u8>, _size: u64) -> (NonNull<u8>, *mut [u8]) {
    unreachable!("no simulation without the simulate feature")
}

#[cfg(not(feature = "simulate"))]
pub(crate) unsafe fn free_shadow(_raw: *mut [u8]) {
    unreachable!("no block has a shadow without the simulate feature")
}

#[cfg(all(test, feature = "simulate"))]
#[path = "simulate_tests.rs"]
mod tests;
