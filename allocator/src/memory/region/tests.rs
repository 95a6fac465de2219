use super::*;

fn layout<T>(a: &RegionAllocator<T>) -> Vec<(u64, u64, u32)> {
    a.check_indexes();
    a.regions()
        .map(|r| (r.offset, r.size, r.use_count))
        .collect()
}

#[test]
fn new_block_is_one_free_region() {
    let a = RegionAllocator::<u32>::new(1024);
    assert_eq!(layout(&a), vec![(0, 1024, 0)]);
    assert_eq!((a.size(), a.reserved(), a.is_empty()), (1024, 0, true));
    let empty = RegionAllocator::<u32>::new(0);
    assert_eq!(empty.regions().count(), 0);
}

#[test]
fn reserve_splits_at_aligned_offsets() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r1 = a.reserve(100, 64).unwrap();
    assert_eq!(
        (r1.offset, r1.size, r1.cached, r1.evicted.len()),
        (0, 100, None, 0)
    );
    assert_eq!(layout(&a), vec![(0, 100, 1), (100, 924, 0)]);
    let r2 = a.reserve(10, 256).unwrap();
    assert_eq!((r2.offset, r2.size), (256, 10));
    // The alignment padding stays free, as does the rest.
    assert_eq!(
        layout(&a),
        vec![(0, 100, 1), (100, 156, 0), (256, 10, 1), (266, 758, 0)]
    );
    assert_eq!(a.reserved(), 110);
    // First fit: the padding takes a small request.
    let r3 = a.reserve(50, 2).unwrap();
    assert_eq!(r3.offset, 100);
    assert_eq!(a.reserved(), 160);
    assert!(a.reserve(759, 1).is_none());
    assert!(a.reserve(2000, 1).is_none());
    let r4 = a.reserve(758, 1).unwrap();
    assert_eq!(r4.offset, 266);
    // Left: the 106 bytes of padding at 150.
    assert!(a.reserve(107, 1).is_none());
    assert_eq!(a.reserve(106, 1).map(|r| r.offset), Some(150));
    assert_eq!(a.reserved(), 1024);
    assert!(a.reserve(1, 1).is_none());
}

#[test]
fn granularity_alignment_and_zero_size() {
    let mut a = RegionAllocator::<u32>::with_granularity(1024, 32);
    let r = a.reserve(100, 1).unwrap();
    assert_eq!((r.offset, r.size), (0, 128));
    // 48 is rounded up to 64.
    let r = a.reserve(1, 48).unwrap();
    assert_eq!((r.offset, r.size), (128, 32));
    let r = a.reserve(1, 48).unwrap();
    assert_eq!((r.offset, r.size), (192, 32));
    // 0 bytes count as 1 (then rounded); alignment 0 as 1.
    // First fit: into the padding left at 160.
    let r = a.reserve(0, 0).unwrap();
    assert_eq!((r.offset, r.size), (160, 32));
    let mut b = RegionAllocator::<u32>::new(16);
    let r = b.reserve(0, 0).unwrap();
    assert_eq!((r.offset, r.size), (0, 1));
    // An alignment with no power of two above it fits nowhere; no panic.
    assert!(b.reserve(1, u64::MAX).is_none());
    assert!(RegionAllocator::<u32>::with_granularity(64, 32)
        .reserve(u64::MAX, 1)
        .is_none());
}

#[test]
fn release_then_collect_leaves_one_free_region() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r1 = a.reserve(100, 64).unwrap();
    let r2 = a.reserve(10, 256).unwrap();
    assert_eq!(a.release(r1.id), Ok(0));
    // Released but not merged: Halide merges only on collect.
    assert_eq!(
        layout(&a),
        vec![(0, 100, 0), (100, 156, 0), (256, 10, 1), (266, 758, 0)]
    );
    assert!(a.collect().is_empty());
    assert_eq!(layout(&a), vec![(0, 256, 0), (256, 10, 1), (266, 758, 0)]);
    assert_eq!(a.release(r2.id), Ok(0));
    assert!(a.collect().is_empty());
    assert_eq!(layout(&a), vec![(0, 1024, 0)]);
    assert!(a.is_empty());
}

