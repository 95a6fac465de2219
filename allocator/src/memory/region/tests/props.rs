//! Property tests: random operation sequences against a model of the
//! allocator, its indexes checked after each.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

const BLOCK: u64 = 16 * 1024 * 1024;

#[derive(Clone, Debug)]
enum Op {
    Reserve {
        size: u64,
        align: u64,
        payload: bool,
    },
    Retain(usize),
    Release(usize),
    Reclaim(usize),
    Collect,
    ReleaseDead(usize),
    /// Release a region with one user to zero and reserve its size again, twice.
    Reuse(usize),
}

/// 1 B to 1 MiB; a third from a few sizes, so that released regions get reused,
/// and a third below 8 KiB, so that more than `MAX_CACHED_SIZES` sizes get
/// cached and the bound evicts.
fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        1u64..=1024 * 1024,
        prop::sample::select(vec![1u64, 100, 4096, 65536, 300_000, 1024 * 1024]),
        1u64..=8192,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    op_with(1)
}

/// `collect`: the weight of `Op::Collect`, which merges (so evicts) most cached
/// regions; 0 lets more than `MAX_CACHED_SIZES` sizes pile up.
fn op_with(collect: u32) -> impl Strategy<Value = Op> {
    let align = prop_oneof![
        4 => (0u32..=12).prop_map(|p| 1u64 << p),
        1 => 0u64..=4096,
    ];
    prop_oneof![
        5 => (size(), align, any::<bool>())
            .prop_map(|(size, align, payload)| Op::Reserve { size, align, payload }),
        1 => any::<usize>().prop_map(Op::Retain),
        3 => any::<usize>().prop_map(Op::Release),
        2 => any::<usize>().prop_map(Op::Reclaim),
        collect => Just(Op::Collect),
        1 => any::<usize>().prop_map(Op::ReleaseDead),
        2 => any::<usize>().prop_map(Op::Reuse),
    ]
}

struct Live {
    id: RegionId,
    offset: u64,
    size: u64,
    count: u32,
    token: Option<u64>,
}

/// Tokens the allocator owns, with the (offset, size) of their region.
type Tokens = HashMap<u64, (u64, u64)>;

fn check(a: &RegionAllocator<u64>, live: &[Live], tokens: &Tokens) {
    a.check_indexes();
    let regions: Vec<RegionInfo> = a.regions().collect();
    let mut at = 0;
    for r in &regions {
        assert_eq!(r.offset, at, "gap or overlap at {at}: {regions:?}");
        assert!(r.size > 0);
        assert_eq!(r.in_use, r.use_count > 0);
        at += r.size;
    }
    assert_eq!(at, BLOCK);
    let mut used: Vec<(u64, u64, u32)> = regions
        .iter()
        .filter(|r| r.in_use)
        .map(|r| (r.offset, r.size, r.use_count))
        .collect();
    let mut want: Vec<(u64, u64, u32)> = live.iter().map(|l| (l.offset, l.size, l.count)).collect();
    used.sort();
    want.sort();
    assert_eq!(used, want);
    assert_eq!(a.reserved(), live.iter().map(|l| l.size).sum::<u64>());
    assert_eq!(a.is_empty(), live.is_empty());
    // Every payload the allocator owns is on a region or queued, once.
    assert_eq!(
        regions.iter().filter(|r| r.has_payload).count() + a.evicted.len(),
        tokens.len()
    );
    for t in &a.evicted {
        assert!(tokens.contains_key(t), "queued payload {t}");
        assert!(
            a.order().all(|s| a.region(s).payload != Some(*t)),
            "queued payload {t} still on a region"
        );
    }
    for l in live {
        assert_eq!(a.payload(l.id).unwrap().copied(), l.token);
    }
    // The bound: cached regions have at most MAX_CACHED_SIZES sizes.
    assert!(cached_sizes(a).len() <= MAX_CACHED_SIZES);
    // Every kept payload, free regions included, sits where it was bound.
    for s in a.order() {
        let r = a.region(s);
        if let Some(t) = r.payload {
            assert_eq!(tokens.get(&t), Some(&(r.offset, r.size)), "payload {t}");
        }
    }
}

fn give_back(tokens: &mut Tokens, returned: Vec<u64>) {
    for t in returned {
        assert!(
            tokens.remove(&t).is_some(),
            "token {t} returned twice or never owned"
        );
    }
}

/// Whether some maximal run of free regions could hold `want` bytes at `align`.
fn could_fit(a: &RegionAllocator<u64>, want: u64, align: u64) -> bool {
    let regions: Vec<RegionInfo> = a.regions().collect();
    let mut i = 0;
    while i < regions.len() {
        if regions[i].in_use {
            i += 1;
            continue;
        }
        let start = regions[i].offset;
        let mut end = regions[i].offset + regions[i].size;
        while i + 1 < regions.len() && !regions[i + 1].in_use {
            i += 1;
            end = regions[i].offset + regions[i].size;
        }
        if start.next_multiple_of(align) + want <= end {
            return true;
        }
        i += 1;
    }
    false
}

