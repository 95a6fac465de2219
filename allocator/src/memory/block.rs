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
    /// until [`collect`](Self::collect), even when dedicated (Halide's semantics).
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
mod tests {
    use super::*;
    use crate::memory::config::MIB;

    const GIB: u64 = 1024 * MIB;

    type Pool = BlockPool<u32, u32>;

    fn need(p: Result<Placement<u32>, PoolError>) -> (u64, bool) {
        match p {
            Ok(Placement::NeedBlock { size, dedicated }) => (size, dedicated),
            other => panic!("expected NeedBlock, got {other:?}"),
        }
    }

    fn existing(p: Result<Placement<u32>, PoolError>) -> (BlockId, Reservation<u32>) {
        match p {
            Ok(Placement::Existing { block, reservation }) => (block, reservation),
            other => panic!("expected Existing, got {other:?}"),
        }
    }

    #[test]
    fn first_request_needs_a_preferred_size_block() {
        let mut pool = Pool::new(AllocConfig::default(), 16 * GIB);
        assert_eq!(pool.preferred_block_size(), 32 * MIB);
        assert_eq!(need(pool.place(1000, 256, false)), (32 * MIB, false));
        let (b, r) = pool.add_block(1, 32 * MIB, false, 1000, 256).unwrap();
        // Rounded to the 32 B nearest multiple.
        assert_eq!((r.offset, r.size), (0, 1024));
        assert_eq!(
            (pool.blocks(), pool.pool_size(), pool.reserved()),
            (1, 32 * MIB, 1024)
        );
        let (b2, r2) = existing(pool.place(100, 4096, false));
        assert_eq!((b2, r2.offset, r2.size), (b, 4096, 128));
        // Between the preferred and the maximum block size: a block of the rounded request.
        assert_eq!(
            need(pool.place(100 * MIB + 1, 1, false)),
            (100 * MIB + 32, false)
        );
        assert_eq!(need(pool.place(256 * MIB, 1, false)), (256 * MIB, false));
    }

    #[test]
    fn dedicated_above_the_maximum_block_size() {
        let mut pool = Pool::new(AllocConfig::default(), 16 * GIB);
        // Exactly the request, not rounded: VkMemoryDedicatedAllocateInfo needs the
        // allocation size to equal the buffer's requirement.
        assert_eq!(
            need(pool.place(256 * MIB + 1, 256, false)),
            (256 * MIB + 1, true)
        );
        let (d, r) = pool
            .add_block(7, 256 * MIB + 1, true, 256 * MIB + 1, 256)
            .unwrap();
        assert_eq!((r.offset, r.size), (0, 256 * MIB + 1));
        assert!(pool.block(d).unwrap().dedicated);
        // Small requests never go into a dedicated block.
        pool.release(d, r.id).unwrap();
        assert_eq!(need(pool.place(1, 1, false)), (32 * MIB, false));
        // Released, but kept until collect.
        assert_eq!(pool.blocks(), 1);
        assert_eq!(pool.collect(), (vec![7], vec![]));
        assert_eq!((pool.blocks(), pool.pool_size()), (0, 0));
    }

    #[test]
    fn shared_blocks_never_exceed_the_maximum() {
        // A maximum that is not a multiple of the nearest multiple: 999 B rounds to 1024 B.
        let config = AllocConfig::builder()
            .with_minimum_block_size(0)
            .with_maximum_block_size(1000)
            .build()
            .unwrap();
        let mut pool = Pool::new(config, 0);
        assert_eq!(need(pool.place(990, 1, false)), (992, false));
        assert_eq!(need(pool.place(999, 1, false)), (999, true));
        let (_, r) = pool.add_block(1, 999, true, 999, 1).unwrap();
        assert_eq!(r.size, 999);
    }

    #[test]
    fn dedicated_when_the_driver_prefers_it() {
        let mut pool = Pool::new(AllocConfig::default(), 16 * GIB);
        let (_, r) = pool.add_block(1, 32 * MIB, false, 64, 1).unwrap();
        assert_eq!(r.offset, 0);
        // Room in the shared block, but the driver prefers a dedicated allocation.
        assert_eq!(need(pool.place(1000, 64, true)), (1000, true));
        let (d, r) = pool.add_block(2, 1000, true, 1000, 64).unwrap();
        assert_eq!((r.offset, r.size), (0, 1000));
        assert_eq!(pool.block(d).unwrap().regions.granularity(), 0);
        assert_eq!(pool.pool_size(), 32 * MIB + 1000);
    }

