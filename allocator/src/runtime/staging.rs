//! Staging through a ring: a few host-visible chunks per direction, allocated on
//! first use and reused by every copy, with one submission lane each. A copy is
//! cut into windows of at most one chunk; the GPU copies window i+1 while CPU
//! threads (a pool kept for the process) copy window i in or out, so staging
//! memory is bounded by the ring, not by the copy, and a small copy allocates
//! nothing.
//!
//! Staging is packed densely in the plan's chunk order, so the host side and the
//! GPU side of a window use the same layout.

use std::collections::VecDeque;
use std::sync::{Arc, MutexGuard};

use ash::vk;

use crate::error::Result;
use crate::memory::policy::Role;
use crate::runtime::context::Context;
use crate::runtime::plan::{ChunkOffsets, CopyPlan};
use crate::runtime::transfer::MAX_REGIONS_PER_CALL;
use crate::vk::region::Region;
use crate::vk::submit::{HostAccess, Submitter, KEPT_REGIONS, LANES};

/// Bytes of one staging chunk (the largest window of a copy).
pub(crate) const CHUNK: u64 = 32 << 20;

/// Copies up to this many bytes are one window: below it, the cost of a
/// submission per window outweighs what the overlap saves.
const ONE_WINDOW_MAX: u64 = 8 << 20;

/// The smallest window of a longer copy.
const WINDOW_MIN: u64 = 4 << 20;

/// Bytes below which one thread copies a window's host side.
const BYTES_PER_THREAD: u64 = 256 << 10;

/// Most threads that copy one window's host side.
const MAX_THREADS: usize = 16;

/// Pieces (copy regions) per window, so per submission: a layout that cannot be
/// merged records one region per element. Under the validation layer the cost of
/// a command buffer grows with the square of its regions, so windows hold few.
const MAX_PIECES: usize = 4096;

/// [`MAX_PIECES`] under the validation layer.
const MAX_PIECES_VALIDATED: usize = 64;

/// One contiguous piece of a window: `len` bytes at `src` and `dst` (offsets of
/// the plan) and at `slot` in the staging chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    src: u64,
    dst: u64,
    slot: u64,
    len: u64,
}

/// Cuts a plan's chunks, in dense order, into windows of `window` bytes and at
/// most `max_pieces` pieces.
struct Windows<'a> {
    chunks: ChunkOffsets<'a>,
    chunk: u64,
    window: u64,
    max_pieces: usize,
    /// The rest of a chunk that the last window cut: src, dst, bytes left.
    carry: Option<(u64, u64, u64)>,
}

impl<'a> Windows<'a> {
    fn new(plan: &'a CopyPlan, window: u64, max_pieces: usize) -> Self {
        Windows {
            chunks: plan.chunk_offsets(),
            chunk: plan.chunk,
            window,
            max_pieces,
            carry: None,
        }
    }

    /// About how many windows `plan` takes: at least this many, for the ring's
    /// size (more windows than chunks in the ring reuse the chunks in turn).
    fn estimate(plan: &CopyPlan, window: u64, max_pieces: usize) -> usize {
        let by_bytes = plan.bytes().div_ceil(window);
        let by_pieces = plan.chunks().div_ceil(max_pieces as u64);
        by_bytes.max(by_pieces) as usize
    }
}

impl Iterator for Windows<'_> {
    type Item = Vec<Piece>;

    fn next(&mut self) -> Option<Vec<Piece>> {
        let mut pieces = Vec::new();
        let mut used = 0;
        while used < self.window && pieces.len() < self.max_pieces {
            let (src, dst, len) = match self.carry.take() {
                Some(c) => c,
                None => match self.chunks.next() {
                    Some((s, d)) => (s, d, self.chunk),
                    None => break,
                },
            };
            let take = len.min(self.window - used);
            pieces.push(Piece {
                src,
                dst,
                slot: used,
                len: take,
            });
            used += take;
            if take < len {
                self.carry = Some((src + take, dst + take, len - take));
            }
        }
        (!pieces.is_empty()).then_some(pieces)
    }
}