fn run(ops: Vec<Op>, granularity: u64) {
    let mut a = RegionAllocator::<u64>::with_granularity(BLOCK, granularity);
    let mut live: Vec<Live> = Vec::new();
    let mut dead: Vec<RegionId> = Vec::new();
    let mut tokens = Tokens::new();
    let mut next_token = 0u64;
    for op in ops {
        match op {
            Op::Reserve {
                size,
                align,
                payload,
            } => {
                let align_eff = align.max(1).next_power_of_two();
                let want = round_up(size, granularity).unwrap();
                match a.reserve(size, align) {
                    Some(r) => {
                        assert_eq!(r.offset % align_eff, 0);
                        assert_eq!(r.size, want);
                        assert!(r.offset + r.size <= BLOCK);
                        give_back(&mut tokens, r.evicted);
                        let token = match r.cached {
                            Some(t) => {
                                assert_eq!(tokens.get(&t), Some(&(r.offset, r.size)));
                                Some(t)
                            }
                            None if payload => {
                                next_token += 1;
                                a.set_payload(r.id, next_token).unwrap();
                                tokens.insert(next_token, (r.offset, r.size));
                                Some(next_token)
                            }
                            None => None,
                        };
                        live.push(Live {
                            id: r.id,
                            offset: r.offset,
                            size: r.size,
                            count: 1,
                            token,
                        });
                    }
                    None => {
                        assert!(!could_fit(&a, want, align_eff), "{want} @ {align_eff} fits")
                    }
                }
            }
            Op::Retain(i) if !live.is_empty() => {
                let n = live.len();
                let l = &mut live[i % n];
                l.count += 1;
                assert_eq!(a.retain(l.id), Ok(l.count));
            }
            Op::Release(i) | Op::Reclaim(i) if !live.is_empty() => {
                let k = i % live.len();
                let l = &mut live[k];
                l.count -= 1;
                if matches!(op, Op::Release(_)) {
                    assert_eq!(a.release(l.id), Ok(l.count));
                } else {
                    let (count, payload) = a.reclaim(l.id).unwrap();
                    assert_eq!(count, l.count);
                    if count == 0 {
                        assert_eq!(payload, l.token);
                        give_back(&mut tokens, payload.into_iter().collect());
                    } else {
                        assert_eq!(payload, None);
                    }
                }
                if l.count == 0 {
                    dead.push(live.swap_remove(k).id);
                }
            }
            Op::Collect => {
                let evicted = a.collect();
                give_back(&mut tokens, evicted);
                let regions: Vec<RegionInfo> = a.regions().collect();
                for w in regions.windows(2) {
                    assert!(
                        w[0].in_use || w[1].in_use,
                        "adjacent free regions after collect"
                    );
                }
            }
            Op::Reuse(i) if !live.is_empty() => {
                let k = i % live.len();
                if live[k].count != 1 {
                    continue;
                }
                let mut refused = false;
                for round in 0..2 {
                    let l = &mut live[k];
                    let (offset, size, token) = (l.offset, l.size, l.token);
                    assert_eq!(a.release(l.id), Ok(0));
                    // Kept (cached), or refused by the full cache: the payload is
                    // queued and the region merged (its handle may be stale).
                    let kept = a.info(l.id).is_ok_and(|r| r.has_payload);
                    assert!(!kept || token.is_some());
                    // A size refused is remembered: released again at once, kept.
                    if round == 1 && refused {
                        assert!(kept, "a refused size came back and was refused");
                    }
                    refused = token.is_some() && !kept;
                    let r = a.reserve(size, 1).expect("the space just released");
                    give_back(&mut tokens, r.evicted);
                    if kept {
                        // The most recently released of its size comes back first.
                        assert_eq!((r.offset, r.cached), (offset, token));
                    } else if let Some(t) = token {
                        // Refused: no region of that size is cached.
                        assert_eq!(r.cached, None);
                        assert!(!tokens.contains_key(&t), "refused payload {t} kept");
                    } else if let Some(t) = r.cached {
                        // Another region of that size, cached earlier.
                        assert_eq!(tokens.get(&t), Some(&(r.offset, r.size)));
                    }
                    let token = match r.cached {
                        Some(t) => Some(t),
                        None => {
                            next_token += 1;
                            a.set_payload(r.id, next_token).unwrap();
                            tokens.insert(next_token, (r.offset, r.size));
                            Some(next_token)
                        }
                    };
                    dead.push(l.id);
                    *l = Live {
                        id: r.id,
                        offset: r.offset,
                        size: r.size,
                        count: 1,
                        token,
                    };
                    check(&a, &live, &tokens);
                }
            }
            Op::ReleaseDead(i) if !dead.is_empty() => {
                let id = dead[i % dead.len()];
                let before = a.reserved();
                assert!(a.release(id).is_err());
                assert!(a.reclaim(id).is_err());
                assert!(a.retain(id).is_err());
                assert!(a.set_payload(id, u64::MAX).is_err());
                assert_eq!(a.reserved(), before);
            }
            _ => {}
        }
        check(&a, &live, &tokens);
    }
    for l in live.drain(..) {
        for left in (0..l.count).rev() {
            assert_eq!(a.release(l.id), Ok(left));
        }
        assert!(a.release(l.id).is_err());
    }
    give_back(&mut tokens, a.collect());
    let regions: Vec<RegionInfo> = a.regions().collect();
    assert_eq!(regions.len(), 1);
    assert_eq!(
        (regions[0].offset, regions[0].size, regions[0].in_use),
        (0, BLOCK, false)
    );
    give_back(&mut tokens, a.drain());
    assert!(tokens.is_empty(), "payloads lost: {tokens:?}");
}

proptest! {
    #[test]
    fn regions_tile_the_block(
        ops in prop::collection::vec(op(), 1..300),
        granularity in prop_oneof![Just(0u64), Just(32), Just(256)],
    ) {
        run(ops, granularity);
    }

    /// Without `collect`, the cache fills up: eviction of the size least
    /// recently released, refusal of new sizes, admission of refused ones.
    #[test]
    fn the_cache_bound_holds(
        ops in prop::collection::vec(op_with(0), 100..400),
        granularity in prop_oneof![Just(0u64), Just(32), Just(256)],
    ) {
        run(ops, granularity);
    }
}
