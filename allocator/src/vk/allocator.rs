//! The device allocator. For each request the policy ranks the memory types;
//! the allocator takes a region of an existing block of the first type that has
//! room, or allocates a new block, and moves to the next type when
//! `vkAllocateMemory` runs out of memory or the heap is full even after its empty
//! blocks went back to the driver. Blocks are pooled
//! per memory type (Halide's `BlockAllocator` and `RegionAllocator`,
//! `src/runtime/internal/`); each region has its own `VkBuffer` bound at its
//! offset, kept for reuse when the region is released. Blocks come from the
//! table's heaps (`vk::heaps`): the device's, or a recorded table's on top of
//! them, which also say how much room a heap has. A buffer the driver prefers or
//! requires in memory of its own (`VkMemoryDedicatedRequirements`) gets a
//! dedicated block allocated for it, as does a request larger than the pool's
//! blocks; dedicated blocks are freed when their region is released.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::memory::block::{BlockId, BlockPool, Placement as PoolPlacement};
use crate::memory::config::AllocConfig;
use crate::memory::policy::{MemoryRequest, Policy, Role};
use crate::memory::region::{round_up, RegionId, Reservation};
use crate::memory::room::NoRoom;
use crate::memory::table::MemoryTable;
use crate::stats::Placement;
use crate::vk::device::DeviceShared;
use crate::vk::heaps::{CallError, Heaps, MemoryBlock};
use crate::vk::simulate::{self, Shadow};

/// Usage of every buffer the runtime creates: storage and uniform buffers for
/// kernels, both transfer ends.
pub(crate) const BUFFER_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::UNIFORM_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// A region handed to the runtime: a `VkBuffer` bound at `offset` of a block.
#[derive(Debug)]
pub(crate) struct Allocation {
    pub(crate) buffer: vk::Buffer,
    pub(crate) memory: vk::DeviceMemory,
    /// Bytes from the start of the `VkDeviceMemory`.
    pub(crate) offset: u64,
    /// Bytes asked for.
    pub(crate) size: u64,
    /// Bytes of the `VkDeviceMemory` (for clamping flush ranges).
    pub(crate) memory_size: u64,
    /// Index in the table the allocator selects from.
    pub(crate) memory_type: u32,
    pub(crate) flags: vk::MemoryPropertyFlags,
    /// Host address of the region's first byte, when host-visible.
    pub(crate) mapped: Option<NonNull<u8>>,
    /// Set for simulated non-coherent memory: addresses of the region's first byte.
    pub(crate) shadow: Option<Shadow>,
    pub(crate) role: Role,
    /// The block and region this came from; None for a wrapped native buffer,
    /// which the allocator does not own.
    owner: Option<(BlockId, RegionId)>,
}

// SAFETY: the mapped pointers are only dereferenced by the runtime while it holds
// the allocation exclusively (staging) or during copies it serialises.
unsafe impl Send for Allocation {}
// SAFETY: as above.
unsafe impl Sync for Allocation {}

impl Allocation {
    /// A `VkBuffer` the caller made and owns, seen as device memory of `size` bytes
    /// in memory type `memory_type` (of the device's table) with `flags`.
    pub(crate) fn wrapped(
        buffer: vk::Buffer,
        size: u64,
        memory_type: u32,
        flags: vk::MemoryPropertyFlags,
    ) -> Self {
        Allocation {
            buffer,
            memory: vk::DeviceMemory::null(),
            offset: 0,
            size,
            memory_size: size,
            memory_type,
            // Never mapped: copies to and from it go through staging.
            flags: flags
                & !(vk::MemoryPropertyFlags::HOST_VISIBLE
                    | vk::MemoryPropertyFlags::HOST_COHERENT
                    | vk::MemoryPropertyFlags::HOST_CACHED),
            mapped: None,
            shadow: None,
            role: Role::Device,
            owner: None,
        }
    }

