//! Sub-allocation of one block of device memory (one `VkDeviceMemory`), after
//! Halide's `RegionAllocator` (`src/runtime/internal/region_allocator.h`).
//!
//! Regions tile the block, in offset order, with no gap or overlap (a doubly linked
//! list of slots). A reservation takes a free region and splits off the unused front
//! (alignment padding) and back as free regions.
//!
//! # Cached payloads, and their bound
//!
//! A released region keeps its payload (the `VkBuffer` bound at it), so that a later
//! request of the same size, at an offset that meets its alignment, gets the buffer
//! back without `vkCreateBuffer` (Halide's `release`). Such a *cached* region is never
//! merged with its neighbours on release: merging would change its extent, and the
//! buffer would no longer match it.
//!
//! Halide caches every released buffer. With many distinct sizes that fragments the
//! block: every reserve walks ever more regions, and most still miss the cache. So
//! each block caches regions of at most [`MAX_CACHED_SIZES`] distinct sizes. The
//! bound is on sizes, not on regions, so that repeated requests of a few sizes (the
//! same tensor shapes again and again) keep every buffer however many are alive at
//! once.
//!
//! When those sizes are cached, a region released with a new size is not cached: its
//! payload is evicted at once, unless that size was refused lately (it is among the
//! last [`GHOSTS`] sizes refused, the "ghosts" of ARC and 2Q): then it is cached and
//! the size least recently released is evicted instead, all its regions. Sizes that
//! come back get in, one-off sizes do not flush them out, and a workload whose sizes
//! change gets its new sizes cached from their second release. Plain LRU would move
//! cached islands around the block on every one-off size and flush the sizes that
//! repeat; never caching a new size would never cache a changed workload's sizes.
//! The measurements behind this are in `bench/README.md` ("Bounded buffer cache" there).
//!
//! Evicted payloads are queued and handed back, for the caller to destroy, by the
//! next `reserve` in this block ([`Reservation::evicted`]), by `collect` or by
//! `drain`, so `release` keeps its signature.
//!
//! A region whose payload is evicted merges with its free neighbours without
//! payload, and so do the pieces a reservation splits off (alignment padding, the
//! rest of a larger region), so the free space is as few pieces as the reserved and
//! cached regions allow. A region released without a payload (`release` of a region that never
//! got one, or `reclaim`) is left as it is, as in Halide, so that a second release of
//! its handle is still reported as [`RegionError::NotInUse`] with its offset and
//! size; it merges when a neighbour does, or on `collect`. (vkcopy binds a buffer to
//! every region, so that case is rare there.)
//!
//! # Placement
//!
//! Order of preference in [`RegionAllocator::reserve`]:
//! 1. a cached region of exactly the size asked for, at an offset that meets the
//!    alignment (its payload comes back in [`Reservation::cached`]), the most recently
//!    released first;
//! 2. address-ordered first fit among the free regions without payload: the
//!    lowest-offset one that fits, as Halide's `find_block_region` (whose comment
//!    says best fit but whose code is first fit). Address-ordered first fit fragments
//!    about as little as best fit (Johnstone and Wilson, "The Memory Fragmentation
//!    Problem: Solved?", ISMM 1998). They are kept in a small array, scanned in full;
//!    merging keeps it short;
//! 3. address-ordered first fit among the cached regions (splitting one evicts its
//!    payload), so that the cache gives way only when uncached space does not fit;
//! 4. the first run of adjacent free regions that fits, merged (what Halide gets by
//!    `collect` and a retry, without merging runs it does not need).
//!
//! Offsets are the same as Halide's when nothing cached is in the way; with cached
//! regions, they may differ (Halide's first fit would split a low cached region where
//! this one takes a low uncached one).
//!
//! Use counts start at 1 on `reserve`. Halide started them at 0 (its issue fixed by
//! PR #9237), so releasing one of {buffer, crop} freed a region still in use.
//!
//! Handles carry a generation: a handle whose region was merged away or reserved
//! again is reported as unknown, never confused with the new owner.

// Parts of this API are exercised by its tests only.
#![cfg_attr(not(test), allow(dead_code))]
#![forbid(unsafe_code)]

use std::fmt;

/// Most distinct sizes of cached regions (free regions that keep their payload for
/// reuse) in one block. When the cache is full, a region released with another size
/// has its payload evicted, unless that size is one of the last [`GHOSTS`] refused:
/// then the size least recently released is evicted instead. Evicted regions merge
/// with their free neighbours. See the module documentation for why and for the
/// measurements.
pub(crate) const MAX_CACHED_SIZES: usize = 16;