    #[test]
    fn small_heaps_get_an_eighth_of_the_heap() {
        let big_min = AllocConfig::builder()
            .with_minimum_block_size(256 * MIB)
            .build()
            .unwrap();
        let mut pool = Pool::new(big_min, 512 * MIB);
        assert_eq!(pool.preferred_block_size(), 64 * MIB);
        assert_eq!(need(pool.place(1024, 1, false)), (64 * MIB, false));
        // Never below the request.
        assert_eq!(need(pool.place(100 * MIB, 1, false)), (100 * MIB, false));
        // 1 GiB is still small; above it, no cap.
        assert_eq!(Pool::new(big_min, GIB).preferred_block_size(), 128 * MIB);
        assert_eq!(
            Pool::new(big_min, 2 * GIB).preferred_block_size(),
            256 * MIB
        );
        assert_eq!(Pool::new(big_min, 0).preferred_block_size(), 256 * MIB);
        // The default 32 MiB is under 1/8 of 512 MiB.
        assert_eq!(
            Pool::new(AllocConfig::default(), 512 * MIB).preferred_block_size(),
            32 * MIB
        );
        // A block larger than the heap is refused.
        assert_eq!(
            Pool::new(AllocConfig::default(), 512 * MIB)
                .place(600 * MIB, 1, false)
                .unwrap_err(),
            PoolError::LargerThanHeap {
                block_size: 600 * MIB,
                heap_size: 512 * MIB
            }
        );
    }

    #[test]
    fn newest_block_first() {
        let config = AllocConfig::builder()
            .with_minimum_block_size(MIB)
            .build()
            .unwrap();
        let mut pool = Pool::new(config, 16 * GIB);
        assert_eq!(need(pool.place(MIB, 1, false)), (MIB, false));
        let (a, ra) = pool.add_block(1, MIB, false, MIB, 1).unwrap();
        assert_eq!(need(pool.place(MIB / 2, 1, false)), (MIB, false));
        let (b, _) = pool.add_block(2, MIB, false, MIB / 2, 1).unwrap();
        pool.release(a, ra.id).unwrap();
        // Block a is empty, but the newest block with room is b.
        let (got, r) = existing(pool.place(MIB / 4, 1, false));
        assert_eq!((got, r.offset), (b, MIB / 2));
        // Once b is full, a.
        let (got, r) = existing(pool.place(MIB / 2, 1, false));
        assert_eq!((got, r.offset), (a, 0));
    }

    #[test]
    fn pool_size_limit_is_never_exceeded() {
        let config = AllocConfig::builder()
            .with_maximum_pool_size(48 * MIB)
            .build()
            .unwrap();
        let mut pool = Pool::new(config, 16 * GIB);
        assert_eq!(need(pool.place(32 * MIB, 1, false)), (32 * MIB, false));
        pool.add_block(1, 32 * MIB, false, 32 * MIB, 1).unwrap();
        // Halide would add a second 32 MiB block (64 MiB > 48 MiB).
        let e = pool.place(1, 1, false).unwrap_err();
        assert_eq!(
            e,
            PoolError::PoolSizeLimit {
                limit: 48 * MIB,
                pool_size: 32 * MIB,
                block_size: 32 * MIB
            }
        );
        assert_eq!(
            e.to_string(),
            "maximum pool size reached: a new block of 33554432 B would take the pool \
             from 33554432 B past the limit of 50331648 B"
        );
        // A block that fits under the limit is fine.
        assert_eq!(need(pool.place(16 * MIB, 1, true)), (16 * MIB, true));
        assert!(pool.place(16 * MIB + 1, 1, true).is_err());
    }