    /// Whether this is a wrapped native buffer.
    pub(crate) fn is_wrapped(&self) -> bool {
        self.owner.is_none()
    }

    pub(crate) fn coherent(&self) -> bool {
        self.flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT)
    }
}

struct State {
    /// One pool per memory type of `table`.
    pools: Vec<BlockPool<MemoryBlock, vk::Buffer>>,
    /// Where blocks come from, and the room left in each heap.
    heaps: Box<dyn Heaps>,
    /// Whether the driver wants a buffer of this many bytes in a dedicated block.
    dedicated: HashMap<u64, bool>,
}

/// A placed region: its block and reservation.
type Placed = (BlockId, Reservation<vk::Buffer>);

/// Buffer sizes whose dedicated requirements are remembered at most.
const DEDICATED_SIZES: usize = 256;

// SAFETY: the raw pointers in blocks refer to mappings and shadow buffers that
// this state owns; they are used under the allocator's lock or by the one owner of
// the region they address.
unsafe impl Send for State {}

/// The device allocator: pools of blocks per memory type of the table it selects
/// from. It owns its device, as every region it hands out owns the allocator, so
/// memory always goes back to the device it came from.
pub(crate) struct Allocator {
    device: Arc<DeviceShared>,
    policy: Policy,
    /// The table selection runs on: the device's, or a simulated one.
    table: MemoryTable,
    /// Whether `table` is a recorded one presented on the device.
    simulated: bool,
    config: AllocConfig,
    /// Alignment of buffer memory, from a probe buffer (identical for every buffer of
    /// the same usage: Vulkan spec, "Resource Memory Association").
    alignment: u64,
    /// memoryTypeBits of such a buffer, in the table's indices.
    type_bits: u32,
    /// Alignment for offsets of views bound as storage buffers.
    min_storage_alignment: u64,
    non_coherent_atom: u64,
    /// Whether freed regions and empty blocks are kept for later requests
    /// (Halide's `halide_reuse_device_allocations`); on by default.
    reuse: AtomicBool,
    state: Mutex<State>,
}

/// `v` rounded up to a multiple of `a`; sizes here are far below overflow, and
/// a saturated size is refused by every heap.
fn align_up(v: u64, a: u64) -> u64 {
    round_up(v, a).unwrap_or(u64::MAX)
}

/// Why a placement failed, deciding what to free before trying again.
#[derive(Debug)]
enum Refusal {
    /// The pool's limits (`maximum_pool_size`, `maximum_block_count`, heap size).
    Pool(String),
    /// The heap's limits.
    NoRoom(NoRoom),
    /// `vkAllocateMemory` or `vkMapMemory` (the call) ran out of device or host memory.
    Driver(&'static str, vk::Result),
    /// Any other failure; not retried.
    Failed(String),
}

impl Refusal {
    fn failed(e: impl std::fmt::Display) -> Self {
        Refusal::Failed(e.to_string())
    }

    /// A failed call: out of memory may pass once blocks are freed, nothing else.
    fn call((call, e): CallError) -> Self {
        match e {
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                Refusal::Driver(call, e)
            }
            e => Refusal::Failed(format!("{call} failed: {e}")),
        }
    }
}