#[test]
fn use_counts_start_at_one() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r = a.reserve(100, 1).unwrap();
    assert_eq!(a.info(r.id).unwrap().use_count, 1);
    assert_eq!(a.retain(r.id), Ok(2));
    assert_eq!(a.retain(r.id), Ok(3));
    assert_eq!(a.release(r.id), Ok(2));
    assert_eq!(a.release(r.id), Ok(1));
    // Still reserved while one user is left (Halide #9237 freed it here).
    assert_eq!(a.reserved(), 100);
    assert!(a.reserve(1000, 1).is_none());
    assert_eq!(a.release(r.id), Ok(0));
    assert_eq!(a.reserved(), 0);
    let e = a.release(r.id).unwrap_err();
    assert_eq!(
        e,
        RegionError::NotInUse {
            id: r.id,
            offset: 0,
            size: 100
        }
    );
    assert!(e
        .to_string()
        .ends_with("at offset 0 B, size 100 B is not in use (already released)"));
    assert_eq!(
        a.retain(r.id),
        Err(RegionError::NotInUse {
            id: r.id,
            offset: 0,
            size: 100
        })
    );
    assert!(a.reclaim(r.id).is_err());
    assert_eq!(a.reserved(), 0);
}

#[test]
fn stale_handles_are_errors() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r1 = a.reserve(100, 1).unwrap();
    a.release(r1.id).unwrap();
    // Same place again: a new handle; the old one no longer reaches it.
    let r2 = a.reserve(100, 1).unwrap();
    assert_eq!(r2.offset, r1.offset);
    assert_ne!(r2.id, r1.id);
    assert_eq!(a.release(r1.id), Err(RegionError::UnknownRegion(r1.id)));
    assert_eq!(a.retain(r1.id), Err(RegionError::UnknownRegion(r1.id)));
    assert_eq!(a.info(r2.id).unwrap().use_count, 1);
    // Merged away.
    a.release(r2.id).unwrap();
    let r3 = a.reserve(10, 1).unwrap();
    a.release(r3.id).unwrap();
    a.collect();
    assert_eq!(layout(&a), vec![(0, 1024, 0)]);
    assert!(matches!(
        a.release(r3.id),
        Err(RegionError::UnknownRegion(_))
    ));
    // Never issued here.
    let other = RegionAllocator::<u32>::new(64).reserve(1, 1).unwrap().id;
    let bogus = RegionId {
        slot: 99,
        generation: 1,
    };
    assert!(a.release(bogus).is_err());
    assert!(a.release(other).is_err());
    assert!(a
        .release(bogus)
        .unwrap_err()
        .to_string()
        .contains("region #99.1 is unknown"));
}

#[test]
fn reclaim_returns_the_payload() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r = a.reserve(256, 1).unwrap();
    a.set_payload(r.id, 7).unwrap();
    assert_eq!(a.payload(r.id), Ok(Some(&7)));
    assert_eq!(a.retain(r.id), Ok(2));
    assert_eq!(a.reclaim(r.id), Ok((1, None)));
    assert_eq!(a.reclaim(r.id), Ok((0, Some(7))));
    assert_eq!(
        a.regions().map(|r| r.has_payload).collect::<Vec<_>>(),
        vec![false, false]
    );
    // The region is not cached: an exact re-reserve creates a new payload.
    let r = a.reserve(256, 1).unwrap();
    assert_eq!((r.offset, r.cached), (0, None));
}

#[test]
fn release_keeps_the_payload_for_an_exact_reserve() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let big = a.reserve(512, 1).unwrap();
    let cached = a.reserve(256, 1).unwrap();
    assert_eq!(cached.offset, 512);
    a.set_payload(cached.id, 9).unwrap();
    let _tail = a.reserve(256, 1).unwrap();
    a.release(big.id).unwrap();
    a.release(cached.id).unwrap();
    // First fit would take offset 0; the exact cached region is preferred.
    let r = a.reserve(256, 256).unwrap();
    assert_eq!(
        (r.offset, r.size, r.cached, r.evicted),
        (512, 256, Some(9), vec![])
    );
    // The region still owns the payload: no set_payload, reclaim returns it.
    assert_eq!(a.payload(r.id), Ok(Some(&9)));
    assert!(matches!(
        a.set_payload(r.id, 10),
        Err(RegionError::PayloadPresent {
            offset: 512,
            size: 256,
            ..
        })
    ));
    assert_eq!(a.reclaim(r.id), Ok((0, Some(9))));
    // An alignment the cached offset does not meet: no reuse.
    let mut a = RegionAllocator::<u32>::new(1024);
    let _pad = a.reserve(256, 1).unwrap();
    let c = a.reserve(256, 1).unwrap();
    a.set_payload(c.id, 3).unwrap();
    a.release(c.id).unwrap();
    let r = a.reserve(256, 512).unwrap();
    assert_eq!((r.offset, r.cached), (512, None));
    assert_eq!(a.regions().filter(|r| r.has_payload).count(), 1);
}