/// Sizes remembered as refused by a full cache (see [`MAX_CACHED_SIZES`]): a refused
/// size that comes back while remembered is cached.
pub(crate) const GHOSTS: usize = 16;

/// Buckets of `RegionAllocator::hint` (a power of two).
const HINT: usize = 64;

/// No slot: the end of a list.
const NONE: u32 = u32::MAX;

/// Handle of a reservation. Stale handles (region released and reserved again,
/// merged away, or drained) are detected by a generation counter.
///
/// A handle is only meaningful with the allocator that issued it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RegionId {
    slot: u32,
    generation: u64,
}

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "region #{}.{}", self.slot, self.generation)
    }
}

/// A region handed out by [`RegionAllocator::reserve`].
#[derive(Debug)]
pub(crate) struct Reservation<T> {
    /// Handle for `retain`, `release`, `reclaim`, `set_payload`.
    pub id: RegionId,
    /// Bytes from the start of the block; a multiple of the alignment asked for.
    pub offset: u64,
    /// Bytes reserved: the size asked for, rounded up to the allocator's granularity.
    pub size: u64,
    /// The payload kept by an earlier release of a region with this exact offset and
    /// size, to reuse. The region still owns it (this is a clone: `VkBuffer` is
    /// `Copy`), so do not call `set_payload`. `None`: create a payload and call
    /// `set_payload`.
    pub cached: Option<T>,
    /// Payloads that no longer belong to any region, for the caller to destroy: those
    /// of cached regions that this reservation split or merged, and those evicted by
    /// earlier releases in this block (the bound of [`MAX_CACHED_SIZES`]). Usually
    /// empty when sizes repeat.
    pub evicted: Vec<T>,
}

/// One region as seen by [`RegionAllocator::regions`], for stats and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegionInfo {
    /// Bytes from the start of the block.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
    /// Reserved (use count above 0).
    pub in_use: bool,
    /// Users: 1 after reserve, +1 per retain, -1 per release or reclaim.
    pub use_count: u32,
    /// A payload is attached (in use), or kept for reuse (free).
    pub has_payload: bool,
}

/// Misuse of a region handle. Nothing is changed when one is returned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum RegionError {
    /// The handle was not issued by this allocator, or its region has since been
    /// merged, drained, or released and reserved again.
    #[error("{0} is unknown to this block: merged, reserved again, drained, or never issued here")]
    UnknownRegion(RegionId),
    /// The region is free (released to a use count of 0).
    #[error("{id} at offset {offset} B, size {size} B is not in use (already released)")]
    NotInUse {
        /// The handle used.
        id: RegionId,
        /// Bytes.
        offset: u64,
        /// Bytes.
        size: u64,
    },
    /// `set_payload` on a region that already has one; the caller destroys the new one.
    #[error("{id} at offset {offset} B, size {size} B already has a payload")]
    PayloadPresent {
        /// The handle used.
        id: RegionId,
        /// Bytes.
        offset: u64,
        /// Bytes.
        size: u64,
    },
    /// `retain` past `u32::MAX` users.
    #[error("{id} at offset {offset} B, size {size} B already has u32::MAX users")]
    TooManyUsers {
        /// The handle used.
        id: RegionId,
        /// Bytes.
        offset: u64,
        /// Bytes.
        size: u64,
    },
}

struct Region<T> {
    offset: u64,
    size: u64,
    use_count: u32,
    payload: Option<T>,
    /// Neighbours in offset order (slots), `NONE` at the ends of the block.
    prev: u32,
    next: u32,
    /// Free without payload: the index of its entry in `free`. Unused otherwise.
    pos: u32,
    /// Cached: the previous and next region of its size class. Unused otherwise.
    cprev: u32,
    cnext: u32,
}

impl<T> Region<T> {
    fn end(&self) -> u64 {
        self.offset + self.size
    }
    fn is_free(&self) -> bool {
        self.use_count == 0
    }
    /// An error naming `id` where this region is free.
    fn check_in_use(&self, id: RegionId) -> Result<(), RegionError> {
        match self.is_free() {
            true => Err(RegionError::NotInUse {
                id,
                offset: self.offset,
                size: self.size,
            }),
            false => Ok(()),
        }
    }
    /// Free and without payload ("plain"): listed in `free`.
    fn is_plain(&self) -> bool {
        self.use_count == 0 && self.payload.is_none()
    }
}