impl Allocator {
    /// An allocator on `device` selecting by `policy` from the device's table, or
    /// from `simulated` presented on top of it.
    pub(crate) fn new(
        device: Arc<DeviceShared>,
        policy: Policy,
        simulated: Option<MemoryTable>,
        config: AllocConfig,
    ) -> Result<Self> {
        // A probe buffer gives the alignment and memory types of every buffer we make.
        let info = device.buffer_info(4, BUFFER_USAGE);
        let raw = &device.raw();
        // SAFETY: valid create info; destroyed right after the query.
        let probe = unsafe { raw.create_buffer(&info, None) }.vk("vkCreateBuffer")?;
        // SAFETY: the probe was created from this device.
        let req = unsafe { raw.get_buffer_memory_requirements(probe) };
        // SAFETY: not bound, not used.
        unsafe { raw.destroy_buffer(probe, None) };
        let (table, heaps) = simulate::heaps(&device, simulated);
        let pools = table
            .types
            .iter()
            .map(|t| BlockPool::new(config, table.heaps[t.heap as usize].size))
            .collect();
        let min_alignment = heaps.min_alignment();
        let info = &device.info;
        Ok(Allocator {
            policy,
            simulated: heaps.is_simulated(),
            type_bits: heaps.type_bits(req.memory_type_bits),
            // Both are powers of two; the table's is the device's unless simulated.
            non_coherent_atom: info
                .non_coherent_atom_size
                .max(table.non_coherent_atom_size)
                .max(1),
            alignment: req.alignment.max(min_alignment).max(1),
            min_storage_alignment: info
                .min_storage_buffer_offset_alignment
                .max(min_alignment)
                .max(1),
            table,
            config,
            reuse: AtomicBool::new(true),
            state: Mutex::new(State {
                pools,
                heaps,
                dedicated: HashMap::new(),
            }),
            device,
        })
    }

    /// The device this allocator allocates from.
    pub(crate) fn device(&self) -> &Arc<DeviceShared> {
        &self.device
    }

    /// The selection policy.
    pub(crate) fn policy(&self) -> Policy {
        self.policy
    }

    /// Whether small buffers' device memory may be host-visible and coherent
    /// ([`Policy::maps_device_memory`]).
    pub(crate) fn maps_device_memory(&self) -> bool {
        self.policy.maps_device_memory(&self.table, self.type_bits)
    }

    pub(crate) fn table(&self) -> &MemoryTable {
        &self.table
    }

    /// The atom flushes and invalidates are aligned to: the larger of the device's
    /// and the simulated table's `nonCoherentAtomSize` (both powers of two).
    pub(crate) fn non_coherent_atom(&self) -> u64 {
        self.non_coherent_atom
    }

    pub(crate) fn config(&self) -> &AllocConfig {
        &self.config
    }

    /// Whether the table is a simulated one.
    pub(crate) fn is_simulated(&self) -> bool {
        self.simulated
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes all of `heap` but `leave` bytes, as if other programs used it.
    /// Simulation only.
    #[cfg(feature = "simulate")]
    pub(crate) fn fill_heap(&self, heap: u32, leave: u64) -> Result<u64> {
        self.lock().heaps.fill(heap, leave)
    }

    /// Reserves `size` bytes for `role` and binds a buffer there: a region in the
    /// first of the policy's memory types that has room.
    pub(crate) fn allocate(&self, role: Role, size: u64) -> Result<Allocation> {
        let request = self.policy.request(role);
        let candidates = self
            .policy
            .role_candidates(&self.table, role, self.type_bits)
            .map_err(|e| Error::DeviceMallocFailed(format!("{role} of {size} bytes: {e}")))?;
        // Buffers are at least 4 bytes and a multiple of 4, so vkCmdFillBuffer covers them.
        let buffer_size = size.max(4).next_multiple_of(4);
        let mut st = self.lock();
        // A refusal moves on to the next type; all of them are reported if none has room.
        let mut refusals = Vec::new();
        for &ty in &candidates {
            let (reserve, alignment) = self.region_layout(ty, buffer_size);
            match self.place(&mut st, ty, reserve, alignment) {
                Ok(placed) => {
                    let fallbacks = refusals.len() as u32;
                    return self.hand_out(&mut st, role, ty, size, placed, fallbacks);
                }
                Err(why) => refusals.push(format!("type {ty}: {why}")),
            }
        }
        Err(self.no_candidate(role, size, &request, &refusals))
    }

    /// Bytes to reserve and their alignment for a buffer of `buffer_size` bytes in
    /// type `ty`. Non-coherent regions own whole atoms, so a flush or invalidate
    /// of one never touches another's bytes (as VMA does).
    fn region_layout(&self, ty: u32, buffer_size: u64) -> (u64, u64) {
        let flags = self.table.types[ty as usize].flags;
        let alignment = self.alignment.max(self.min_storage_alignment);
        let reserve = align_up(buffer_size, self.alignment);
        if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
            && !flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT)
        {
            let atom = self.non_coherent_atom;
            return (align_up(reserve, atom), alignment.max(atom));
        }
        (reserve, alignment)
    }