#[test]
fn split_and_merge_evict_payloads() {
    let mut a = RegionAllocator::<u32>::new(300);
    let r1 = a.reserve(100, 1).unwrap();
    let r2 = a.reserve(100, 1).unwrap();
    let r3 = a.reserve(100, 1).unwrap();
    a.set_payload(r1.id, 1).unwrap();
    a.set_payload(r2.id, 2).unwrap();
    a.set_payload(r3.id, 3).unwrap();
    a.release(r1.id).unwrap();
    a.release(r2.id).unwrap();
    // Splitting a cached region evicts its payload.
    let small = a.reserve(60, 1).unwrap();
    assert_eq!(
        (small.offset, small.cached, small.evicted),
        (0, None, vec![1])
    );
    a.release(small.id).unwrap();
    // No single free region holds 150 bytes; the run 0..200 does and is merged.
    assert_eq!(
        layout(&a),
        vec![(0, 60, 0), (60, 40, 0), (100, 100, 0), (200, 100, 1)]
    );
    let r = a.reserve(150, 1).unwrap();
    assert_eq!((r.offset, r.size), (0, 150));
    assert_eq!(r.evicted, vec![2]);
    assert_eq!(layout(&a), vec![(0, 150, 1), (150, 50, 0), (200, 100, 1)]);
    assert!(a.reserve(51, 1).is_none());
    // collect returns the payloads of merged regions only.
    a.release(r3.id).unwrap();
    assert_eq!(a.collect(), vec![3]);
    assert_eq!(layout(&a), vec![(0, 150, 1), (150, 150, 0)]);
}

#[test]
fn set_payload_needs_a_reserved_region() {
    let mut a = RegionAllocator::<u32>::new(64);
    let r = a.reserve(64, 1).unwrap();
    a.release(r.id).unwrap();
    assert!(matches!(
        a.set_payload(r.id, 1),
        Err(RegionError::NotInUse { .. })
    ));
    assert_eq!(
        a.payload(r.id).unwrap_err().to_string(),
        format!(
            "{} at offset 0 B, size 64 B is not in use (already released)",
            r.id
        )
    );
}

#[test]
fn drain_returns_every_payload_and_resets() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r1 = a.reserve(100, 1).unwrap();
    let r2 = a.reserve(100, 1).unwrap();
    a.set_payload(r1.id, 1).unwrap();
    a.set_payload(r2.id, 2).unwrap();
    a.release(r2.id).unwrap();
    let mut got = a.drain();
    got.sort();
    assert_eq!(got, vec![1, 2]);
    assert_eq!(layout(&a), vec![(0, 1024, 0)]);
    assert_eq!(a.reserved(), 0);
    assert!(matches!(
        a.release(r1.id),
        Err(RegionError::UnknownRegion(_))
    ));
    let r = a.reserve(8, 1).unwrap();
    assert_eq!(r.offset, 0);
    // New regions take the drained slots; the handles from before stay stale.
    let more: Vec<_> = (0..4).map(|_| a.reserve(8, 1).unwrap()).collect();
    for old in [r1.id, r2.id] {
        assert!(matches!(a.info(old), Err(RegionError::UnknownRegion(_))));
    }
    for r in more.iter().chain([&r]) {
        assert!(a.info(r.id).unwrap().in_use);
    }
    assert_eq!(a.drain().len(), 0);
}

/// Releases the region with one user and a payload of each of `sizes` (reserved
/// in that order from offset 0, payloads 1, 2, ...), in that order.
fn cache_sizes(a: &mut RegionAllocator<u32>, sizes: &[u64]) -> Vec<RegionId> {
    let ids: Vec<RegionId> = sizes
        .iter()
        .zip(1..)
        .map(|(&size, payload)| {
            let r = a.reserve(size, 1).unwrap();
            a.set_payload(r.id, payload).unwrap();
            r.id
        })
        .collect();
    for &id in &ids {
        a.release(id).unwrap();
    }
    ids
}

