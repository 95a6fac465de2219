//! The device allocator. For each request the policy ranks the memory types;
//! the allocator takes a region of an existing block of the first type that has
//! room, or allocates a new block, and moves to the next type when
//! `vkAllocateMemory` runs out of memory or the heap is full even after its empty
//! blocks went back to the driver. Blocks are pooled
//! per memory type (Halide's `BlockAllocator` and `RegionAllocator`,
//! `src/runtime/internal/`); each region has its own `VkBuffer` bound at its
//! offset, kept for reuse when the region is released. With a simulated table
//! (module `simulate`) selection runs on the recorded table, and its heap sizes
//! are enforced, as are the real heaps behind them and `maxMemoryAllocationSize`
//! (`memory::room`). A buffer the driver prefers or requires in memory of its own
//! (`VkMemoryDedicatedRequirements`) gets a dedicated block allocated for it, as
//! does a request larger than the pool's blocks; dedicated blocks are freed when
//! their region is released.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::memory::block::{BlockId, BlockPool, Placement as PoolPlacement};
use crate::memory::config::AllocConfig;
use crate::memory::policy::{Policy, Role};
use crate::memory::region::{round_up, RegionId};
use crate::memory::room::{HeapUse, Limits, NoRoom};
use crate::memory::table::MemoryTable;
use crate::stats::Placement;
use crate::vk::device::DeviceShared;
use crate::vk::simulate::{self, Shadow, Simulation};

/// Usage of every buffer the runtime creates: storage for kernels, both transfer ends.
pub(crate) const BUFFER_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// One `VkDeviceMemory` of a pool.
#[derive(Debug)]
struct BlockMemory {
    memory: vk::DeviceMemory,
    size: u64,
    heap: u32,
    /// Heap of the real device it was allocated from.
    real_heap: u32,
    /// What the host writes and reads: the mapping, or the shadow cache.
    mapped: Option<NonNull<u8>>,
    /// For simulated non-coherent types: the real mapping and the shadow, owned here.
    shadow: Option<(NonNull<u8>, *mut [u8])>,
}

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
    pools: Vec<BlockPool<BlockMemory, vk::Buffer>>,
    /// Bytes of `VkDeviceMemory` per heap of `table`.
    heap_used: Vec<u64>,
    /// Bytes of each heap taken by `fill_heap` (simulation only).
    heap_filler: Vec<u64>,
    /// Bytes of `VkDeviceMemory` per heap of the real device (differs from
    /// `heap_used` under simulation).
    real_heap_used: Vec<u64>,
    /// Whether the driver wants a buffer of this many bytes in a dedicated block.
    dedicated: HashMap<u64, bool>,
}

/// A placed region: its block and reservation.
type Placed = (BlockId, crate::memory::region::Reservation<vk::Buffer>);

/// Least alignment of every region under a simulated table (lavapipe's and
/// NVIDIA's buffer alignment), so that offsets, sizes and therefore room in the
/// simulated heaps are the same on every device whose alignments are at most
/// this; a driver with larger ones still places differently.
pub(crate) const SIMULATED_ALIGNMENT: u64 = 64;

/// Whether a buffer of `size` bytes gets a block of its own. The real driver's
/// preference counts only without a simulated table: under one, the table's
/// `dedicated_from` decides, so that the same table places the same way on every
/// device (a driver that prefers dedicated blocks for large buffers would
/// otherwise leave no pooled room where another leaves some). A requirement of
/// the driver is always met: memory bound otherwise would be invalid.
pub(crate) fn wants_dedicated(
    simulated: bool,
    prefers: bool,
    requires: bool,
    dedicated_from: Option<u64>,
    size: u64,
) -> bool {
    requires || (prefers && !simulated) || dedicated_from.is_some_and(|from| size >= from)
}

/// Buffer sizes whose dedicated requirements are remembered at most.
const DEDICATED_SIZES: usize = 256;

// SAFETY: the raw pointers in BlockMemory refer to mappings and shadow buffers that
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
    /// For a simulated table: how it maps onto the real device.
    simulation: Option<Simulation>,
    config: AllocConfig,
    /// Alignment of buffer memory, from a probe buffer (identical for every buffer of
    /// the same usage: Vulkan spec, "Resource Memory Association").
    alignment: u64,
    /// memoryTypeBits of such a buffer, in the real device's types.
    real_type_bits: u32,
    /// Alignment for offsets of views bound as storage buffers.
    min_storage_alignment: u64,
    non_coherent_atom: u64,
    /// Whether freed regions and empty blocks are kept for later requests
    /// (Halide's `halide_reuse_device_allocations`); on by default.
    reuse: AtomicBool,
    state: Mutex<State>,
}