struct Slot<T> {
    /// Bumped when the slot's region is reserved, merged into, or the slot is emptied.
    generation: u64,
    region: Option<Region<T>>,
}

/// A free region without payload, in the array that placement scans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FreeEntry {
    offset: u64,
    end: u64,
    slot: u32,
}

/// The cached regions of one size: a list through `Region::cprev`/`cnext`, most
/// recently released first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SizeClass {
    size: u64,
    head: u32,
    len: u32,
}

/// Sub-allocates one block of `size` bytes. `T` is the payload cached per region
/// (the `VkBuffer` bound there).
pub(crate) struct RegionAllocator<T> {
    size: u64,
    granularity: u64,
    reserved: u64,
    slots: Vec<Slot<T>>,
    /// Empty slots, reused before new ones are pushed.
    vacant: Vec<u32>,
    /// The region at offset 0; `NONE` for a block of 0 bytes.
    head: u32,
    /// The free regions without payload, in no order (placement scans them all).
    free: Vec<FreeEntry>,
    /// The sizes of cached regions, at most `MAX_CACHED_SIZES`, the least recently
    /// released first.
    classes: Vec<SizeClass>,
    /// How many classes have a size in each bucket (by `hint_index`): a size whose
    /// bucket counts 0 has no class, without a look at `classes`.
    hint: [u8; HINT],
    /// The sizes last refused by the full cache (0: none), a ring.
    ghosts: [u64; GHOSTS],
    /// Where the next refused size goes in `ghosts`.
    ghost_next: usize,
    /// Payloads taken from regions (evicted, split, merged) not yet handed back.
    evicted: Vec<T>,
}

/// `x` rounded up to a multiple of `m` (any `m`; 0 = no rounding); `None` on overflow.
pub(crate) fn round_up(x: u64, m: u64) -> Option<u64> {
    if m <= 1 {
        Some(x)
    } else if m.is_power_of_two() {
        // The usual case (granularities are powers of two), without a division.
        Some(x.checked_add(m - 1)? & !(m - 1))
    } else {
        x.div_ceil(m).checked_mul(m)
    }
}

/// The bucket of `size` in `RegionAllocator::hint` (Fibonacci hashing: sizes are
/// mostly multiples of a power of two, so the high bits of the product are used).
fn hint_index(size: u64) -> usize {
    (size.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - HINT.trailing_zeros())) as usize
}

/// The offset of `want` bytes aligned to `align` (a power of two) in `start..end`, if they fit.
fn fit(start: u64, end: u64, align: u64, want: u64) -> Option<u64> {
    let at = start.checked_add(align - 1)? & !(align - 1);
    (at.checked_add(want)? <= end).then_some(at)
}

impl<T> fmt::Debug for RegionAllocator<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionAllocator")
            .field("size", &self.size)
            .field("reserved", &self.reserved)
            .field("regions", &self.regions().collect::<Vec<_>>())
            .finish()
    }
}

impl<T> RegionAllocator<T> {
    /// A block of `size` bytes, one free region covering it; sizes are not rounded.
    pub(crate) fn new(size: u64) -> Self {
        Self::with_granularity(size, 0)
    }

    /// A block of `size` bytes whose reservations are rounded up to a multiple of
    /// `granularity` bytes (0 = no rounding; Halide's `nearest_multiple`).
    pub(crate) fn with_granularity(size: u64, granularity: u64) -> Self {
        let mut a = RegionAllocator {
            size,
            granularity,
            reserved: 0,
            slots: Vec::new(),
            vacant: Vec::new(),
            head: NONE,
            free: Vec::new(),
            classes: Vec::new(),
            hint: [0; HINT],
            ghosts: [0; GHOSTS],
            ghost_next: 0,
            evicted: Vec::new(),
        };
        a.insert_whole_block();
        a
    }

    /// Bytes of the block.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Bytes that reservations are rounded up to a multiple of (0 = none).
    pub(crate) fn granularity(&self) -> u64 {
        self.granularity
    }

    /// Bytes in use: the sum of the sizes of reserved regions.
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Nothing is reserved.
    pub(crate) fn is_empty(&self) -> bool {
        // Every reservation is at least one byte.
        self.reserved == 0
    }

