//! The blocks of one memory type, after Halide's `BlockAllocator`
//! (`src/runtime/internal/block_allocator.h`).
//!
//! Pure bookkeeping: [`BlockPool::place`] says where a request goes (a region of an
//! existing block, or the size of a block to allocate), the caller does the Vulkan
//! calls (`vkAllocateMemory`, `vkCreateBuffer`, `vkBindBufferMemory`) and reports
//! back with [`BlockPool::add_block`] and [`BlockPool::set_payload`].
//!
//! Differences from Halide, on purpose:
//! * A request above `maximum_block_size` gets a dedicated block of its own size;
//!   Halide clamps the block to the maximum, and the reservation then fails.
//! * `maximum_pool_size` refuses a block that would exceed it; Halide checks before
//!   adding, so the pool could overshoot by one block.
//! * Blocks on heaps of at most 1 GiB are at most 1/8 of the heap, as VMA does.
//! * Dedicated blocks hold one region and are never offered to other requests.

// Parts of this API are exercised by its tests only.
#![cfg_attr(not(test), allow(dead_code))]
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;

use crate::memory::config::AllocConfig;
use crate::memory::region::{round_up, RegionAllocator, RegionError, RegionId, Reservation};

/// Heaps up to this many bytes are "small": blocks are at most 1/8 of them
/// (VMA's `VMA_SMALL_HEAP_MAX_SIZE`).
pub(crate) const SMALL_HEAP_MAX_SIZE: u64 = 1024 * 1024 * 1024;

/// Handle of a block. Never reused within a pool, so a handle to a freed block stays
/// an error rather than reaching a new block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BlockId(u64);

impl fmt::Display for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block #{}", self.0)
    }
}

/// One block: one `VkDeviceMemory` and the regions carved from it.
#[derive(Debug)]
pub(crate) struct Block<B, T> {
    /// The device memory (`VkDeviceMemory`).
    pub payload: B,
    /// Bytes.
    pub size: u64,
    /// Holds one request only (too large for a block, or the driver prefers a
    /// dedicated allocation); never used for other requests.
    pub dedicated: bool,
    /// Sub-allocation of the block.
    pub regions: RegionAllocator<T>,
}

/// Where a request goes, from [`BlockPool::place`].
#[derive(Debug)]
pub(crate) enum Placement<T> {
    /// Reserved in an existing block.
    Existing {
        /// The block it went into.
        block: BlockId,
        /// The region; create and `set_payload` a buffer unless `cached` holds one.
        reservation: Reservation<T>,
    },
    /// No block has room: allocate `size` bytes and pass them to
    /// [`BlockPool::add_block`]. `dedicated`: for this request alone (the size is then
    /// exactly the request's, as `VkMemoryDedicatedAllocateInfo` requires).
    NeedBlock {
        /// Bytes.
        size: u64,
        /// Pass to `add_block`; allocate with `VkMemoryDedicatedAllocateInfo` when the
        /// driver asked for it.
        dedicated: bool,
    },
}

/// Why the pool refused a request or an operation.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PoolError {
    /// A new block would take the pool past `maximum_pool_size`.
    #[error(
        "maximum pool size reached: a new block of {block_size} B would take the pool \
         from {pool_size} B past the limit of {limit} B"
    )]
    PoolSizeLimit {
        /// Bytes.
        limit: u64,
        /// Bytes of the blocks now.
        pool_size: u64,
        /// Bytes of the block needed.
        block_size: u64,
    },
    /// The pool already has `maximum_block_count` blocks.
    #[error("maximum block count reached: the pool has {blocks} blocks, the limit is {limit}")]
    BlockCountLimit {
        /// Blocks allowed.
        limit: u32,
        /// Blocks now.
        blocks: usize,
    },
    /// The block needed is larger than the memory heap.
    #[error("a block of {block_size} B does not fit in the heap of {heap_size} B")]
    LargerThanHeap {
        /// Bytes.
        block_size: u64,
        /// Bytes.
        heap_size: u64,
    },
    /// The request overflows 64 bits when rounded up.
    #[error(
        "a request of {size} B overflows when rounded up to a multiple of {nearest_multiple} B"
    )]
    SizeOverflow {
        /// Bytes.
        size: u64,
        /// Bytes.
        nearest_multiple: u64,
    },
    /// The block handle is not (or no longer) in this pool.
    #[error("{0} is unknown: freed by collect or drain, or not from this pool")]
    UnknownBlock(BlockId),
    /// A region operation failed.
    #[error("{block}: {source}")]
    Region {
        /// The block of the region.
        block: BlockId,
        /// What the region allocator said.
        source: RegionError,
    },
    /// `add_block` was given a block too small for the request; the block is kept
    /// (empty) and freed by the next `collect`.
    #[error(
        "{block} of {block_size} B cannot hold {size} B at alignment {alignment} B; \
         it stays in the pool until collect"
    )]
    BlockTooSmall {
        /// The block, now in the pool.
        block: BlockId,
        /// Bytes.
        block_size: u64,
        /// Bytes.
        size: u64,
        /// Bytes.
        alignment: u64,
    },
}