    #[test]
    fn block_count_limit() {
        let config = AllocConfig::builder()
            .with_minimum_block_size(MIB)
            .with_maximum_block_count(2)
            .build()
            .unwrap();
        let mut pool = Pool::new(config, 16 * GIB);
        let (a, ra) = pool.add_block(1, MIB, false, MIB, 1).unwrap();
        pool.add_block(2, MIB, false, MIB, 1).unwrap();
        let e = pool.place(1, 1, false).unwrap_err();
        assert_eq!(
            e,
            PoolError::BlockCountLimit {
                limit: 2,
                blocks: 2
            }
        );
        assert_eq!(
            e.to_string(),
            "maximum block count reached: the pool has 2 blocks, the limit is 2"
        );
        // Collect frees the empty block; then there is room for a new one.
        pool.release(a, ra.id).unwrap();
        assert_eq!(pool.collect(), (vec![1], vec![]));
        assert_eq!(need(pool.place(1, 1, false)), (MIB, false));
    }

    #[test]
    fn collect_frees_empty_blocks_and_their_payloads() {
        let mut pool = Pool::new(AllocConfig::default(), 16 * GIB);
        let (a, r1) = pool.add_block(10, 32 * MIB, false, 1024, 1).unwrap();
        pool.set_payload(a, r1.id, 100).unwrap();
        let (_, r2) = existing(pool.place(1024, 1, false));
        pool.set_payload(a, r2.id, 101).unwrap();
        assert_eq!(pool.payload(a, r2.id), Ok(Some(&101)));
        pool.release(a, r1.id).unwrap();
        // r2 still reserved: the block stays; r1 keeps its buffer (no free neighbour).
        assert_eq!(pool.collect(), (vec![], vec![]));
        assert_eq!(pool.reclaim(a, r2.id), Ok((0, Some(101))));
        let (freed, payloads) = pool.collect();
        assert_eq!((freed, payloads), (vec![10], vec![100]));
        assert_eq!(
            (pool.blocks(), pool.pool_size(), pool.reserved()),
            (0, 0, 0)
        );
        // The block's handle is stale now.
        assert_eq!(pool.release(a, r2.id), Err(PoolError::UnknownBlock(a)));
        let e = pool.retain(a, r1.id).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{a} is unknown: freed by collect or drain, or not from this pool")
        );
    }

    #[test]
    fn region_errors_name_the_block() {
        let mut pool = Pool::new(AllocConfig::default(), 16 * GIB);
        let (a, r) = pool.add_block(1, 32 * MIB, false, 64, 1).unwrap();
        assert_eq!(pool.release(a, r.id), Ok(0));
        let e = pool.release(a, r.id).unwrap_err();
        assert_eq!(
            e,
            PoolError::Region {
                block: a,
                source: RegionError::NotInUse {
                    id: r.id,
                    offset: 0,
                    size: 64
                }
            }
        );
        assert!(e.to_string().starts_with("block #0: region #"));
    }

    #[test]
    fn add_block_too_small_keeps_the_block() {
        let mut pool = Pool::new(AllocConfig::default(), 16 * GIB);
        let e = pool.add_block(5, 1000, false, 1000, 1).unwrap_err();
        // 1000 rounds up to 1024 in a shared block.
        assert!(matches!(
            e,
            PoolError::BlockTooSmall {
                block_size: 1000,
                size: 1000,
                ..
            }
        ));
        assert_eq!(pool.blocks(), 1);
        assert_eq!(pool.collect(), (vec![5], vec![]));
    }

    #[test]
    fn drain_returns_everything() {
        let mut pool = Pool::new(AllocConfig::default(), 16 * GIB);
        let (a, r) = pool.add_block(1, 32 * MIB, false, 64, 1).unwrap();
        pool.set_payload(a, r.id, 11).unwrap();
        let (d, rd) = pool.add_block(2, 300 * MIB, true, 300 * MIB, 1).unwrap();
        pool.set_payload(d, rd.id, 12).unwrap();
        let (mut blocks, mut regions) = pool.drain();
        blocks.sort();
        regions.sort();
        assert_eq!((blocks, regions), (vec![1, 2], vec![11, 12]));
        assert_eq!((pool.blocks(), pool.pool_size()), (0, 0));
        // Ids are not reused.
        let (b, _) = pool.add_block(3, 32 * MIB, false, 64, 1).unwrap();
        assert_ne!(b, a);
        assert_ne!(b, d);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashSet;

        const MAX_POOL: u64 = 24 * MIB;
        const MAX_BLOCKS: u32 = 12;

        #[derive(Clone, Debug)]
        enum Op {
            Place {
                size: u64,
                align: u64,
                dedicated: bool,
            },
            Retain(usize),
            Release(usize),
            Reclaim(usize),
            Collect,
            ReleaseDead(usize),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                5 => (1u64..=6 * MIB, 0u32..=12, prop::bool::weighted(0.1))
                    .prop_map(|(size, p, dedicated)| Op::Place { size, align: 1 << p, dedicated }),
                1 => any::<usize>().prop_map(Op::Retain),
                3 => any::<usize>().prop_map(Op::Release),
                2 => any::<usize>().prop_map(Op::Reclaim),
                1 => Just(Op::Collect),
                1 => any::<usize>().prop_map(Op::ReleaseDead),
            ]
        }

        struct Live {
            block: BlockId,
            id: RegionId,
            offset: u64,
            size: u64,
            count: u32,
        }

        fn check(pool: &BlockPool<u64, u64>, live: &[Live], config: &AllocConfig) {
            let mut total = 0;
            for (id, b) in pool.iter() {
                total += b.size;
                let mut at = 0;
                for r in b.regions.regions() {
                    assert_eq!(r.offset, at, "{id}: gap or overlap");
                    at += r.size;
                }
                assert_eq!(at, b.size);
                if b.dedicated {
                    assert!(b.regions.regions().count() <= 1);
                } else {
                    assert!(b.size <= config.maximum_block_size);
                }
                let mut used: Vec<(u64, u64, u32)> = b
                    .regions
                    .regions()
                    .filter(|r| r.in_use)
                    .map(|r| (r.offset, r.size, r.use_count))
                    .collect();
                let mut want: Vec<(u64, u64, u32)> = live
                    .iter()
                    .filter(|l| l.block == id)
                    .map(|l| (l.offset, l.size, l.count))
                    .collect();
                used.sort();
                want.sort();
                assert_eq!(used, want);
            }
            assert_eq!(pool.pool_size(), total);
            assert!(total <= MAX_POOL);
            assert!(pool.blocks() <= MAX_BLOCKS as usize);
            assert_eq!(pool.reserved(), live.iter().map(|l| l.size).sum::<u64>());
        }

        fn run(ops: Vec<Op>, nearest_multiple: u64) {
            let config = AllocConfig::builder()
                .with_minimum_block_size(MIB)
                .with_maximum_block_size(4 * MIB)
                .with_maximum_pool_size(MAX_POOL)
                .with_maximum_block_count(MAX_BLOCKS)
                .with_nearest_multiple(nearest_multiple)
                .build()
                .unwrap();
            let mut pool = BlockPool::<u64, u64>::new(config, 64 * MIB);
            let mut live: Vec<Live> = Vec::new();
            let mut dead: Vec<(BlockId, RegionId)> = Vec::new();
            let mut blocks_alive: HashSet<u64> = HashSet::new();
            let mut buffers_alive: HashSet<u64> = HashSet::new();
            let mut next = 0u64;
            let free_blocks = |alive: &mut HashSet<u64>, freed: Vec<u64>| {
                for b in freed {
                    assert!(alive.remove(&b), "block {b} freed twice");
                }
            };
            let free_buffers = |alive: &mut HashSet<u64>, freed: Vec<u64>| {
                for t in freed {
                    assert!(alive.remove(&t), "buffer {t} destroyed twice");
                }
            };
            for op in ops {
                match op {
                    Op::Place {
                        size,
                        align,
                        dedicated,
                    } => {
                        let want = round_up(size, nearest_multiple).unwrap();
                        let (pool_before, blocks_before) = (pool.pool_size(), pool.blocks());
                        let (block, r) = match pool.place(size, align, dedicated) {
                            Ok(Placement::Existing { block, reservation }) => {
                                assert!(!dedicated);
                                assert!(!pool.block(block).unwrap().dedicated);
                                (block, reservation)
                            }
                            Ok(Placement::NeedBlock {
                                size: bs,
                                dedicated: d,
                            }) => {
                                assert_eq!(d, dedicated || want > 4 * MIB);
                                if d {
                                    assert_eq!(bs, size);
                                } else {
                                    assert_eq!(bs, want.max(MIB));
                                }
                                assert!(pool_before + bs <= MAX_POOL);
                                assert!(blocks_before < MAX_BLOCKS as usize);
                                next += 1;
                                blocks_alive.insert(next);
                                pool.add_block(next, bs, d, size, align).unwrap()
                            }
                            Err(PoolError::PoolSizeLimit {
                                limit,
                                pool_size,
                                block_size,
                            }) => {
                                assert_eq!((limit, pool_size), (MAX_POOL, pool_before));
                                assert!(pool_size + block_size > limit);
                                continue;
                            }
                            Err(PoolError::BlockCountLimit { blocks, .. }) => {
                                assert_eq!(blocks, MAX_BLOCKS as usize);
                                continue;
                            }
                            Err(e) => panic!("{e}"),
                        };
                        assert_eq!(r.offset % align, 0);
                        assert_eq!(
                            r.size,
                            if pool.block(block).unwrap().dedicated {
                                size
                            } else {
                                want
                            }
                        );
                        assert!(r.offset + r.size <= pool.block(block).unwrap().size);
                        free_buffers(&mut buffers_alive, r.evicted);
                        if r.cached.is_none() {
                            next += 1;
                            pool.set_payload(block, r.id, next).unwrap();
                            buffers_alive.insert(next);
                        }
                        live.push(Live {
                            block,
                            id: r.id,
                            offset: r.offset,
                            size: r.size,
                            count: 1,
                        });
                    }
                    Op::Retain(i) if !live.is_empty() => {
                        let n = live.len();
                        let l = &mut live[i % n];
                        l.count += 1;
                        assert_eq!(pool.retain(l.block, l.id), Ok(l.count));
                    }
                    Op::Release(i) | Op::Reclaim(i) if !live.is_empty() => {
                        let k = i % live.len();
                        let l = &mut live[k];
                        l.count -= 1;
                        if matches!(op, Op::Release(_)) {
                            assert_eq!(pool.release(l.block, l.id), Ok(l.count));
                        } else {
                            let (count, payload) = pool.reclaim(l.block, l.id).unwrap();
                            assert_eq!(count, l.count);
                            assert_eq!(payload.is_some(), count == 0);
                            free_buffers(&mut buffers_alive, payload.into_iter().collect());
                        }
                        if l.count == 0 {
                            let l = live.swap_remove(k);
                            dead.push((l.block, l.id));
                        }
                    }
                    Op::Collect => {
                        let (blocks, buffers) = pool.collect();
                        free_blocks(&mut blocks_alive, blocks);
                        free_buffers(&mut buffers_alive, buffers);
                        for (_, b) in pool.iter() {
                            assert!(!b.regions.is_empty());
                        }
                    }
                    Op::ReleaseDead(i) if !dead.is_empty() => {
                        let (block, id) = dead[i % dead.len()];
                        let before = pool.reserved();
                        assert!(pool.release(block, id).is_err());
                        assert!(pool.reclaim(block, id).is_err());
                        assert!(pool.retain(block, id).is_err());
                        assert_eq!(pool.reserved(), before);
                    }
                    _ => {}
                }
                check(&pool, &live, &config);
                assert_eq!(pool.blocks(), blocks_alive.len());
            }
            for l in live.drain(..) {
                for left in (0..l.count).rev() {
                    assert_eq!(pool.release(l.block, l.id), Ok(left));
                }
            }
            let (blocks, buffers) = pool.collect();
            free_blocks(&mut blocks_alive, blocks);
            free_buffers(&mut buffers_alive, buffers);
            assert_eq!(
                (pool.blocks(), pool.pool_size(), pool.reserved()),
                (0, 0, 0)
            );
            assert!(blocks_alive.is_empty() && buffers_alive.is_empty());
            assert_eq!(pool.drain(), (vec![], vec![]));
        }

        proptest! {
            #[test]
            fn blocks_respect_limits_and_empty_out(
                ops in prop::collection::vec(op(), 1..300),
                nearest_multiple in prop_oneof![Just(0u64), Just(32), Just(4096)],
            ) {
                run(ops, nearest_multiple);
            }
        }
    }
}