fn cached_sizes<T>(a: &RegionAllocator<T>) -> Vec<u64> {
    let mut sizes: Vec<u64> = a
        .regions()
        .filter(|r| !r.in_use && r.has_payload)
        .map(|r| r.size)
        .collect();
    sizes.sort();
    sizes.dedup();
    sizes
}

#[test]
fn a_full_cache_refuses_a_new_size_and_admits_one_that_comes_back() {
    let mut a = RegionAllocator::<u32>::new(1 << 20);
    let sizes: Vec<u64> = (1..=17).map(|i| i * 100).collect();
    let ids = cache_sizes(&mut a, &sizes);
    let end: u64 = sizes.iter().sum();
    // 16 sizes cached; the 17th (1700 B at 13600) was refused: no payload, merged
    // with the free rest of the block, its handle stale.
    assert_eq!(cached_sizes(&a), sizes[..16].to_vec());
    let free: Vec<(u64, u64, u32)> = layout(&a).into_iter().skip(16).collect();
    assert_eq!(free, vec![(end - 1700, (1 << 20) - (end - 1700), 0)]);
    assert!(matches!(
        a.release(ids[16]),
        Err(RegionError::UnknownRegion(_))
    ));
    // Its payload comes back with the next reservation, which takes its place.
    let r = a.reserve(1700, 1).unwrap();
    assert_eq!(
        (r.offset, r.cached, r.evicted),
        (end - 1700, None, vec![17])
    );
    a.set_payload(r.id, 18).unwrap();
    // Released again while remembered: cached, in place of the size least recently
    // released (100 B, payload 1), whose payload the next reservation hands back.
    a.release(r.id).unwrap();
    let mut want = sizes[1..].to_vec();
    assert_eq!(cached_sizes(&a), want);
    assert_eq!(
        a.regions().next().unwrap(),
        RegionInfo {
            offset: 0,
            size: 100,
            in_use: false,
            use_count: 0,
            has_payload: false,
        }
    );
    let r = a.reserve(50, 1).unwrap();
    assert_eq!((r.offset, r.cached, r.evicted), (0, None, vec![1]));
    // The cached sizes are still reused exactly, the new one included.
    let r = a.reserve(1700, 1).unwrap();
    assert_eq!((r.offset, r.cached), (end - 1700, Some(18)));
    a.release(r.id).unwrap();
    let r = a.reserve(200, 1).unwrap();
    assert_eq!((r.offset, r.cached), (100, Some(2)));
    a.release(r.id).unwrap();
    // A size released again moves to the back: 300 B is now the least recently
    // released, and goes when a refused size comes back.
    assert!(a.reserve(1800, 1).unwrap().evicted.is_empty());
    let r = a.reserve(1900, 1).unwrap();
    a.set_payload(r.id, 19).unwrap();
    a.release(r.id).unwrap();
    assert!(!cached_sizes(&a).contains(&1900));
    let r = a.reserve(1900, 1).unwrap();
    assert_eq!((r.cached, r.evicted), (None, vec![19]));
    a.set_payload(r.id, 20).unwrap();
    a.release(r.id).unwrap();
    want.retain(|&s| s != 300);
    want.push(1900);
    assert_eq!(cached_sizes(&a), want);
    // 3 (300 B, evicted and queued) comes back with the merged regions.
    let rest = a.collect();
    assert!(rest.contains(&3));
    a.check_indexes();
}

#[test]
fn the_bound_is_on_sizes_not_regions() {
    // 300 regions of one size, all alive at once, are all reused.
    let mut a = RegionAllocator::<u32>::with_granularity(1 << 20, 32);
    cache_sizes(&mut a, &[1000; 300]);
    assert_eq!(a.regions().filter(|r| r.has_payload).count(), 300);
    let mut reused: Vec<u32> = (0..300)
        .map(|_| {
            let r = a.reserve(1000, 1).unwrap();
            assert!(r.evicted.is_empty());
            r.cached.unwrap()
        })
        .collect();
    reused.sort();
    assert_eq!(reused, (1..=300).collect::<Vec<u32>>());
}