/// The blocks of one memory type. `B` is the block payload (`VkDeviceMemory`), `T` the
/// region payload (`VkBuffer`).
#[derive(Debug)]
pub(crate) struct BlockPool<B, T> {
    config: AllocConfig,
    heap_size: u64,
    /// By id, so oldest first.
    blocks: BTreeMap<BlockId, Block<B, T>>,
    next_id: u64,
}

impl<B, T> BlockPool<B, T> {
    /// An empty pool with `config`'s limits, for a memory type on a heap of
    /// `heap_size` bytes (0 = unknown: no heap cap).
    pub(crate) fn new(config: AllocConfig, heap_size: u64) -> Self {
        BlockPool {
            config,
            heap_size,
            blocks: BTreeMap::new(),
            next_id: 0,
        }
    }

    /// Bytes of a new shared block for a small request: `minimum_block_size`, capped
    /// by a non-zero `maximum_block_size` and, on heaps of at most 1 GiB, by 1/8 of
    /// the heap (as VMA). Larger requests get a block of their own rounded size.
    pub(crate) fn preferred_block_size(&self) -> u64 {
        let mut size = self.config.minimum_block_size;
        if self.config.maximum_block_size != 0 {
            size = size.min(self.config.maximum_block_size);
        }
        if self.heap_size != 0 && self.heap_size <= SMALL_HEAP_MAX_SIZE {
            size = size.min(self.heap_size / 8);
        }
        size
    }

    /// Where `size` bytes at `alignment` bytes go (sizes rounded up to
    /// `nearest_multiple`; alignment as in [`RegionAllocator::reserve`]).
    ///
    /// Non-dedicated requests try the shared blocks newest first, as Halide: older
    /// blocks are the ones that filled up. Otherwise it returns the size of the block
    /// to allocate: dedicated (exactly `size` bytes) when the rounded request is
    /// larger than `maximum_block_size` or `prefer_dedicated` (the driver prefers a
    /// dedicated allocation), else the larger of the rounded request and
    /// [`preferred_block_size`](Self::preferred_block_size).
    ///
    /// Fails when that block would break `maximum_pool_size`, `maximum_block_count`
    /// or the heap size; the caller may [`collect`](Self::collect) and try again.
    pub(crate) fn place(
        &mut self,
        size: u64,
        alignment: u64,
        prefer_dedicated: bool,
    ) -> Result<Placement<T>, PoolError>
    where
        T: Clone,
    {
        let nearest_multiple = self.config.nearest_multiple;
        let want = round_up(size.max(1), nearest_multiple).ok_or(PoolError::SizeOverflow {
            size,
            nearest_multiple,
        })?;
        let max = self.config.maximum_block_size;
        let dedicated = prefer_dedicated || (max != 0 && want > max);
        if !dedicated {
            for (&block, b) in self.blocks.iter_mut().rev() {
                if b.dedicated {
                    continue;
                }
                if let Some(reservation) = b.regions.reserve(size, alignment) {
                    return Ok(Placement::Existing { block, reservation });
                }
            }
        }
        let block_size = if dedicated {
            size.max(1)
        } else {
            want.max(self.preferred_block_size())
        };
        self.check_new_block(block_size)?;
        Ok(Placement::NeedBlock {
            size: block_size,
            dedicated,
        })
    }

    fn check_new_block(&self, block_size: u64) -> Result<(), PoolError> {
        if self.heap_size != 0 && block_size > self.heap_size {
            return Err(PoolError::LargerThanHeap {
                block_size,
                heap_size: self.heap_size,
            });
        }
        let limit = self.config.maximum_block_count;
        if limit != 0 && self.blocks.len() >= limit as usize {
            return Err(PoolError::BlockCountLimit {
                limit,
                blocks: self.blocks.len(),
            });
        }
        let limit = self.config.maximum_pool_size;
        let pool_size = self.pool_size();
        if limit != 0 && pool_size.saturating_add(block_size) > limit {
            return Err(PoolError::PoolSizeLimit {
                limit,
                pool_size,
                block_size,
            });
        }
        Ok(())
    }

    /// Adds a block of `size` bytes the caller allocated after
    /// [`Placement::NeedBlock`] (limits are checked by `place`, not here), and reserves
    /// `size_wanted` bytes at `alignment` in it (at offset 0).
    ///
    /// If the block cannot hold the request it is still added, so that `collect` or
    /// `drain` hands it back, and [`PoolError::BlockTooSmall`] is returned.
    pub(crate) fn add_block(
        &mut self,
        payload: B,
        size: u64,
        dedicated: bool,
        size_wanted: u64,
        alignment: u64,
    ) -> Result<(BlockId, Reservation<T>), PoolError>
    where
        T: Clone,
    {
        let block = BlockId(self.next_id);
        self.next_id += 1;
        // A dedicated block is exactly the request; rounding would not fit it.
        let granularity = if dedicated {
            0
        } else {
            self.config.nearest_multiple
        };
        let mut regions = RegionAllocator::with_granularity(size, granularity);
        let reservation = regions.reserve(size_wanted, alignment);
        self.blocks.insert(
            block,
            Block {
                payload,
                size,
                dedicated,
                regions,
            },
        );
        match reservation {
            Some(r) => Ok((block, r)),
            None => Err(PoolError::BlockTooSmall {
                block,
                block_size: size,
                size: size_wanted,
                alignment,
            }),
        }
    }