    /// The allocation of a region just placed in type `ty`, with its buffer.
    fn hand_out(
        &self,
        st: &mut State,
        role: Role,
        ty: u32,
        size: u64,
        (block, mut reservation): Placed,
        fallbacks: u32,
    ) -> Result<Allocation> {
        let b = st.pools[ty as usize].block(block).expect("just placed");
        let (memory, memory_size, heap) = (b.payload.memory, b.size, b.payload.heap);
        let (mapped, shadow) = (b.payload.mapped, b.payload.shadow);
        self.destroy_buffers(std::mem::take(&mut reservation.evicted));
        let buffer = match reservation.cached {
            Some(buffer) => buffer,
            None => self.region_buffer(st, ty, block, &reservation, memory)?,
        };
        let flags = self.table.types[ty as usize].flags;
        self.device.stats.placed(Placement {
            role,
            memory_type: ty,
            flags,
            heap,
            size,
            fallbacks,
            imported: false,
        });
        let at = |p: NonNull<u8>| {
            // SAFETY: the region lies inside the block's mapping.
            unsafe { NonNull::new_unchecked(p.as_ptr().add(reservation.offset as usize)) }
        };
        Ok(Allocation {
            buffer,
            memory,
            offset: reservation.offset,
            size,
            memory_size,
            memory_type: ty,
            flags,
            mapped: mapped.map(at),
            shadow: shadow.map(|(real, cache)| Shadow::at(real, cache, at)),
            role,
            owner: Some((block, reservation.id)),
        })
    }

    /// A buffer over the whole of a new region of `memory`, kept with the region,
    /// so that a later reuse of the region (any request that rounds to the same
    /// size) fits in it. On failure the region is given back.
    fn region_buffer(
        &self,
        st: &mut State,
        ty: u32,
        block: BlockId,
        reservation: &Reservation<vk::Buffer>,
        memory: vk::DeviceMemory,
    ) -> Result<vk::Buffer> {
        let region = reservation.id;
        let created = self.create_buffer(reservation.size, memory, reservation.offset);
        let kept = created.and_then(|buffer| {
            match st.pools[ty as usize].set_payload(block, region, buffer) {
                Ok(()) => Ok(buffer),
                Err(e) => {
                    self.destroy_buffers(vec![buffer]);
                    Err(Error::DeviceMallocFailed(e.to_string()))
                }
            }
        });
        if kept.is_err() {
            self.unreserve(st, ty, block, region);
        }
        kept
    }

    /// Gives back a region this request reserved, after a later step failed.
    fn unreserve(&self, st: &mut State, ty: u32, block: BlockId, region: RegionId) {
        let released = st.pools[ty as usize].release(block, region);
        // Reserved under this lock a moment ago, so release cannot refuse; if it
        // did, nothing would be reserved and nothing would be left to give back.
        debug_assert!(released.is_ok(), "{released:?}");
    }

    /// Why no candidate type had room for a request.
    fn no_candidate(
        &self,
        role: Role,
        size: u64,
        request: &MemoryRequest,
        refusals: &[String],
    ) -> Error {
        Error::DeviceMallocFailed(format!(
            "{role} of {size} bytes ({request}, policy {}) on {}: no candidate memory type had room: {}",
            self.policy,
            self.table.name,
            if refusals.is_empty() {
                "no candidates".to_owned()
            } else {
                refusals.join("; ")
            }
        ))
    }

