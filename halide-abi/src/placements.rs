//! The library's own account of where it placed memory, for test harnesses.
//! A harness that sees only Vulkan calls cannot tell which role a region of a
//! block serves, nor see a staging ring reused or a copy the CPU makes into
//! mapped memory; vkcopy's own record of each placement can.

use std::ffi::c_char;

use crate::context;

/// One placement, as `vkcopy_halide_placements` writes it.
#[repr(C)]
pub struct PlacementC {
    /// The role's name, NUL-terminated: `device`, `upload`, `readback` ...
    pub role: [c_char; 24],
    pub memory_type: u32,
    pub heap: u32,
    /// `VkMemoryPropertyFlags`.
    pub flags: u32,
    /// Memory types that refused the allocation before this one.
    pub fallbacks: u32,
    pub size: u64,
    /// 1 where the caller's host memory was imported rather than staged.
    pub imported: u32,
}

/// `vkcopy_halide_placements`: writes up to `capacity` of the placements made
/// since the process began (vkcopy keeps the latest 4096 of each context),
/// oldest first, and returns how many there are.
///
/// # Safety
/// `out` is null or writable for `capacity` records.
#[no_mangle]
pub unsafe extern "C" fn vkcopy_halide_placements(out: *mut PlacementC, capacity: usize) -> usize {
    let all = context::placements();
    if !out.is_null() {
        for (i, p) in all.iter().take(capacity).enumerate() {
            let mut role = [0 as c_char; 24];
            for (r, b) in role.iter_mut().zip(p.role.to_string().bytes().take(23)) {
                *r = b as c_char;
            }
            let record = PlacementC {
                role,
                memory_type: p.memory_type,
                heap: p.heap,
                flags: p.flags.as_raw(),
                fallbacks: p.fallbacks,
                size: p.size,
                imported: u32::from(p.imported),
            };
            // SAFETY: the caller's promise: `i` < `capacity`.
            unsafe { out.add(i).write(record) };
        }
    }
    all.len()
}