#[test]
fn evicted_payloads_are_handed_back_by_collect_and_drain() {
    let mut a = RegionAllocator::<u32>::new(1 << 20);
    let sizes: Vec<u64> = (1..=18).map(|i| i * 64).collect();
    cache_sizes(&mut a, &sizes);
    // 17 and 18 refused, queued; collect hands them back with the merged regions.
    let mut got = a.collect();
    got.sort();
    assert_eq!(got, (1..=18).collect::<Vec<u32>>());
    assert_eq!(layout(&a), vec![(0, 1 << 20, 0)]);
    // And drain: 17 refused and queued, 99 in use.
    let mut b = RegionAllocator::<u32>::new(1 << 20);
    cache_sizes(&mut b, &sizes[..16]);
    let r = b.reserve(4096, 1).unwrap();
    b.set_payload(r.id, 99).unwrap();
    let r = b.reserve(17 * 64, 1).unwrap();
    b.set_payload(r.id, 17).unwrap();
    b.release(r.id).unwrap();
    assert_eq!(cached_sizes(&b), sizes[..16].to_vec());
    let mut got = b.drain();
    got.sort();
    let mut want: Vec<u32> = (1..=17).collect();
    want.push(99);
    assert_eq!(got, want);
}

#[test]
fn runs_are_found_from_free_regions() {
    // Free pieces with and without payload between regions in use.
    let mut a = RegionAllocator::<u32>::new(401);
    let ids: Vec<RegionId> = [60u64, 40, 100, 50, 70, 80, 1]
        .iter()
        .zip(1..)
        .map(|(&size, payload)| {
            let r = a.reserve(size, 1).unwrap();
            a.set_payload(r.id, payload).unwrap();
            r.id
        })
        .collect();
    for i in [0, 4] {
        assert_eq!(a.reclaim(ids[i]), Ok((0, Some(i as u32 + 1))));
    }
    for i in [1, 3, 5] {
        a.release(ids[i]).unwrap();
    }
    assert_eq!(
        a.regions()
            .map(|r| (r.offset, r.size, r.use_count, r.has_payload))
            .collect::<Vec<_>>(),
        vec![
            (0, 60, 0, false),
            (60, 40, 0, true),
            (100, 100, 1, true),
            (200, 50, 0, true),
            (250, 70, 0, false),
            (320, 80, 0, true),
            (400, 1, 1, true)
        ]
    );
    // No single free region holds 150 B; the run 0..100 is too short, 200..400 is
    // not, and only its prefix up to 400 is merged.
    let mut r = a.reserve(150, 1).unwrap();
    r.evicted.sort();
    assert_eq!((r.offset, r.evicted), (200, vec![4, 6]));
    assert_eq!(
        layout(&a),
        vec![
            (0, 60, 0),
            (60, 40, 0),
            (100, 100, 1),
            (200, 150, 1),
            (350, 50, 0),
            (400, 1, 1)
        ]
    );
    let r = a.reserve(100, 1).unwrap();
    assert_eq!((r.offset, r.evicted), (0, vec![2]));
    assert!(a.reserve(51, 1).is_none());
    assert_eq!(a.reserve(50, 1).map(|r| r.offset), Some(350));
}

#[test]
fn retain_overflow_is_an_error() {
    let mut a = RegionAllocator::<u32>::new(64);
    let r = a.reserve(8, 1).unwrap();
    a.get_mut(r.id).unwrap().use_count = u32::MAX;
    assert!(matches!(
        a.retain(r.id),
        Err(RegionError::TooManyUsers {
            offset: 0,
            size: 8,
            ..
        })
    ));
    assert_eq!(a.info(r.id).unwrap().use_count, u32::MAX);
}

mod props;

#[test]
fn a_larger_cached_region_is_taken_before_merging_a_lower_run() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r1 = a.reserve(100, 1).unwrap();
    let r2 = a.reserve(100, 1).unwrap();
    let _r3 = a.reserve(300, 1).unwrap();
    let r4 = a.reserve(300, 1).unwrap();
    let _r5 = a.reserve(224, 1).unwrap();
    for (r, p) in [(&r1, 1), (&r2, 2), (&r4, 4)] {
        a.set_payload(r.id, p).unwrap();
        assert_eq!(a.release(r.id), Ok(0));
    }
    // Cached: 0..100 and 100..200 (a run), and 500..800. 150 bytes fit in the
    // one at 500 alone, without merging the lower run.
    let r = a.reserve(150, 1).unwrap();
    assert_eq!((r.offset, r.size), (500, 150));
    assert_eq!(r.evicted, vec![4]);
    assert_eq!(
        layout(&a),
        vec![
            (0, 100, 0),
            (100, 100, 0),
            (200, 300, 1),
            (500, 150, 1),
            (650, 150, 0),
            (800, 224, 1)
        ]
    );
}