/// A pointer that threads copying disjoint ranges may share.
#[derive(Clone, Copy)]
struct Shared(*mut u8);
// SAFETY: only used by `host_copy`, whose threads touch disjoint destination bytes.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    /// The pointer; a method, so that closures capture the whole `Shared`.
    fn get(self) -> *mut u8 {
        self.0
    }
}

/// Copies each piece on the host, `len` bytes from `from + offset(piece).0` to
/// `to + offset(piece).1`, on several threads when the destinations are disjoint
/// and the window is large.
///
/// # Safety
/// Every range must lie inside its allocation, and nothing else may access the
/// destination ranges meanwhile; with `disjoint`, no two pieces' destinations overlap.
unsafe fn host_copy(
    pieces: &[Piece],
    from: *const u8,
    to: *mut u8,
    offsets: impl Fn(&Piece) -> (u64, u64) + Sync,
    disjoint: bool,
) {
    let bytes: u64 = pieces.iter().map(|p| p.len).sum();
    let threads = match disjoint {
        true => (bytes / BYTES_PER_THREAD).clamp(1, threads() as u64) as usize,
        false => 1,
    };
    let (from, to) = (Shared(from as *mut u8), Shared(to));
    let copy = |part: &[Piece]| {
        for p in part {
            let (f, t) = offsets(p);
            // SAFETY: the caller guarantees both ranges and their exclusive use.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    from.get().add(f as usize),
                    to.get().add(t as usize),
                    p.len as usize,
                )
            };
        }
    };
    let pool = match pool() {
        Some(pool) if threads > 1 => pool,
        _ => return copy(pieces),
    };
    let parts = split(pieces, bytes.div_ceil(threads as u64));
    pool.scope(|s| {
        for part in &parts {
            s.spawn(|_| copy(part));
        }
    });
}

/// Splits pieces into parts of about `share` bytes each, cutting pieces as needed.
fn split(pieces: &[Piece], share: u64) -> Vec<Vec<Piece>> {
    let mut parts = vec![Vec::new()];
    let mut room = share;
    for &p in pieces {
        let mut p = p;
        while p.len > 0 {
            if room == 0 {
                parts.push(Vec::new());
                room = share;
            }
            let take = p.len.min(room);
            parts
                .last_mut()
                .expect("one part")
                .push(Piece { len: take, ..p });
            p = Piece {
                src: p.src + take,
                dst: p.dst + take,
                slot: p.slot + take,
                len: p.len - take,
            };
            room -= take;
        }
    }
    parts
}

/// The window a copy of `bytes` is cut into: the whole copy up to
/// [`ONE_WINDOW_MAX`], else a quarter of it, so that the GPU and the CPU overlap
/// on mid-sized copies too, from [`WINDOW_MIN`] to [`CHUNK`].
fn window(bytes: u64) -> u64 {
    if bytes <= ONE_WINDOW_MAX {
        return bytes.max(1);
    }
    bytes
        .div_ceil(4)
        .next_multiple_of(1 << 20)
        .clamp(WINDOW_MIN, CHUNK)
}

/// Threads this machine runs at once, at most [`MAX_THREADS`].
fn threads() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_THREADS)
    })
}