    /// A region of `size` bytes in a block of type `ty`: an existing block, or a new
    /// one (smaller if the preferred size does not fit). When the pool's limits, the
    /// heap or the driver refuse, the empty blocks go back to the driver (of this
    /// pool; of every pool on the heap, or every pool when the driver is out of
    /// memory) and the request is tried once more, as VMA does.
    fn place(
        &self,
        st: &mut State,
        ty: u32,
        size: u64,
        alignment: u64,
    ) -> std::result::Result<Placed, String> {
        let heap = self.table.types[ty as usize].heap;
        let refused = match self.place_once(st, ty, size, alignment) {
            Ok(placed) => return Ok(placed),
            Err(r) => r,
        };
        // Collecting also merges free neighbours, which may make room in a block.
        match refused {
            Refusal::Pool(_) => self.collect_pool(st, ty as usize),
            Refusal::NoRoom(NoRoom::TooLarge { .. }) | Refusal::Failed(_) => {
                return Err(self.refusal_message(st, ty, size, alignment, refused))
            }
            Refusal::NoRoom(_) => self.collect_heap(st, Some(heap)),
            Refusal::Driver(..) => self.collect_heap(st, None),
        }
        // The second refusal is the one reported: it is what is left after collecting.
        self.place_once(st, ty, size, alignment)
            .map_err(|r| self.refusal_message(st, ty, size, alignment, r))
    }

    /// What a refusal of `size` bytes at `alignment` in type `ty` says to the caller.
    fn refusal_message(
        &self,
        st: &State,
        ty: u32,
        size: u64,
        alignment: u64,
        refused: Refusal,
    ) -> String {
        let heap = self.table.types[ty as usize].heap;
        match refused {
            Refusal::Pool(why) | Refusal::Failed(why) => why,
            Refusal::NoRoom(NoRoom::TooLarge { max }) => format!(
                "a block of {} bytes is larger than maxMemoryAllocationSize ({max} bytes)",
                align_up(size, alignment)
            ),
            Refusal::NoRoom(NoRoom::Real(real)) => format!(
                "heap {heap} is backed by heap {} of the real device, which cannot hold \
                 the block ({} of {} bytes allocated)",
                st.heaps.device_heap(ty),
                real.used,
                real.size
            ),
            Refusal::NoRoom(NoRoom::Simulated) => self.heap_full(st, heap, "simulated heap size"),
            Refusal::NoRoom(NoRoom::Budget(b)) => self.heap_full(
                st,
                heap,
                &format!("memory budget: {} of {} bytes in use", b.used, b.size),
            ),
            Refusal::Driver(call, e) => self.heap_full(st, heap, &format!("{call} failed: {e}")),
        }
    }

    /// The out-of-memory message of `heap`: live bytes and pooled free bytes apart.
    fn heap_full(&self, st: &State, heap: u32, why: &str) -> String {
        let (mut live, mut pooled) = (0u64, 0u64);
        for (t, pool) in self.table.types.iter().zip(&st.pools) {
            if t.heap == heap {
                live += pool.reserved();
                pooled += pool.pool_size();
            }
        }
        let taken = st.heaps.taken(heap);
        format!(
            "heap {heap} is full ({why}): {live} bytes live, {} bytes free in pooled blocks{} \
             of {} bytes",
            pooled.saturating_sub(live),
            if taken > 0 {
                format!(", {taken} bytes taken by fill_heap,")
            } else {
                ",".to_owned()
            },
            self.table.heaps[heap as usize].size
        )
    }