#[test]
fn the_lowest_run_of_free_regions_is_merged() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r: Vec<_> = [100, 100, 100, 100, 100, 524]
        .iter()
        .map(|&n| a.reserve(n, 1).unwrap())
        .collect();
    // 0..100 free without payload and 100..200 cached: one run; 300..400 and
    // 400..500 cached: another. Neither region alone holds 150 bytes.
    assert_eq!(a.release(r[0].id), Ok(0));
    for (i, p) in [(1, 1), (3, 3), (4, 4)] {
        a.set_payload(r[i].id, p).unwrap();
        assert_eq!(a.release(r[i].id), Ok(0));
    }
    let got = a.reserve(150, 1).unwrap();
    assert_eq!((got.offset, got.size), (0, 150));
    assert_eq!(got.evicted, vec![1]);
    assert_eq!(a.reserve(150, 1).map(|g| g.offset), Some(300));
}

#[test]
fn info_granularity_and_debug_say_what_is_there() {
    let mut a = RegionAllocator::<u32>::with_granularity(1024, 32);
    assert_eq!(a.granularity(), 32);
    let r = a.reserve(10, 1).unwrap();
    let info = a.info(r.id).unwrap();
    assert_eq!(
        (info.offset, info.size, info.in_use, info.use_count),
        (0, 32, true, 1)
    );
    assert_eq!(a.release(r.id), Ok(0));
    assert!(!a.info(r.id).unwrap().in_use);
    let text = format!("{a:?}");
    assert!(
        text.starts_with("RegionAllocator { size: 1024, reserved: 0"),
        "{text}"
    );
}

#[test]
fn handles_of_merged_regions_stay_stale_when_their_slots_are_reused() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r1 = a.reserve(100, 1).unwrap();
    let r2 = a.reserve(100, 1).unwrap();
    let _r3 = a.reserve(100, 1).unwrap();
    assert_eq!(a.release(r1.id), Ok(0));
    assert_eq!(a.release(r2.id), Ok(0));
    assert!(a.collect().is_empty());
    assert_eq!(layout(&a), vec![(0, 200, 0), (200, 100, 1), (300, 724, 0)]);
    let new: Vec<_> = (0..4).map(|_| a.reserve(40, 1).unwrap()).collect();
    assert_eq!(
        new.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [0, 40, 80, 120]
    );
    for old in [r1.id, r2.id] {
        assert!(
            matches!(a.info(old), Err(RegionError::UnknownRegion(_))),
            "{old}"
        );
    }
    for r in &new {
        assert!(a.info(r.id).unwrap().in_use);
    }
}

#[test]
fn a_size_seen_twice_while_the_cache_is_full_takes_the_oldest_class() {
    let mut a = RegionAllocator::<u32>::new(1 << 20);
    // 16 sizes cached, each region between two in use, so nothing merges.
    let mut cached = Vec::new();
    for i in 0..MAX_CACHED_SIZES as u64 {
        cached.push(a.reserve(10 * (i + 1), 1).unwrap());
        a.reserve(1, 1).unwrap();
    }
    // A plain region just before the first 1000, freed first.
    let plain = a.reserve(50, 1).unwrap();
    let mut more = Vec::new();
    for size in [1000, 2000, 1000] {
        more.push(a.reserve(size, 1).unwrap());
        a.reserve(1, 1).unwrap();
    }
    assert_eq!(a.release(plain.id), Ok(0));
    assert!(!a.info(plain.id).unwrap().in_use);
    for (i, r) in cached.iter().enumerate() {
        a.set_payload(r.id, 100 + i as u32).unwrap();
        assert_eq!(a.release(r.id), Ok(0));
    }
    for (r, p) in more.iter().zip([1, 2, 3]) {
        a.set_payload(r.id, p).unwrap();
        assert_eq!(a.release(r.id), Ok(0));
    }
    // 1000 and 2000 are new while the cache is full: remembered, not cached. The
    // second 1000 was remembered, so it is cached and the oldest size (10) goes.
    let mut evicted = a.collect();
    evicted.sort();
    assert_eq!(evicted, vec![1, 2, 100]);
    let again = a.reserve(1000, 1).unwrap();
    assert_eq!(again.cached, Some(3));
    // The first 1000, its payload evicted, merged into the plain region before it,
    // whose handle is stale now.
    assert!(matches!(
        a.info(plain.id),
        Err(RegionError::UnknownRegion(_))
    ));
    layout(&a);
}

