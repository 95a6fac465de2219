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
fn remove_if_empty_takes_one_unused_block() {
    let mut pool = Pool::new(AllocConfig::default(), 16 * GIB);
    let (d, rd) = pool.add_block(7, 300 * MIB, true, 300 * MIB, 1).unwrap();
    pool.set_payload(d, rd.id, 70).unwrap();
    let (s, rs) = pool.add_block(8, 32 * MIB, false, 64, 1).unwrap();
    // In use: stays.
    assert_eq!(pool.remove_if_empty(d), None);
    assert_eq!(pool.release(d, rd.id), Ok(0));
    assert_eq!(pool.remove_if_empty(d), Some((7, vec![70])));
    assert_eq!((pool.blocks(), pool.pool_size()), (1, 32 * MIB));
    // Gone, and the other block untouched.
    assert_eq!(pool.remove_if_empty(d), None);
    assert_eq!(pool.reserved(), 64);
    pool.release(s, rs.id).unwrap();
    assert_eq!(pool.remove_if_empty(s), Some((8, vec![])));
    assert_eq!(pool.blocks(), 0);
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

#[test]
fn an_unlimited_maximum_block_size_does_not_cap_the_preferred_size() {
    let config = AllocConfig {
        maximum_block_size: 0,
        ..AllocConfig::default()
    };
    assert_eq!(Pool::new(config, 16 * GIB).preferred_block_size(), 32 * MIB);
    // Nor makes every request dedicated.
    assert_eq!(
        need(Pool::new(config, 16 * GIB).place(512 * MIB, 1, false)),
        (512 * MIB, false)
    );
}

#[test]
fn a_block_as_large_as_its_heap_is_allowed() {
    let config = AllocConfig {
        minimum_block_size: 8 * MIB,
        ..AllocConfig::default()
    };
    assert_eq!(
        need(Pool::new(config, 64 * MIB).place(64 * MIB, 1, false)),
        (64 * MIB, false)
    );
    match Pool::new(config, 64 * MIB).place(64 * MIB + 32, 1, false) {
        Err(PoolError::LargerThanHeap {
            block_size,
            heap_size,
        }) => assert_eq!((block_size, heap_size), (64 * MIB + 32, 64 * MIB)),
        other => panic!("expected LargerThanHeap, got {other:?}"),
    }
}