/// `v` rounded up to a multiple of `a`; sizes here are far below overflow.
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
        let raw = &device.raw;
        // SAFETY: valid create info; destroyed right after the query.
        let probe = unsafe { raw.create_buffer(&info, None) }.vk("vkCreateBuffer")?;
        // SAFETY: the probe was created from this device.
        let req = unsafe { raw.get_buffer_memory_requirements(probe) };
        // SAFETY: not bound, not used.
        unsafe { raw.destroy_buffer(probe, None) };
        let (table, simulation) = Simulation::start(&device.memory, simulated);
        let pools = table
            .types
            .iter()
            .map(|t| BlockPool::new(config, table.heaps[t.heap as usize].size))
            .collect();
        let heaps = table.heaps.len();
        let mut non_coherent_atom = device.info.non_coherent_atom_size;
        let mut alignment = req.alignment.max(1);
        let mut min_storage_alignment = device.info.min_storage_buffer_offset_alignment.max(1);
        if simulation.is_some() {
            non_coherent_atom = non_coherent_atom.max(table.non_coherent_atom_size);
            // The same offsets and sizes on every driver whose alignments are at
            // most the simulated one, so that placement under a table does not
            // depend on the real device.
            alignment = alignment.max(SIMULATED_ALIGNMENT);
            min_storage_alignment = min_storage_alignment.max(SIMULATED_ALIGNMENT);
        }
        Ok(Allocator {
            policy,
            table,
            simulation,
            config,
            alignment,
            real_type_bits: req.memory_type_bits,
            min_storage_alignment,
            non_coherent_atom: non_coherent_atom.max(1),
            reuse: AtomicBool::new(true),
            state: Mutex::new(State {
                pools,
                heap_used: vec![0; heaps],
                heap_filler: vec![0; heaps],
                real_heap_used: vec![0; device.memory.heaps.len()],
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
        self.simulation.is_some()
    }

    fn real_type(&self, ty: u32) -> u32 {
        self.simulation.as_ref().map_or(ty, |s| s.real_type(ty))
    }

    /// memoryTypeBits in the selection table's indices.
    fn type_bits(&self) -> u32 {
        match &self.simulation {
            None => self.real_type_bits,
            Some(sim) => sim.type_bits(&self.table, self.real_type_bits),
        }
    }

    /// Why a new block of `bytes` in selection type `ty` may not be allocated, if it
    /// may not (see [`Limits::refuse`]).
    fn block_refusal(&self, st: &State, ty: u32, bytes: u64) -> Option<NoRoom> {
        let h = self.table.types[ty as usize].heap as usize;
        let real = self.real_heap(ty) as usize;
        let limits = Limits {
            simulated: self.is_simulated().then(|| HeapUse {
                used: st.heap_used[h].saturating_add(st.heap_filler[h]),
                size: self.table.heaps[h].size,
            }),
            real: HeapUse {
                used: st.real_heap_used[real],
                size: self.device.memory.heaps[real].size,
            },
            max_allocation: self.device.info.max_memory_allocation_size,
            budget: match self.is_simulated() {
                true => self.table.heaps[h].budget.map(|size| HeapUse {
                    used: st.heap_used[h].saturating_add(st.heap_filler[h]),
                    size,
                }),
                false => self.budget(real),
            },
        };
        limits.refuse(bytes)
    }

    /// The real device's heap behind selection type `ty`.
    fn real_heap(&self, ty: u32) -> u32 {
        self.device.memory.types[self.real_type(ty) as usize].heap
    }

    /// The driver's usage and budget of real heap `heap` (`VK_EXT_memory_budget`).
    fn budget(&self, heap: usize) -> Option<HeapUse> {
        if !self.device.memory_budget {
            return None;
        }
        let (instance, physical) = (&self.device.instance.raw, self.device.physical);
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        // SAFETY: the extension is enabled on the device; a valid pNext chain.
        unsafe { instance.get_physical_device_memory_properties2(physical, &mut props) };
        Some(HeapUse {
            used: budget.heap_usage[heap],
            size: budget.heap_budget[heap],
        })
    }

    /// Takes all of `heap` but `leave` bytes, as if other programs used it.
    /// Simulation only.
    #[cfg(feature = "simulate")]
    pub(crate) fn fill_heap(&self, heap: u32, leave: u64) -> Result<u64> {
        if !self.is_simulated() {
            return Err(Error::BadSetting {
                name: "fill_heap",
                value: heap.to_string(),
                reason: "needs a simulated memory table (simulate_memory)".into(),
            });
        }
        let Some(h) = self.table.heaps.get(heap as usize) else {
            return Err(Error::BadSetting {
                name: "fill_heap",
                value: heap.to_string(),
                reason: format!("{} has {} heaps", self.table.name, self.table.heaps.len()),
            });
        };
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let filler = h
            .size
            .saturating_sub(st.heap_used[heap as usize])
            .saturating_sub(leave);
        st.heap_filler[heap as usize] = filler;
        Ok(filler)
    }

    /// Allocates a `VkDeviceMemory` of `size` bytes of selection type `ty`, mapped
    /// when host-visible (with a shadow when simulated non-coherent).
    fn allocate_block(
        &self,
        st: &mut State,
        ty: u32,
        size: u64,
        for_buffer: Option<vk::Buffer>,
    ) -> std::result::Result<BlockMemory, (&'static str, vk::Result)> {
        let (device, stats) = (&self.device.raw, &self.device.stats);
        let heap = self.table.types[ty as usize].heap;
        let real_heap = self.real_heap(ty);
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default();
        let mut info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(self.real_type(ty));
        if let Some(buffer) = for_buffer {
            dedicated = dedicated.buffer(buffer);
            info = info.push_next(&mut dedicated);
        }
        // SAFETY: valid allocate info with a memory type index of this device; a
        // dedicated buffer is unbound and `size` is its requirement.
        let memory =
            unsafe { device.allocate_memory(&info, None) }.map_err(|e| ("vkAllocateMemory", e))?;
        stats.memory_allocated(size);
        let flags = self.table.types[ty as usize].flags;
        let mut block = BlockMemory {
            memory,
            size,
            heap,
            real_heap,
            mapped: None,
            shadow: None,
        };
        if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
            // SAFETY: host-visible memory (the backing type is host-visible too), mapped
            // once for the block's lifetime.
            let mapped = unsafe {
                device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            };
            let p = match mapped {
                Ok(p) => p.cast::<u8>(),
                Err(e) => {
                    // SAFETY: not mapped, nothing bound.
                    unsafe { device.free_memory(memory, None) };
                    stats.memory_freed(size);
                    return Err(("vkMapMemory", e));
                }
            };
            stats.mapping_created();
            let real = NonNull::new(p);
            block.mapped = real;
            let coherent = flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT);
            if let (Some(_), false, Some(real)) = (&self.simulation, coherent, real) {
                let (cache, raw) = simulate::shadow_block(real, size);
                block.mapped = Some(cache);
                block.shadow = Some((real, raw));
            }
        }
        st.heap_used[heap as usize] += size;
        st.real_heap_used[real_heap as usize] += size;
        Ok(block)
    }

    fn free_block(&self, st: &mut State, b: BlockMemory) {
        self.device.settle();
        let (device, stats) = (&self.device.raw, &self.device.stats);
        // SAFETY: no buffer is bound to the memory any more (its regions' buffers were
        // destroyed first); the shadow was made by Box::into_raw in allocate_block.
        unsafe {
            if b.mapped.is_some() {
                device.unmap_memory(b.memory);
                stats.mapping_destroyed();
            }
            if let Some((_, raw)) = b.shadow {
                simulate::free_shadow(raw);
            }
            device.free_memory(b.memory, None);
        }
        stats.memory_freed(b.size);
        st.heap_used[b.heap as usize] -= b.size;
        st.real_heap_used[b.real_heap as usize] -= b.size;
    }

    fn destroy_buffers(&self, buffers: Vec<vk::Buffer>) {
        if !buffers.is_empty() {
            self.device.settle();
        }
        let (device, stats) = (&self.device.raw, &self.device.stats);
        for b in buffers {
            // SAFETY: the region that held the buffer is free or gone; no pending work
            // uses it (every submission is waited for).
            unsafe { device.destroy_buffer(b, None) };
            stats.buffer_destroyed();
        }
    }

    /// Reserves `size` bytes for `role` and binds a buffer there.
    pub(crate) fn allocate(&self, role: Role, size: u64) -> Result<Allocation> {
        let stats = &self.device.stats;
        let request = self.policy.request(role);
        let candidates = self
            .policy
            .candidates(&self.table, &request, self.type_bits())
            .map_err(|e| Error::DeviceMallocFailed(format!("{role} of {size} bytes: {e}")))?;
        // Buffers are at least 4 bytes and a multiple of 4, so vkCmdFillBuffer covers them.
        let buffer_size = size.max(4).next_multiple_of(4);
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut fallbacks = 0;
        let mut refusals = Vec::new();
        for &ty in &candidates {
            let flags = self.table.types[ty as usize].flags;
            let non_coherent = flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
                && !flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT);
            // Non-coherent regions own whole atoms, so a flush or invalidate of one
            // never touches another's bytes (as VMA does).
            let mut alignment = self.alignment.max(self.min_storage_alignment);
            let mut reserve = align_up(buffer_size, self.alignment);
            if non_coherent {
                alignment = alignment.max(self.non_coherent_atom);
                reserve = align_up(reserve, self.non_coherent_atom);
            }
            match self.place(&mut st, ty, reserve, alignment) {
                Ok((block, reservation)) => {
                    let pool = &mut st.pools[ty as usize];
                    let b = pool.block(block).expect("just placed");
                    let (memory, memory_size, heap) = (b.payload.memory, b.size, b.payload.heap);
                    let (mapped, shadow_base) = (b.payload.mapped, b.payload.shadow);
                    self.destroy_buffers(reservation.evicted);
                    let buffer = match reservation.cached {
                        Some(buf) => buf,
                        // The buffer spans the whole region, so a later reuse of the region
                        // (any request that rounds to the same size) fits in it.
                        None => {
                            match self.create_buffer(reservation.size, memory, reservation.offset) {
                                Ok(buf) => {
                                    let _ = st.pools[ty as usize].set_payload(
                                        block,
                                        reservation.id,
                                        buf,
                                    );
                                    buf
                                }
                                Err(e) => {
                                    let _ = st.pools[ty as usize].release(block, reservation.id);
                                    return Err(e);
                                }
                            }
                        }
                    };
                    let at = |p: NonNull<u8>| {
                        // SAFETY: the region lies inside the block's mapping.
                        unsafe {
                            NonNull::new_unchecked(p.as_ptr().add(reservation.offset as usize))
                        }
                    };
                    stats.placed(Placement {
                        role,
                        memory_type: ty,
                        flags,
                        heap,
                        size,
                        fallbacks,
                        imported: false,
                    });
                    return Ok(Allocation {
                        buffer,
                        memory,
                        offset: reservation.offset,
                        size,
                        memory_size,
                        memory_type: ty,
                        flags,
                        mapped: mapped.map(at),
                        shadow: shadow_base.map(|(real, cache)| Shadow::at(real, cache, at)),
                        role,
                        owner: Some((block, reservation.id)),
                    });
                }
                Err(why) => {
                    fallbacks += 1;
                    refusals.push(format!("type {ty}: {why}"));
                }
            }
        }
        Err(Error::DeviceMallocFailed(format!(
            "{role} of {size} bytes ({request}, policy {}) on {}: no candidate memory type had room: {}",
            self.policy,
            self.table.name,
            if refusals.is_empty() {
                "no candidates".to_owned()
            } else {
                refusals.join("; ")
            }
        )))
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
        let retry = match refused {
            Refusal::Pool(_) => {
                self.collect_pool(st, ty as usize);
                true
            }
            Refusal::NoRoom(NoRoom::TooLarge { .. }) | Refusal::Failed(_) => false,
            Refusal::NoRoom(_) => {
                self.collect_heap(st, Some(heap));
                true
            }
            Refusal::Driver(..) => {
                self.collect_heap(st, None);
                true
            }
        };
        let refused = if retry {
            match self.place_once(st, ty, size, alignment) {
                Ok(placed) => return Ok(placed),
                Err(r) => r,
            }
        } else {
            refused
        };
        Err(match refused {
            Refusal::Pool(why) | Refusal::Failed(why) => why,
            Refusal::NoRoom(NoRoom::TooLarge { max }) => format!(
                "a block of {} bytes is larger than maxMemoryAllocationSize ({max} bytes)",
                align_up(size, alignment)
            ),
            Refusal::NoRoom(NoRoom::Real(real)) => format!(
                "heap {heap} is backed by heap {} of the real device, which cannot hold \
                 the block ({} of {} bytes allocated)",
                self.real_heap(ty),
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
        })
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
        let h = heap as usize;
        let filler = st.heap_filler[h];
        format!(
            "heap {heap} is full ({why}): {live} bytes live, {} bytes free in pooled blocks{} \
             of {} bytes",
            pooled.saturating_sub(live),
            if filler > 0 {
                format!(", {filler} bytes taken by fill_heap,")
            } else {
                ",".to_owned()
            },
            self.table.heaps[h].size
        )
    }

    fn place_once(
        &self,
        st: &mut State,
        ty: u32,
        size: u64,
        alignment: u64,
    ) -> std::result::Result<Placed, Refusal> {
        let wanted = self
            .wants_dedicated(st, size)
            .map_err(|e| Refusal::Failed(e.to_string()))?;
        let placed = st.pools[ty as usize]
            .place(size, alignment, wanted)
            .map_err(|e| Refusal::Pool(e.to_string()))?;
        let (block_size, dedicated) = match placed {
            PoolPlacement::Existing { block, reservation } => return Ok((block, reservation)),
            PoolPlacement::NeedBlock { .. } if wanted => {
                return self.place_dedicated(st, ty, size, alignment)
            }
            PoolPlacement::NeedBlock {
                size: bs,
                dedicated,
            } => (bs, dedicated),
        };
        // The preferred block size first, then just the request (as VMA does).
        let mut tries = vec![block_size];
        let exact = align_up(size, alignment);
        if exact < block_size {
            tries.push(exact);
        }
        let mut last = Refusal::NoRoom(NoRoom::Simulated);
        for bs in tries {
            if let Some(r) = self.block_refusal(st, ty, bs) {
                last = Refusal::NoRoom(r);
                continue;
            }
            match self.allocate_block(st, ty, bs, None) {
                Ok(mem) => {
                    return st.pools[ty as usize]
                        .add_block(mem, bs, dedicated, size, alignment)
                        .map_err(|e| Refusal::Failed(e.to_string()));
                }
                Err((
                    call,
                    e @ (vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
                    | vk::Result::ERROR_OUT_OF_HOST_MEMORY),
                )) => last = Refusal::Driver(call, e),
                Err((call, e)) => return Err(Refusal::Failed(format!("{call} failed: {e}"))),
            }
        }
        Err(last)
    }

    /// Whether the driver prefers or requires a buffer of `size` bytes in memory
    /// of its own (or, simulated, whether the table says so), asked once per size.
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
                .raw
                .get_buffer_memory_requirements2(&info, &mut req)
        };
        self.destroy_buffers(vec![probe]);
        let wanted = wants_dedicated(
            self.is_simulated(),
            dedicated.prefers_dedicated_allocation == vk::TRUE,
            dedicated.requires_dedicated_allocation == vk::TRUE,
            self.table.dedicated_from,
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
    fn place_dedicated(
        &self,
        st: &mut State,
        ty: u32,
        size: u64,
        alignment: u64,
    ) -> std::result::Result<Placed, Refusal> {
        let device = &self.device.raw;
        let buffer = self
            .create_unbound(size)
            .map_err(|e| Refusal::Failed(e.to_string()))?;
        let unbound = |r: Refusal| {
            self.destroy_buffers(vec![buffer]);
            r
        };
        // SAFETY: a buffer of this device.
        let req = unsafe { device.get_buffer_memory_requirements(buffer) };
        let bs = req.size.max(size);
        if let Some(r) = self.block_refusal(st, ty, bs) {
            return Err(unbound(Refusal::NoRoom(r)));
        }
        let mem = match self.allocate_block(st, ty, bs, Some(buffer)) {
            Ok(mem) => mem,
            Err((
                call,
                e @ (vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY),
            )) => return Err(unbound(Refusal::Driver(call, e))),
            Err((call, e)) => return Err(unbound(Refusal::Failed(format!("{call} failed: {e}")))),
        };
        let memory = mem.memory;
        let (block, mut reservation) = st.pools[ty as usize]
            .add_block(mem, bs, true, size, alignment)
            .map_err(|e| unbound(Refusal::Failed(e.to_string())))?;
        // SAFETY: the memory was allocated for this buffer, which is unbound; a
        // dedicated block's one region starts at 0.
        if let Err(e) = unsafe { device.bind_buffer_memory(buffer, memory, reservation.offset) } {
            let _ = st.pools[ty as usize].release(block, reservation.id);
            self.collect_pool(st, ty as usize);
            return Err(unbound(Refusal::Failed(format!(
                "vkBindBufferMemory failed: {e}"
            ))));
        }
        let _ = st.pools[ty as usize].set_payload(block, reservation.id, buffer);
        reservation.cached = Some(buffer);
        Ok((block, reservation))
    }

    /// A buffer of `size` bytes with the runtime's usage, not bound to memory.
    fn create_unbound(&self, size: u64) -> Result<vk::Buffer> {
        let info = self.device.buffer_info(size, BUFFER_USAGE);
        // SAFETY: valid create info.
        let buffer = unsafe { self.device.raw.create_buffer(&info, None) }.vk("vkCreateBuffer")?;
        self.device.stats.buffer_created();
        Ok(buffer)
    }

    fn create_buffer(
        &self,
        size: u64,
        memory: vk::DeviceMemory,
        offset: u64,
    ) -> Result<vk::Buffer> {
        let (device, stats) = (&self.device.raw, &self.device.stats);
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
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // An error here means the region was already released (an emulated Halide
        // bug released it early); there is nothing left to do.
        if let Some((block, region)) = a.owner {
            let pool = &mut st.pools[a.memory_type as usize];
            let dedicated = pool.block(block).is_some_and(|b| b.dedicated);
            let released = pool.release(block, region);
            if !self.reuses() {
                // Nothing is kept: the free region's buffer goes, and so does its
                // block if it is now empty.
                self.collect_pool(&mut st, a.memory_type as usize);
            } else if let (Ok(0), true) = (released, dedicated) {
                // A dedicated block serves no other request: it goes back at once.
                if let Some((memory, buffers)) = pool.remove_if_empty(block) {
                    self.destroy_buffers(buffers);
                    self.free_block(&mut st, memory);
                }
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
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let before: usize = st.pools.iter().map(|p| p.blocks()).sum();
        for ty in 0..st.pools.len() {
            self.collect_pool(&mut st, ty);
        }
        let after: usize = st.pools.iter().map(|p| p.blocks()).sum();
        before - after
    }

    /// Blocks and their bytes now, over all memory types.
    pub(crate) fn pool_usage(&self) -> (usize, u64) {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (
            st.pools.iter().map(|p| p.blocks()).sum(),
            st.pools.iter().map(|p| p.pool_size()).sum(),
        )
    }
}

impl Drop for Allocator {
    /// Frees every block; regions hold the allocator, so none is in use.
    fn drop(&mut self) {
        let (device, stats) = (&self.device.raw, &self.device.stats);
        // No region is alive (each holds the allocator) and every submission was
        // waited for; idle anyway, in case a wait timed out.
        let _ = self.device.wait_idle();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for ty in 0..st.pools.len() {
            let (blocks, buffers) = st.pools[ty].drain();
            for b in buffers {
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

#[cfg(test)]
mod dedicated_tests {
    use super::wants_dedicated;

    #[test]
    fn a_simulated_table_decides_dedicated_blocks_not_the_driver() {
        // The real device: its driver's preference counts.
        assert!(wants_dedicated(false, true, false, None, 64));
        assert!(!wants_dedicated(false, false, false, None, 64));
        // A table: a driver that prefers dedicated blocks places as one that does not.
        assert!(!wants_dedicated(true, true, false, None, 50_000_000));
        assert!(wants_dedicated(
            true,
            false,
            false,
            Some(1 << 20),
            50_000_000
        ));
        assert!(!wants_dedicated(
            true,
            true,
            false,
            Some(1 << 30),
            50_000_000
        ));
        // A requirement is met everywhere.
        assert!(wants_dedicated(true, false, true, None, 64));
    }
}