    /// The regions in offset order; they tile the block.
    pub(crate) fn regions(&self) -> impl Iterator<Item = RegionInfo> + '_ {
        self.order().map(move |s| {
            let r = self.region(s);
            RegionInfo {
                offset: r.offset,
                size: r.size,
                in_use: !r.is_free(),
                use_count: r.use_count,
                has_payload: r.payload.is_some(),
            }
        })
    }

    /// The region of a live handle (in use or not).
    pub(crate) fn info(&self, id: RegionId) -> Result<RegionInfo, RegionError> {
        let r = self.get(id)?;
        Ok(RegionInfo {
            offset: r.offset,
            size: r.size,
            in_use: !r.is_free(),
            use_count: r.use_count,
            has_payload: r.payload.is_some(),
        })
    }

    /// The payload attached to a reserved region, if any.
    pub(crate) fn payload(&self, id: RegionId) -> Result<Option<&T>, RegionError> {
        Ok(self.in_use(id)?.payload.as_ref())
    }

    /// Reserves `size` bytes (0 counts as 1), rounded up to the granularity, at a
    /// multiple of `alignment` bytes. An alignment of 0 counts as 1; one that is not a
    /// power of two is rounded up to one. `None` if no free space fits.
    ///
    /// Order of preference (see the module documentation):
    /// 1. a cached region of exactly this size at an aligned offset: its payload comes
    ///    back in [`Reservation::cached`];
    /// 2. the first (lowest-offset) free region without payload that fits;
    /// 3. the first (lowest-offset) cached region that fits;
    /// 4. the first run of adjacent free regions that fits, merged.
    ///
    /// The payloads of cached regions split or merged, and those evicted by earlier
    /// releases, come back in [`Reservation::evicted`] for the caller to destroy.
    pub(crate) fn reserve(&mut self, size: u64, alignment: u64) -> Option<Reservation<T>>
    where
        T: Clone,
    {
        let align = alignment.max(1).checked_next_power_of_two()?;
        let want = round_up(size.max(1), self.granularity)?;
        if want > self.size - self.reserved {
            return None;
        }
        let mask = align - 1;

        // 1. Exact reuse.
        let class = if self.hint[hint_index(want)] == 0 {
            None
        } else {
            self.classes.iter().find(|c| c.size == want)
        };
        if let Some(c) = class {
            let mut s = c.head;
            while s != NONE {
                let r = self.region(s);
                if r.offset & mask == 0 {
                    let at = r.offset;
                    self.uncache(s);
                    return Some(self.carve(s, at, want));
                }
                s = r.cnext;
            }
        }

        // 2. Address-ordered first fit among the free regions without payload.
        let mut first: Option<(u64, u32)> = None;
        let mut first_offset = u64::MAX;
        for e in &self.free {
            if e.offset < first_offset {
                if let Some(at) = fit(e.offset, e.end, align, want) {
                    first = Some((at, e.slot));
                    first_offset = e.offset;
                }
            }
        }
        if let Some((at, s)) = first {
            return Some(self.carve_plain(s, at, want));
        }

        // 3. Address-ordered first fit among the cached regions.
        let mut first: Option<(u64, u32)> = None;
        let mut first_offset = u64::MAX;
        for c in &self.classes {
            if c.size < want {
                continue;
            }
            let mut s = c.head;
            while s != NONE {
                let r = self.region(s);
                if r.offset < first_offset {
                    if let Some(at) = fit(r.offset, r.end(), align, want) {
                        first = Some((at, s));
                        first_offset = r.offset;
                    }
                }
                s = r.cnext;
            }
        }
        if let Some((at, s)) = first {
            self.uncache(s);
            return Some(self.carve(s, at, want));
        }

        // 4. Runs of adjacent free regions: the lowest-offset run with a prefix that
        // fits. Every free region is in `free` or a size class, so the runs are found
        // from those (their starts: a free region whose previous one is not free),
        // without a walk over the regions in use.
        let mut found: Option<(u64, u32, u32)> = None;
        let mut run_start = u64::MAX;
        let starts = self
            .free
            .iter()
            .map(|e| e.slot)
            .chain(self.classes.iter().flat_map(|c| {
                std::iter::successors(Some(c.head), |&s| {
                    let n = self.region(s).cnext;
                    (n != NONE).then_some(n)
                })
            }));
        for s in starts {
            let r = self.region(s);
            if r.offset >= run_start || (r.prev != NONE && self.region(r.prev).is_free()) {
                continue;
            }
            if let Some((at, last)) = self.run_fit(s, align, want) {
                found = Some((at, s, last));
                run_start = r.offset;
            }
        }
        let (at, run, last) = found?;
        self.merge_run(run, last);
        Some(self.carve(run, at, want))
    }

    /// Attaches the payload (the `VkBuffer` the caller created) to a reserved region.
    /// Fails if the region is free or already has one; the caller then destroys `payload`.
    pub(crate) fn set_payload(&mut self, id: RegionId, payload: T) -> Result<(), RegionError> {
        let r = self.in_use_mut(id)?;
        if r.payload.is_some() {
            return Err(RegionError::PayloadPresent {
                id,
                offset: r.offset,
                size: r.size,
            });
        }
        r.payload = Some(payload);
        Ok(())
    }

    /// One more user (a crop or slice view). Returns the new use count.
    pub(crate) fn retain(&mut self, id: RegionId) -> Result<u32, RegionError> {
        let r = self.in_use_mut(id)?;
        r.use_count = r
            .use_count
            .checked_add(1)
            .ok_or(RegionError::TooManyUsers {
                id,
                offset: r.offset,
                size: r.size,
            })?;
        Ok(r.use_count)
    }

    /// One user less. At zero the region becomes free and keeps its payload for reuse
    /// (Halide's `release`), within the bound of [`MAX_CACHED_SIZES`]: past it, either
    /// this payload or those of the size least recently released are evicted, to be
    /// handed back by the next `reserve`, `collect` or `drain`, and their regions merge
    /// with free neighbours without payload. A region released without payload is left
    /// as it is (see the module documentation). Returns the new use count.
    pub(crate) fn release(&mut self, id: RegionId) -> Result<u32, RegionError> {
        let r = self.in_use_mut(id)?;
        r.use_count -= 1;
        let (count, size, kept) = (r.use_count, r.size, r.payload.is_some());
        if count == 0 {
            self.reserved -= size;
            if kept {
                self.cache(id.slot);
            } else {
                self.push_free(id.slot);
            }
        }
        Ok(count)
    }

    /// Like [`release`](Self::release), but at zero the payload is returned for the
    /// caller to destroy (Halide's `reclaim`), and the region is left as it is, without
    /// payload. Returns the new use count and, at zero, the payload.
    pub(crate) fn reclaim(&mut self, id: RegionId) -> Result<(u32, Option<T>), RegionError> {
        let r = self.in_use_mut(id)?;
        r.use_count -= 1;
        if r.use_count > 0 {
            return Ok((r.use_count, None));
        }
        let payload = r.payload.take();
        self.reserved -= r.size;
        self.push_free(id.slot);
        Ok((0, payload))
    }

    /// Merges runs of adjacent free regions; returns the payloads the merged regions
    /// kept, and those evicted earlier and not yet handed back, to destroy. Afterwards
    /// no two free regions are adjacent. A free region with no free neighbour keeps
    /// its payload.
    pub(crate) fn collect(&mut self) -> Vec<T> {
        let mut s = self.head;
        while s != NONE {
            if !self.region(s).is_free() {
                s = self.region(s).next;
                continue;
            }
            let mut last = s;
            loop {
                let n = self.region(last).next;
                if n == NONE || !self.region(n).is_free() {
                    break;
                }
                last = n;
            }
            if last != s {
                self.merge_run(s, last);
                self.push_free(s);
            }
            s = self.region(s).next;
        }
        std::mem::take(&mut self.evicted)
    }

    /// Every payload, in use, kept or evicted, for teardown. Afterwards the block is
    /// one free region again and every handle is stale.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut out = std::mem::take(&mut self.evicted);
        for slot in &mut self.slots {
            if let Some(r) = slot.region.take() {
                out.extend(r.payload);
                slot.generation += 1;
            }
        }
        self.vacant = (0..self.slots.len() as u32).rev().collect();
        self.head = NONE;
        self.free.clear();
        self.classes.clear();
        self.hint = [0; HINT];
        self.ghosts = [0; GHOSTS];
        self.ghost_next = 0;
        self.reserved = 0;
        self.insert_whole_block();
        out
    }

    fn insert_whole_block(&mut self) {
        if self.size > 0 {
            let s = self.new_slot(0, self.size);
            self.head = s;
            self.push_free(s);
        }
    }

    /// The slots of the regions, in offset order.
    fn order(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors((self.head != NONE).then_some(self.head), move |&s| {
            let n = self.region(s).next;
            (n != NONE).then_some(n)
        })
    }

    /// The region of a slot in the offset list.
    fn region(&self, slot: u32) -> &Region<T> {
        self.slots[slot as usize]
            .region
            .as_ref()
            .expect("linked slots hold a region")
    }

    fn region_mut(&mut self, slot: u32) -> &mut Region<T> {
        self.slots[slot as usize]
            .region
            .as_mut()
            .expect("linked slots hold a region")
    }

    /// A slot holding a free region without payload, linked nowhere and in no index.
    fn new_slot(&mut self, offset: u64, size: u64) -> u32 {
        let region = Region {
            offset,
            size,
            use_count: 0,
            payload: None,
            prev: NONE,
            next: NONE,
            pos: NONE,
            cprev: NONE,
            cnext: NONE,
        };
        match self.vacant.pop() {
            Some(s) => {
                self.slots[s as usize].region = Some(region);
                s
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    region: Some(region),
                });
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Unlinks the region of `slot` from the offset list (it must be in no index) and
    /// empties the slot; its handles become stale. Returns its size and payload.
    fn remove_slot(&mut self, slot: u32) -> (u64, Option<T>) {
        let s = &mut self.slots[slot as usize];
        let r = s.region.as_mut().expect("linked slots hold a region");
        let (prev, next, size) = (r.prev, r.next, r.size);
        let payload = r.payload.take();
        s.region = None;
        s.generation += 1;
        self.vacant.push(slot);
        if prev != NONE {
            self.region_mut(prev).next = next;
        } else {
            self.head = next;
        }
        if next != NONE {
            self.region_mut(next).prev = prev;
        }
        (size, payload)
    }

    /// Links the region of `new` into the offset list right before `at`.
    fn link_before(&mut self, new: u32, at: u32) {
        let prev = self.region(at).prev;
        self.link_between(new, prev, at);
    }

    /// Links the region of `new` into the offset list right after `at`.
    fn link_after(&mut self, new: u32, at: u32) {
        let next = self.region(at).next;
        self.link_between(new, at, next);
    }

    /// Links the region of `new` between `prev` and `next`, neighbours in the
    /// offset list (`NONE` at its ends).
    fn link_between(&mut self, new: u32, prev: u32, next: u32) {
        let r = self.region_mut(new);
        (r.prev, r.next) = (prev, next);
        if next != NONE {
            self.region_mut(next).prev = new;
        }
        if prev != NONE {
            self.region_mut(prev).next = new;
        } else {
            self.head = new;
        }
    }

    /// Adds the free region without payload of `slot` (in no index) to `free`.
    fn push_free(&mut self, slot: u32) {
        let pos = self.free.len() as u32;
        let r = self.region_mut(slot);
        debug_assert!(r.is_plain());
        r.pos = pos;
        let e = FreeEntry {
            offset: r.offset,
            end: r.end(),
            slot,
        };
        self.free.push(e);
    }

    /// Takes the free region without payload of `slot` out of `free`.
    fn unfree(&mut self, slot: u32) {
        let pos = self.region(slot).pos;
        debug_assert_eq!(self.free[pos as usize].slot, slot);
        self.free.swap_remove(pos as usize);
        if let Some(moved) = self.free.get(pos as usize).map(|e| e.slot) {
            self.region_mut(moved).pos = pos;
        }
        self.region_mut(slot).pos = NONE;
    }

    /// Makes the free region of `slot`, whose payload is gone (or never was), part of
    /// the free space: merged with its free neighbours without payload (the merged
    /// regions' handles become stale), and listed in `free`. It must be in no index.
    fn add_free(&mut self, slot: u32) {
        let (prev, next) = {
            let r = self.region(slot);
            debug_assert!(r.is_plain());
            (r.prev, r.next)
        };
        let mut keep = slot;
        let mut listed = false;
        if prev != NONE && self.region(prev).is_plain() {
            let (size, _) = self.remove_slot(slot);
            self.region_mut(prev).size += size;
            self.slots[prev as usize].generation += 1;
            keep = prev;
            listed = true;
        }
        if next != NONE && self.region(next).is_plain() {
            self.unfree(next);
            let (size, _) = self.remove_slot(next);
            self.region_mut(keep).size += size;
            self.slots[keep as usize].generation += 1;
        }
        if listed {
            let r = self.region(keep);
            let end = r.end();
            let pos = r.pos;
            self.free[pos as usize].end = end;
        } else {
            self.push_free(keep);
        }
    }

    /// Keeps the free region of `slot`, which has a payload, for reuse, if its size is
    /// cached already or there is room for it; when the cache is full, only if its
    /// size was refused lately, in place of the size least recently released.
    /// Otherwise its payload is evicted and it merges with its free neighbours.
    fn cache(&mut self, slot: u32) {
        let size = self.region(slot).size;
        let h = hint_index(size);
        let found = if self.hint[h] == 0 {
            None
        } else {
            self.classes.iter().position(|c| c.size == size)
        };
        let head = match found {
            Some(i) => {
                // The class moves to the end: `classes` is in order of the latest release.
                self.classes[i..].rotate_left(1);
                let c = self.classes.last_mut().expect("just found");
                let head = c.head;
                c.head = slot;
                c.len += 1;
                head
            }
            None => {
                if self.classes.len() >= MAX_CACHED_SIZES {
                    match self.ghosts.iter().position(|&g| g == size) {
                        Some(g) => {
                            self.ghosts[g] = 0;
                            self.evict_class(0);
                        }
                        None => {
                            self.ghosts[self.ghost_next] = size;
                            self.ghost_next = (self.ghost_next + 1) % GHOSTS;
                            let payload = self.region_mut(slot).payload.take();
                            self.evicted.extend(payload);
                            self.add_free(slot);
                            return;
                        }
                    }
                }
                self.hint[h] += 1;
                self.classes.push(SizeClass {
                    size,
                    head: slot,
                    len: 1,
                });
                NONE
            }
        };
        {
            let r = self.region_mut(slot);
            r.cprev = NONE;
            r.cnext = head;
        }
        if head != NONE {
            self.region_mut(head).cprev = slot;
        }
    }

    /// Evicts the payloads of every region of the `i`th size class; the regions merge
    /// with their free neighbours without payload.
    fn evict_class(&mut self, i: usize) {
        let class = self.classes.remove(i);
        self.hint[hint_index(class.size)] -= 1;
        let mut s = class.head;
        while s != NONE {
            let r = self.region_mut(s);
            let next = r.cnext;
            r.cprev = NONE;
            r.cnext = NONE;
            let payload = r.payload.take();
            self.evicted.extend(payload);
            self.add_free(s);
            s = next;
        }
    }

    /// Takes the cached region of `slot` out of its size class (keeping its payload).
    fn uncache(&mut self, slot: u32) {
        let (size, prev, next) = {
            let r = self.region_mut(slot);
            let links = (r.size, r.cprev, r.cnext);
            r.cprev = NONE;
            r.cnext = NONE;
            links
        };
        if prev != NONE {
            self.region_mut(prev).cnext = next;
        }
        if next != NONE {
            self.region_mut(next).cprev = prev;
        }
        let i = self
            .classes
            .iter()
            .position(|c| c.size == size)
            .expect("a cached region has a size class");
        let c = &mut self.classes[i];
        if prev == NONE {
            c.head = next;
        }
        c.len -= 1;
        if c.len == 0 {
            self.classes.remove(i);
            self.hint[hint_index(size)] -= 1;
        }
    }

    /// Takes the free region of `slot` out of whichever index lists it.
    fn unindex(&mut self, slot: u32) {
        if self.region(slot).payload.is_some() {
            self.uncache(slot);
        } else {
            self.unfree(slot);
        }
    }

    /// Where `want` bytes at `align` fit in the run of free regions that starts at
    /// `first`, and the last region of the shortest prefix that holds them. If the run
    /// does not fit from its start, no later start in it does (same end).
    fn run_fit(&self, first: u32, align: u64, want: u64) -> Option<(u64, u32)> {
        let start = self.region(first).offset;
        let mut s = first;
        while s != NONE {
            let r = self.region(s);
            if !r.is_free() {
                return None;
            }
            if let Some(at) = fit(start, r.end(), align, want) {
                return Some((at, s));
            }
            s = r.next;
        }
        None
    }

    /// Merges the adjacent free regions `first..=last` into `first`, their payloads
    /// evicted. The result is in no index.
    fn merge_run(&mut self, first: u32, last: u32) {
        self.unindex(first);
        let payload = self.region_mut(first).payload.take();
        self.evicted.extend(payload);
        while self.region(first).next != NONE && first != last {
            let s = self.region(first).next;
            self.unindex(s);
            let (size, payload) = self.remove_slot(s);
            self.evicted.extend(payload);
            self.region_mut(first).size += size;
            if s == last {
                break;
            }
        }
        // Handles of the first region's last reservation name a region that is gone.
        self.slots[first as usize].generation += 1;
    }

    /// Reserves `at..at + want` inside the free region of `slot` (in no index),
    /// splitting off the front and back as free regions. A payload kept there comes
    /// back as `cached` if the region is exactly `at..at + want`, and is evicted
    /// otherwise. Hands back every evicted payload.
    fn carve(&mut self, slot: u32, at: u64, want: u64) -> Reservation<T>
    where
        T: Clone,
    {
        let r = self.region_mut(slot);
        let (offset, end) = (r.offset, r.end());
        let exact = at == offset && at + want == end;
        let cached = if exact {
            r.payload.clone()
        } else {
            let payload = r.payload.take();
            self.evicted.extend(payload);
            None
        };
        let r = self.region_mut(slot);
        r.offset = at;
        r.size = want;
        r.use_count = 1;
        if at > offset {
            let front = self.new_slot(offset, at - offset);
            self.link_before(front, slot);
            self.add_free(front);
        }
        if at + want < end {
            let back = self.new_slot(at + want, end - (at + want));
            self.link_after(back, slot);
            self.add_free(back);
        }
        self.reserved_at(slot, at, want, cached)
    }

    /// Like [`carve`](Self::carve), for the free region without payload of `slot`, still
    /// in `free`. Unless it is taken whole, the reserved part gets a new slot and the
    /// free part left before (or else after) it keeps the slot and its entry in `free`:
    /// no entry is removed or added, except for the back piece when both are left.
    fn carve_plain(&mut self, slot: u32, at: u64, want: u64) -> Reservation<T>
    where
        T: Clone,
    {
        let (offset, end, pos) = {
            let r = self.region(slot);
            (r.offset, r.end(), r.pos as usize)
        };
        if at == offset && at + want == end {
            self.unfree(slot);
            return self.carve(slot, at, want);
        }
        let taken = self.new_slot(at, want);
        self.region_mut(taken).use_count = 1;
        // Handles of the free region's last reservation name a region that is gone.
        self.slots[slot as usize].generation += 1;
        if at == offset {
            self.link_before(taken, slot);
            let r = self.region_mut(slot);
            r.offset = at + want;
            r.size = end - (at + want);
            self.free[pos].offset = at + want;
        } else {
            self.link_after(taken, slot);
            self.region_mut(slot).size = at - offset;
            self.free[pos].end = at;
            if at + want < end {
                let back = self.new_slot(at + want, end - (at + want));
                self.link_after(back, taken);
                self.add_free(back);
            }
        }
        self.reserved_at(taken, at, want, None)
    }

    /// The reservation of the region of `slot`, now in use at `at..at + want`, with
    /// every evicted payload not yet handed back.
    fn reserved_at(&mut self, slot: u32, at: u64, want: u64, cached: Option<T>) -> Reservation<T> {
        let s = &mut self.slots[slot as usize];
        s.generation += 1;
        self.reserved += want;
        Reservation {
            id: RegionId {
                slot,
                generation: s.generation,
            },
            offset: at,
            size: want,
            cached,
            evicted: std::mem::take(&mut self.evicted),
        }
    }

    fn get(&self, id: RegionId) -> Result<&Region<T>, RegionError> {
        self.slots
            .get(id.slot as usize)
            .filter(|s| s.generation == id.generation)
            .and_then(|s| s.region.as_ref())
            .ok_or(RegionError::UnknownRegion(id))
    }

    fn get_mut(&mut self, id: RegionId) -> Result<&mut Region<T>, RegionError> {
        self.slots
            .get_mut(id.slot as usize)
            .filter(|s| s.generation == id.generation)
            .and_then(|s| s.region.as_mut())
            .ok_or(RegionError::UnknownRegion(id))
    }

    fn in_use(&self, id: RegionId) -> Result<&Region<T>, RegionError> {
        let r = self.get(id)?;
        r.check_in_use(id)?;
        Ok(r)
    }

    fn in_use_mut(&mut self, id: RegionId) -> Result<&mut Region<T>, RegionError> {
        let r = self.get_mut(id)?;
        r.check_in_use(id)?;
        Ok(r)
    }
}
#[cfg(test)]
mod tests;