    /// One try at placing a region: in a block of the pool, else in a new one.
    fn place_once(
        &self,
        st: &mut State,
        ty: u32,
        size: u64,
        alignment: u64,
    ) -> std::result::Result<Placed, Refusal> {
        let wanted = self.wants_dedicated(st, size).map_err(Refusal::failed)?;
        let placement = st.pools[ty as usize]
            .place(size, alignment, wanted)
            .map_err(|e| Refusal::Pool(e.to_string()))?;
        match placement {
            PoolPlacement::Existing { block, reservation } => Ok((block, reservation)),
            PoolPlacement::NeedBlock { .. } if wanted => {
                self.place_dedicated(st, ty, size, alignment)
            }
            PoolPlacement::NeedBlock {
                size: block_size,
                dedicated,
            } => self.place_in_new_block(st, ty, size, alignment, block_size, dedicated),
        }
    }

    /// A region of `size` bytes in a new pooled block: of the preferred size, or
    /// just of the request if that does not fit (as VMA does).
    fn place_in_new_block(
        &self,
        st: &mut State,
        ty: u32,
        size: u64,
        alignment: u64,
        block_size: u64,
        dedicated: bool,
    ) -> std::result::Result<Placed, Refusal> {
        let exact = align_up(size, alignment);
        let (block_size, block) = match self.new_block(st, ty, block_size, None) {
            Ok(block) => (block_size, block),
            // A block of just the request may still fit; if not, its refusal is
            // the one reported, as the last word on this type.
            Err(Refusal::NoRoom(_) | Refusal::Driver(..)) if exact < block_size => {
                (exact, self.new_block(st, ty, exact, None)?)
            }
            Err(r) => return Err(r),
        };
        st.pools[ty as usize]
            .add_block(block, block_size, dedicated, size, alignment)
            .map_err(Refusal::failed)
    }

    /// A new block of `size` bytes of type `ty`, when its heap has room and the
    /// driver gives it; for `buffer` alone when given.
    fn new_block(
        &self,
        st: &mut State,
        ty: u32,
        size: u64,
        buffer: Option<vk::Buffer>,
    ) -> std::result::Result<MemoryBlock, Refusal> {
        if let Some(r) = st.heaps.refuse(ty, size) {
            return Err(Refusal::NoRoom(r));
        }
        st.heaps.allocate(ty, size, buffer).map_err(Refusal::call)
    }

    /// Whether the driver prefers or requires a buffer of `size` bytes in memory
    /// of its own (or, under a table, whether the table says so), asked once per size.
    fn wants_dedicated(&self, st: &mut State, size: u64) -> Result<bool> {
        if let Some(&w) = st.dedicated.get(&size) {
            return Ok(w);
        }
        let probe = self.create_unbound(size)?;
        let mut dedicated = vk::MemoryDedicatedRequirements::default();
        let mut req = vk::MemoryRequirements2::default().push_next(&mut dedicated);
        let info = vk::BufferMemoryRequirementsInfo2::default().buffer(probe);
        // SAFETY: the probe is a buffer of this device; a valid pNext chain.
        unsafe {
            self.device
                .raw()
                .get_buffer_memory_requirements2(&info, &mut req)
        };
        self.destroy_buffers(vec![probe]);
        let wanted = st.heaps.wants_dedicated(
            dedicated.prefers_dedicated_allocation == vk::TRUE,
            dedicated.requires_dedicated_allocation == vk::TRUE,
            size,
        );
        if st.dedicated.len() >= DEDICATED_SIZES {
            st.dedicated.clear();
        }
        st.dedicated.insert(size, wanted);
        Ok(wanted)
    }