#[test]
fn a_cached_region_from_the_middle_of_its_size_class_is_unlinked() {
    let mut a = RegionAllocator::<u32>::new(1024);
    let r0 = a.reserve(100, 1).unwrap();
    let r1 = a.reserve(100, 1).unwrap();
    let r2 = a.reserve(100, 1).unwrap();
    let _keep = a.reserve(1, 1).unwrap();
    // Class 100 lists the last cached first: r2 (200), r1 (100), r0 (0).
    for (r, p) in [(&r0, 0), (&r1, 1), (&r2, 2)] {
        a.set_payload(r.id, p).unwrap();
        assert_eq!(a.release(r.id), Ok(0));
    }
    // Only r0 is 256-aligned: it leaves the list from its end, r1 from the middle.
    let got = a.reserve(100, 256).unwrap();
    assert_eq!((got.offset, got.cached), (0, Some(0)));
    let got = a.reserve(100, 4).unwrap();
    assert_eq!((got.offset, got.cached), (200, Some(2)));
    let got = a.reserve(100, 4).unwrap();
    assert_eq!((got.offset, got.cached), (100, Some(1)));
    layout(&a);
}

/// Test-only consistency check of the allocator's indexes.
impl<T> RegionAllocator<T> {
    /// Panics unless the offset list, `free` and the size classes agree with the
    /// regions: the list tiles the block; `free` lists exactly the free regions
    /// without payload; the classes list exactly the cached regions, by size, at most
    /// `MAX_CACHED_SIZES` of them.
    fn check_indexes(&self) {
        use std::collections::BTreeSet;
        let order: Vec<u32> = self.order().collect();
        let mut at = 0;
        let mut prev = NONE;
        let mut plain = BTreeSet::new();
        let mut cached = BTreeSet::new();
        for &s in &order {
            let r = self.region(s);
            assert_eq!(r.prev, prev, "prev link of slot {s}");
            assert_eq!(r.offset, at, "regions tile the block");
            assert!(r.size > 0);
            if r.is_plain() {
                let e = self.free[r.pos as usize];
                assert_eq!(
                    e,
                    FreeEntry {
                        offset: r.offset,
                        end: r.end(),
                        slot: s
                    }
                );
                plain.insert(s);
            } else if r.is_free() {
                cached.insert(s);
            }
            at = r.end();
            prev = s;
        }
        assert_eq!(at, self.size);
        let live = self.slots.iter().filter(|s| s.region.is_some()).count();
        assert_eq!(live, order.len(), "slots outside the offset list");
        assert_eq!(live + self.vacant.len(), self.slots.len());
        assert_eq!(
            self.free.len(),
            plain.len(),
            "free lists every plain region once"
        );
        assert!(self.classes.len() <= MAX_CACHED_SIZES);
        let mut listed = BTreeSet::new();
        for (i, c) in self.classes.iter().enumerate() {
            assert!(self.classes[..i].iter().all(|d| d.size != c.size));
            let mut s = c.head;
            let mut back = NONE;
            let mut len = 0;
            while s != NONE {
                let r = self.region(s);
                assert_eq!(r.cprev, back);
                assert_eq!(r.size, c.size);
                assert!(listed.insert(s), "slot {s} in two classes");
                len += 1;
                back = s;
                s = r.cnext;
            }
            assert_eq!(len, c.len);
            assert!(len > 0, "empty size class");
        }
        assert_eq!(
            listed, cached,
            "size classes list exactly the cached regions"
        );
        let mut hint = [0u8; HINT];
        for c in &self.classes {
            hint[hint_index(c.size)] += 1;
        }
        assert_eq!(hint, self.hint, "hint counts the classes");
    }
}