/// The threads that copy windows' host sides, started on first use: starting
/// threads per window would cost as much as a small window's copy.
fn pool() -> Option<&'static rayon_core::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon_core::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon_core::ThreadPoolBuilder::new()
            .num_threads(threads())
            .thread_name(|i| format!("vkcopy-staging-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Records GPU copies of `pieces`, offsets of each side from `offsets`.
/// The first word of a key of [`record_pieces`]'s recordings.
const KEY_PIECES: u64 = 2;

/// What [`record_pieces`] records, as a key of the recording
/// (`Submitter::run_kept`), for a window of few pieces.
fn pieces_key(
    pieces: &[Piece],
    buffers: (vk::Buffer, vk::Buffer),
    offsets: impl Fn(&Piece) -> (u64, u64),
) -> Option<Vec<u64>> {
    use ash::vk::Handle;
    if pieces.len() > KEPT_REGIONS {
        return None;
    }
    let mut key = vec![KEY_PIECES, buffers.0.as_raw(), buffers.1.as_raw()];
    for p in pieces {
        let (s, d) = offsets(p);
        key.extend([s, d, p.len]);
    }
    Some(key)
}

fn record_pieces(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    pieces: &[Piece],
    buffers: (vk::Buffer, vk::Buffer),
    offsets: impl Fn(&Piece) -> (u64, u64),
) {
    for batch in pieces.chunks(MAX_REGIONS_PER_CALL) {
        let regions: Vec<vk::BufferCopy> = batch
            .iter()
            .map(|p| {
                let (s, d) = offsets(p);
                vk::BufferCopy {
                    src_offset: s,
                    dst_offset: d,
                    size: p.len,
                }
            })
            .collect();
        // SAFETY: both buffers are alive for the submission; the caller checked that
        // every region lies inside them.
        unsafe { device.cmd_copy_buffer(cmd, buffers.0, buffers.1, &regions) };
    }
}

/// The chunks of a ring, held while a copy uses them.
type Ring<'a> = MutexGuard<'a, Vec<Arc<Region>>>;

impl Context {
    /// Pieces per window on this context.
    pub(crate) fn max_pieces(&self) -> usize {
        match self.inner.device.instance.validation {
            true => MAX_PIECES_VALIDATED,
            false => MAX_PIECES,
        }
    }

    /// The ring of `role` with at least `n` chunks that hold a window of
    /// `window` bytes: a power of two from 1 MiB to [`CHUNK`], so that small
    /// copies keep small chunks and growing copies reallocate them a few times.
    fn ring(&self, role: Role, n: usize, window: u64) -> Result<Ring<'_>> {
        let size = window.next_power_of_two().clamp(1 << 20, CHUNK);
        self.inner
            .staging
            .ring(&self.inner.allocator, role, n, size)
    }

    /// The window size for `plan`, its number of windows, and the ring of
    /// `role` that holds them.
    fn ring_for(&self, plan: &CopyPlan, role: Role) -> Result<(u64, usize, Ring<'_>)> {
        let window = window(plan.bytes());
        let windows = Windows::estimate(plan, window, self.max_pieces());
        let slots = self.ring(role, windows.min(LANES), window)?;
        Ok((window, windows, slots))
    }

    /// Device to host through the readback ring: `plan` from `src` (buffer, byte
    /// offset) to `dst`, host bytes at the plan's destination offsets. Returns the
    /// GPU time in ns when profiling.
    pub(crate) fn readback_staged(
        &self,
        sub: &Submitter,
        plan: &CopyPlan,
        src: (vk::Buffer, u64),
        dst: &mut [u8],
    ) -> Result<Option<u64>> {
        let (window, windows, slots) = self.ring_for(plan, Role::Readback)?;
        let n = slots.len().min(windows).max(1);
        let device = &self.raw_device();
        let disjoint = plan.dst_disjoint();
        let mut lanes = sub.lanes(self.inner.profile.enabled());
        // (lane, slot, pieces): a copy of one window goes on the kept command
        // buffer of its recording, if any.
        let mut queued: VecDeque<(usize, usize, Vec<Piece>)> = VecDeque::new();
        let drain = |lane: usize, pieces: Vec<Piece>, dst: &mut [u8]| -> Result<()> {
            let slot = &slots[lane];
            let used = pieces.iter().map(|p| p.slot + p.len).max().unwrap_or(0);
            self.invalidate(&slot.alloc, 0, used)?;
            let from = slot.host_ptr()?.as_ptr();
            // SAFETY: the lane was waited for, so the GPU is done with the chunk; its
            // `used` bytes are mapped; destinations lie in `dst` (checked by the
            // caller against the plan) and `dst` is borrowed exclusively.
            unsafe {
                host_copy(
                    &pieces,
                    from,
                    dst.as_mut_ptr(),
                    |p| (p.slot, p.dst),
                    disjoint,
                )
            };
            Ok(())
        };
        let mut all = Windows::new(plan, window, self.max_pieces())
            .enumerate()
            .peekable();
        while let Some((w, pieces)) = all.next() {
            let last = all.peek().is_none();
            let lane = w % n;
            if queued.len() == n {
                let (l, s, done) = queued.pop_front().expect("queued");
                lanes.wait(l)?;
                drain(s, done, dst)?;
            }
            let buffers = (src.0, slots[lane].vk_buffer());
            let offsets = |p: &Piece| (src.1 + p.src, p.slot);
            let key = (windows == 1).then(|| pieces_key(&pieces, buffers, offsets));
            let used = lanes.submit_on(lane, last, key.flatten(), |cmd| {
                record_pieces(device, cmd, &pieces, buffers, offsets)
            })?;
            queued.push_back((used, lane, pieces));
        }
        while let Some((l, s, done)) = queued.pop_front() {
            lanes.wait(l)?;
            drain(s, done, dst)?;
        }
        lanes.finish()
    }

    /// Host to device through the upload ring: `plan` from host bytes `src` (at the
    /// plan's source offsets) to `dst` (buffer, byte offset), ending with a barrier
    /// to the host where `access` says the host touches `dst` next.
    pub(crate) fn upload_staged(
        &self,
        sub: &Submitter,
        plan: &CopyPlan,
        src: &[u8],
        dst: (vk::Buffer, u64),
        access: HostAccess,
    ) -> Result<Option<u64>> {
        let (window, windows, slots) = self.ring_for(plan, Role::Upload)?;
        let n = slots.len().min(windows).max(1);
        let device = &self.raw_device();
        let mut lanes = sub.lanes(self.inner.profile.enabled());
        lanes.host_access(access);
        let mut all = Windows::new(plan, window, self.max_pieces())
            .enumerate()
            .peekable();
        while let Some((w, pieces)) = all.next() {
            let last = all.peek().is_none();
            let lane = w % n;
            lanes.wait(lane)?;
            let slot = &slots[lane];
            let to = slot.host_ptr()?.as_ptr();
            // SAFETY: the lane was waited for, so the GPU no longer reads the chunk;
            // pieces lie in the chunk (at most CHUNK bytes) and in `src` (checked by
            // the caller); the chunk's bytes are written once each (dense layout).
            unsafe { host_copy(&pieces, src.as_ptr(), to, |p| (p.src, p.slot), true) };
            let used = pieces.iter().map(|p| p.slot + p.len).max().unwrap_or(0);
            self.flush(&slot.alloc, 0, used)?;
            let buffers = (slot.vk_buffer(), dst.0);
            let offsets = |p: &Piece| (p.slot, dst.1 + p.dst);
            let key = (windows == 1).then(|| pieces_key(&pieces, buffers, offsets));
            lanes.submit_on(lane, last, key.flatten(), |cmd| {
                record_pieces(device, cmd, &pieces, buffers, offsets)
            })?;
        }
        lanes.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{dense_dims, Dim};

    fn dim(extent: i64, stride: i64) -> Dim {
        Dim {
            min: 0,
            extent,
            stride,
        }
    }

    fn plan(src: &[Dim], dst: &[Dim], eb: usize) -> CopyPlan {
        CopyPlan::new(src, dst, eb).unwrap()
    }

    /// Every byte of the plan once, in dense order, whatever the window.
    fn check_windows(p: &CopyPlan, window: u64) {
        let mut expect = Vec::new();
        p.for_each_chunk(|s, d| {
            for i in 0..p.chunk {
                expect.push((s + i, d + i));
            }
        });
        let mut got = Vec::new();
        let mut count = 0;
        for pieces in Windows::new(p, window, usize::MAX) {
            count += 1;
            let mut slot = 0;
            for piece in &pieces {
                assert_eq!(piece.slot, slot, "pieces fill the window in order");
                slot += piece.len;
                for i in 0..piece.len {
                    got.push((piece.src + i, piece.dst + i));
                }
            }
            assert!(slot <= window);
        }
        assert_eq!(got, expect);
        assert_eq!(count as u64, p.bytes().div_ceil(window));
    }

    #[test]
    fn windows_grow_with_the_copy_up_to_a_chunk() {
        assert_eq!(window(0), 1);
        assert_eq!(window(4096), 4096);
        assert_eq!(window(ONE_WINDOW_MAX), ONE_WINDOW_MAX);
        assert_eq!(window(ONE_WINDOW_MAX + 1), WINDOW_MIN);
        assert_eq!(window(64 << 20), 16 << 20);
        assert_eq!(window((64 << 20) + 1), 17 << 20);
        assert_eq!(window(1 << 30), CHUNK);
        for bytes in [ONE_WINDOW_MAX + 1, 100 << 20, 1 << 40] {
            assert!(
                bytes.div_ceil(window(bytes)) >= 3,
                "{bytes}: at least 3 windows overlap"
            );
        }
    }

    #[test]
    fn windows_cover_the_plan_once() {
        let dense = plan(&dense_dims(&[100, 30]), &dense_dims(&[100, 30]), 4);
        for w in [1, 7, 400, 4096, 12_000, 1 << 20] {
            check_windows(&dense, w);
        }
        let strided = [
            Dim {
                min: 3,
                extent: 50,
                stride: 2,
            },
            dim(9, 200),
        ];
        let p = plan(&strided, &dense_dims(&[60, 9]), 2);
        for w in [2, 3, 98, 100, 101, 1000] {
            check_windows(&p, w);
        }
        assert!(Windows::new(&CopyPlan::empty(), 64, 8).next().is_none());
    }

    #[test]
    fn windows_hold_at_most_max_pieces() {
        // u8 with gaps: one piece per element; 1000 of them in windows of 64 pieces.
        let gaps = [Dim {
            min: 0,
            extent: 1000,
            stride: 2,
        }];
        let p = plan(&gaps, &gaps, 1);
        let sizes: Vec<usize> = Windows::new(&p, CHUNK, 64).map(|w| w.len()).collect();
        assert_eq!(sizes.len(), 16);
        assert!(sizes[..15].iter().all(|&n| n == 64));
        assert_eq!(sizes[15], 1000 - 15 * 64);
        assert!(Windows::estimate(&p, CHUNK, 64) >= 16);
        let offsets: Vec<u64> = Windows::new(&p, CHUNK, 64)
            .flatten()
            .map(|x| x.src)
            .collect();
        assert_eq!(offsets, (0..1000).map(|i| 2 * i).collect::<Vec<_>>());
    }

    #[test]
    fn split_keeps_every_byte_in_order() {
        let pieces = [
            Piece {
                src: 0,
                dst: 100,
                slot: 0,
                len: 10,
            },
            Piece {
                src: 50,
                dst: 300,
                slot: 10,
                len: 3,
            },
        ];
        let parts = split(&pieces, 4);
        assert_eq!(parts.len(), 4);
        let flat: Vec<Piece> = parts.concat();
        assert_eq!(flat.iter().map(|p| p.len).sum::<u64>(), 13);
        assert_eq!(
            flat[2],
            Piece {
                src: 8,
                dst: 108,
                slot: 8,
                len: 2
            }
        );
        assert_eq!(
            flat[3],
            Piece {
                src: 50,
                dst: 300,
                slot: 10,
                len: 2
            }
        );
        assert!(parts
            .iter()
            .all(|p| p.iter().map(|x| x.len).sum::<u64>() <= 4));
    }

    #[test]
    fn overlapping_destinations_are_not_disjoint() {
        let dense = plan(&dense_dims(&[8, 8]), &dense_dims(&[8, 8]), 4);
        assert!(dense.dst_disjoint());
        // Rows of 8 elements every 4: each row overlaps the next. (A stride of 0
        // keeps one element, so it overlaps nothing.)
        let bcast = [dim(8, 1), dim(8, 4)];
        assert!(!plan(&dense_dims(&[8, 8]), &bcast, 4).dst_disjoint());
        let gaps = [dim(8, 2), dim(8, 16)];
        assert!(plan(&dense_dims(&[8, 8]), &gaps, 4).dst_disjoint());
        let interleaved = [dim(8, 2), dim(2, 1)];
        assert!(plan(&dense_dims(&[8, 2]), &interleaved, 4).dst_disjoint());
    }
}
