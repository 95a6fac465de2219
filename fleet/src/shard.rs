//! Which shard or sample a case falls in, decided by its name alone: a stable
//! hash of the name, so that adding or removing a case moves no other case
//! between shards (as nextest's `hash:` partitions), and every machine of a
//! fleet agrees whatever its cases folder holds.

/// FNV-1a, 64 bits, of `salt` then `name`, then MurmurHash3's 64-bit
/// finalizer: fixed by their definitions, unlike std's hasher, so shards agree
/// across builds and Rust versions. The finalizer spreads every bit into the
/// low ones, which FNV alone leaves tied to the last bytes (so that shards
/// and samples taken modulo small numbers would not be independent).
fn hash(salt: &str, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in salt.bytes().chain([0]).chain(name.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Whether the case `name` is in shard `k` of `n` (1-based).
pub fn in_shard(name: &str, k: usize, n: usize) -> bool {
    hash("shard", name) % n as u64 == (k - 1) as u64
}

/// Whether the case `name` is in the sample of one case in `n` (`--fraction`).
/// Salted apart from the shards, so that a sample is spread over them.
pub fn in_fraction(name: &str, n: usize) -> bool {
    hash("fraction", name).is_multiple_of(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(count: usize) -> Vec<String> {
        (0..count)
            .map(|i| format!("group{}::case_{i}", i % 7))
            .collect()
    }

    #[test]
    fn each_case_is_in_exactly_one_shard() {
        for n in 1..6 {
            for name in names(200) {
                let shards = (1..=n).filter(|&k| in_shard(&name, k, n)).count();
                assert_eq!(shards, 1, "{name} in {shards} of {n} shards");
            }
        }
    }

    #[test]
    fn adding_a_case_moves_no_other() {
        let before = names(120);
        let mut after = before.clone();
        after.insert(37, "basic::a_new_case".into());
        for n in [2, 3, 8] {
            for name in &before {
                let shard = |list: &[String]| {
                    assert!(list.contains(name));
                    (1..=n).find(|&k| in_shard(name, k, n)).unwrap()
                };
                assert_eq!(shard(&before), shard(&after), "{name} moved");
            }
        }
    }

    #[test]
    fn shards_and_samples_are_about_even() {
        let all = names(2000);
        for k in 1..=4 {
            let here = all.iter().filter(|c| in_shard(c, k, 4)).count();
            assert!(
                (400..600).contains(&here),
                "shard {k}/4 holds {here} of 2000"
            );
        }
        let sample = all.iter().filter(|c| in_fraction(c, 10)).count();
        assert!(
            (140..260).contains(&sample),
            "one in 10 took {sample} of 2000"
        );
        // The sample is not one shard: it is spread over all of them.
        for k in 1..=4 {
            let both = all
                .iter()
                .filter(|c| in_fraction(c, 10) && in_shard(c, k, 4))
                .count();
            assert!(both > 20, "shard {k}/4 has {both} sampled cases");
        }
    }

    #[test]
    fn shards_are_fixed_by_the_name() {
        // Pinned values (of "shard\0" and the name, computed apart in Python):
        // a fleet's machines and a later build must put a case where it was.
        assert_eq!(hash("shard", "basic::round_trip_2d"), 0x381c_11b3_d856_17ee);
        assert!(in_shard("basic::round_trip_2d", 3, 4));
        assert!(in_shard("perf::upload_64mib", 2, 3));
    }
}