    /// A block of its own for a buffer of `size` bytes, allocated for that buffer
    /// (`VkMemoryDedicatedAllocateInfo`), the buffer bound and kept as the region's.
    /// On failure the buffer is destroyed and the block freed.
    fn place_dedicated(
        &self,
        st: &mut State,
        ty: u32,
        size: u64,
        alignment: u64,
    ) -> std::result::Result<Placed, Refusal> {
        let buffer = self.create_unbound(size).map_err(Refusal::failed)?;
        // SAFETY: a buffer of this device.
        let req = unsafe { self.device.raw().get_buffer_memory_requirements(buffer) };
        let block_size = req.size.max(size);
        let added = self
            .new_block(st, ty, block_size, Some(buffer))
            .and_then(|b| {
                let memory = b.memory;
                st.pools[ty as usize]
                    .add_block(b, block_size, true, size, alignment)
                    .map(|placed| (memory, placed))
                    .map_err(Refusal::failed)
            });
        let (memory, (block, mut reservation)) = match added {
            Ok(added) => added,
            Err(r) => {
                self.destroy_buffers(vec![buffer]);
                return Err(r);
            }
        };
        if let Err(r) = self.bind_dedicated(st, ty, block, &reservation, buffer, memory) {
            self.destroy_buffers(vec![buffer]);
            self.unreserve(st, ty, block, reservation.id);
            self.collect_pool(st, ty as usize);
            return Err(r);
        }
        reservation.cached = Some(buffer);
        Ok((block, reservation))
    }

    /// Binds `buffer` to the dedicated block's one region and keeps it there.
    fn bind_dedicated(
        &self,
        st: &mut State,
        ty: u32,
        block: BlockId,
        reservation: &Reservation<vk::Buffer>,
        buffer: vk::Buffer,
        memory: vk::DeviceMemory,
    ) -> std::result::Result<(), Refusal> {
        // SAFETY: the memory was allocated for this buffer, which is unbound; a
        // dedicated block's one region starts at 0.
        unsafe {
            self.device
                .raw()
                .bind_buffer_memory(buffer, memory, reservation.offset)
        }
        .map_err(|e| Refusal::Failed(format!("vkBindBufferMemory failed: {e}")))?;
        st.pools[ty as usize]
            .set_payload(block, reservation.id, buffer)
            .map_err(Refusal::failed)
    }

    fn free_block(&self, st: &mut State, block: MemoryBlock) {
        // Work left pending by a timed-out wait may still use the memory.
        self.device.settle();
        st.heaps.free(block);
    }

    fn destroy_buffers(&self, buffers: Vec<vk::Buffer>) {
        if !buffers.is_empty() {
            self.device.settle();
        }
        let (device, stats) = (&self.device.raw(), &self.device.stats);
        for b in buffers {
            self.device.retire();
            // SAFETY: the region that held the buffer is free or gone; no pending work
            // uses it (every submission is waited for).
            unsafe { device.destroy_buffer(b, None) };
            stats.buffer_destroyed();
        }
    }

    /// A buffer of `size` bytes with the runtime's usage, not bound to memory.
    fn create_unbound(&self, size: u64) -> Result<vk::Buffer> {
        let info = self.device.buffer_info(size, BUFFER_USAGE);
        // SAFETY: valid create info.
        let buffer =
            unsafe { self.device.raw().create_buffer(&info, None) }.vk("vkCreateBuffer")?;
        self.device.stats.buffer_created();
        Ok(buffer)
    }

    fn create_buffer(
        &self,
        size: u64,
        memory: vk::DeviceMemory,
        offset: u64,
    ) -> Result<vk::Buffer> {
        let (device, stats) = (&self.device.raw(), &self.device.stats);
        let buffer = self.create_unbound(size)?;
        // SAFETY: the region at `offset` is reserved for this buffer, aligned to the
        // buffer's required alignment, and as large as its requirements (same usage as
        // the probe, so the same alignment; size rounded up to it).
        if let Err(e) = unsafe { device.bind_buffer_memory(buffer, memory, offset) } {
            // SAFETY: not bound, not used.
            unsafe { device.destroy_buffer(buffer, None) };
            stats.buffer_destroyed();
            return Err(e).vk("vkBindBufferMemory");
        }
        Ok(buffer)
    }

    /// Merges free regions and frees the empty blocks of type `ty`'s pool.
    fn collect_pool(&self, st: &mut State, ty: usize) {
        let (blocks, buffers) = st.pools[ty].collect();
        self.destroy_buffers(buffers);
        for b in blocks {
            self.free_block(st, b);
        }
    }