    /// The block, if it is in the pool.
    pub(crate) fn block(&self, id: BlockId) -> Option<&Block<B, T>> {
        self.blocks.get(&id)
    }

    /// The blocks, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (BlockId, &Block<B, T>)> + '_ {
        self.blocks.iter().map(|(&id, b)| (id, b))
    }

    fn regions_mut(&mut self, block: BlockId) -> Result<&mut RegionAllocator<T>, PoolError> {
        self.blocks
            .get_mut(&block)
            .map(|b| &mut b.regions)
            .ok_or(PoolError::UnknownBlock(block))
    }

    /// The payload of a reserved region, if one is attached.
    pub(crate) fn payload(
        &self,
        block: BlockId,
        region: RegionId,
    ) -> Result<Option<&T>, PoolError> {
        let b = self
            .blocks
            .get(&block)
            .ok_or(PoolError::UnknownBlock(block))?;
        b.regions
            .payload(region)
            .map_err(|source| PoolError::Region { block, source })
    }

    /// [`RegionAllocator::set_payload`] in `block`.
    pub(crate) fn set_payload(
        &mut self,
        block: BlockId,
        region: RegionId,
        payload: T,
    ) -> Result<(), PoolError> {
        self.regions_mut(block)?
            .set_payload(region, payload)
            .map_err(|source| PoolError::Region { block, source })
    }

    /// [`RegionAllocator::retain`] in `block`: the new use count.
    pub(crate) fn retain(&mut self, block: BlockId, region: RegionId) -> Result<u32, PoolError> {
        self.regions_mut(block)?
            .retain(region)
            .map_err(|source| PoolError::Region { block, source })
    }

    /// [`RegionAllocator::release`] in `block`: the new use count. The block stays
    /// until [`collect`](Self::collect) or [`remove_if_empty`](Self::remove_if_empty).
    pub(crate) fn release(&mut self, block: BlockId, region: RegionId) -> Result<u32, PoolError> {
        self.regions_mut(block)?
            .release(region)
            .map_err(|source| PoolError::Region { block, source })
    }

    /// [`RegionAllocator::reclaim`] in `block`: the new use count and, at zero, the
    /// payload to destroy.
    pub(crate) fn reclaim(
        &mut self,
        block: BlockId,
        region: RegionId,
    ) -> Result<(u32, Option<T>), PoolError> {
        self.regions_mut(block)?
            .reclaim(region)
            .map_err(|source| PoolError::Region { block, source })
    }

    /// Merges free regions in every block and removes the blocks with nothing
    /// reserved. Returns (payloads of the removed blocks, region payloads to destroy);
    /// destroy the region payloads (buffers) before freeing the blocks (memory).
    pub(crate) fn collect(&mut self) -> (Vec<B>, Vec<T>) {
        let mut freed = Vec::new();
        let mut payloads = Vec::new();
        let ids: Vec<BlockId> = self.blocks.keys().copied().collect();
        for id in ids {
            let Some(b) = self.blocks.get_mut(&id) else {
                continue;
            };
            payloads.extend(b.regions.collect());
            if b.regions.is_empty() {
                if let Some(mut b) = self.blocks.remove(&id) {
                    payloads.extend(b.regions.drain());
                    freed.push(b.payload);
                }
            }
        }
        (freed, payloads)
    }

    /// Removes `block` if nothing in it is reserved. Returns (its payload, region
    /// payloads to destroy first), or None when it is unknown or still in use.
    pub(crate) fn remove_if_empty(&mut self, block: BlockId) -> Option<(B, Vec<T>)> {
        if !self.blocks.get(&block)?.regions.is_empty() {
            return None;
        }
        let mut b = self.blocks.remove(&block)?;
        Some((b.payload, b.regions.drain()))
    }

    /// Removes every block, reserved or not, for teardown. Returns (block payloads,
    /// region payloads); destroy the region payloads first.
    pub(crate) fn drain(&mut self) -> (Vec<B>, Vec<T>) {
        let mut freed = Vec::new();
        let mut payloads = Vec::new();
        for (_, mut b) in std::mem::take(&mut self.blocks) {
            payloads.extend(b.regions.drain());
            freed.push(b.payload);
        }
        (freed, payloads)
    }

    /// Blocks in the pool.
    pub(crate) fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Bytes of all blocks.
    pub(crate) fn pool_size(&self) -> u64 {
        self.blocks.values().map(|b| b.size).sum()
    }

    /// Bytes reserved in all blocks.
    pub(crate) fn reserved(&self) -> u64 {
        self.blocks.values().map(|b| b.regions.reserved()).sum()
    }
}

#[cfg(test)]
mod tests;
