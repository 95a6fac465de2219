//! The library's own account of where it placed memory, for test harnesses.
//! A harness that sees only Vulkan calls cannot tell which role a region of a
//! block serves, nor see a staging ring reused or a copy the CPU makes into
//! mapped memory; vkcopy's own record of each placement can.

use std::ffi::c_char;

use halide_ffi::vkcopy::Placement;

use crate::context;

/// `vkcopy_halide_placements`: writes up to `capacity` of the placements made
/// since the process began (vkcopy keeps the latest 4096 of each context),
/// oldest first, and returns how many there are.
///
/// # Safety
/// `out` is null or writable for `capacity` records.
#[no_mangle]
pub unsafe extern "C" fn vkcopy_halide_placements(out: *mut Placement, capacity: usize) -> usize {
    let all = context::placements();
    if !out.is_null() {
        for (i, p) in all.iter().take(capacity).enumerate() {
            let mut role = [0 as c_char; 24];
            for (r, b) in role.iter_mut().zip(p.role.to_string().bytes().take(23)) {
                *r = b as c_char;
            }
            let record = Placement {
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

// The exports have the types `halide-ffi` declares for their callers.
const _: halide_ffi::vkcopy::PlacementsFn = vkcopy_halide_placements;