    /// [`collect_pool`](Self::collect_pool) for every type on `heap` (every type for None).
    fn collect_heap(&self, st: &mut State, heap: Option<u32>) {
        for ty in 0..st.pools.len() {
            if heap.is_none_or(|h| self.table.types[ty].heap == h) {
                self.collect_pool(st, ty);
            }
        }
    }

    /// Returns a region to its block, keeping its buffer for reuse (Halide's `release`).
    pub(crate) fn free(&self, a: &Allocation) {
        // Work left pending by a timed-out wait may still use the region.
        self.device.settle();
        let Some((block, region)) = a.owner else {
            // The caller may destroy its buffer from now on.
            self.device.retire();
            return;
        };
        let mut st = self.lock();
        let pool = &mut st.pools[a.memory_type as usize];
        let dedicated = pool.block(block).is_some_and(|b| b.dedicated);
        // Release refuses a region that is no longer reserved (an emulated Halide
        // bug releases regions early): then there is nothing left to release.
        let users = pool.release(block, region).ok();
        if !self.reuses() {
            // Nothing is kept: the free region's buffer goes, and so does its
            // block if it is now empty.
            self.collect_pool(&mut st, a.memory_type as usize);
        } else if let (Some(0), true) = (users, dedicated) {
            // A dedicated block serves no other request: it goes back at once.
            if let Some((memory, buffers)) = pool.remove_if_empty(block) {
                self.destroy_buffers(buffers);
                self.free_block(&mut st, memory);
            }
        }
    }

    /// Whether freed allocations are kept for reuse.
    pub(crate) fn reuses(&self) -> bool {
        self.reuse.load(Ordering::Relaxed)
    }

    /// Turns the reuse of freed allocations on or off; turning it off frees what
    /// is unused now (Halide's `halide_reuse_device_allocations`). Returns the
    /// blocks freed.
    pub(crate) fn set_reuse(&self, on: bool) -> usize {
        self.reuse.store(on, Ordering::Relaxed);
        if on {
            0
        } else {
            self.release_unused()
        }
    }

    /// Coalesces free regions, destroys their buffers and frees empty blocks
    /// (Halide's `release_unused_device_allocations`). Returns blocks freed.
    pub(crate) fn release_unused(&self) -> usize {
        let mut st = self.lock();
        let before: usize = st.pools.iter().map(|p| p.blocks()).sum();
        for ty in 0..st.pools.len() {
            self.collect_pool(&mut st, ty);
        }
        let after: usize = st.pools.iter().map(|p| p.blocks()).sum();
        before - after
    }

    /// Blocks and their bytes now, over all memory types.
    pub(crate) fn pool_usage(&self) -> (usize, u64) {
        let st = self.lock();
        (
            st.pools.iter().map(|p| p.blocks()).sum(),
            st.pools.iter().map(|p| p.pool_size()).sum(),
        )
    }
}

impl Drop for Allocator {
    /// Frees every block; regions hold the allocator, so none is in use.
    fn drop(&mut self) {
        let (device, stats) = (&self.device.raw(), &self.device.stats);
        // No region is alive (each holds the allocator) and every submission was
        // waited for; idle anyway, in case a wait timed out. Drop cannot report a
        // failed wait, and it leaves a lost device, which runs no work that could
        // use the memory freed below.
        let _ = self.device.wait_idle();
        let mut st = self.lock();
        for ty in 0..st.pools.len() {
            let (blocks, buffers) = st.pools[ty].drain();
            for b in buffers {
                self.device.retire();
                // SAFETY: as above.
                unsafe { device.destroy_buffer(b, None) };
                stats.buffer_destroyed();
            }
            for b in blocks {
                self.free_block(&mut st, b);
            }
        }
    }
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("device", &self.device)
            .field("policy", &self.policy)
            .finish()
    }
}
