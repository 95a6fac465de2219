//! What vkcopy's library exports beyond Halide's ABI, for test harnesses and
//! hosts: the names of the symbols and the types they have. A library without
//! them is one of Halide's own runtimes.

use std::ffi::{c_char, c_int};

/// `vkcopy_halide_copy_counts(out)`: writes six counts to `out`, the copies
/// made since the process began and their bytes: to the device, to the
/// host, device to device.
pub const COPY_COUNTS_SYMBOL: &str = "vkcopy_halide_copy_counts";
pub type CopyCountsFn = unsafe extern "C" fn(*mut u64);

/// `vkcopy_halide_placements(out, capacity)`: writes up to `capacity`
/// [`Placement`]s, oldest first, and returns how many there are.
pub const PLACEMENTS_SYMBOL: &str = "vkcopy_halide_placements";
pub type PlacementsFn = unsafe extern "C" fn(*mut Placement, usize) -> usize;

/// One placement of memory, as `vkcopy_halide_placements` writes it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Placement {
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

/// `vkcopy_halide_set_setting(name, value)`: one of vkcopy's variables
/// (`VKCOPY_POLICY` ...) for contexts made from then on, in place of the
/// environment's; a null value goes back to it. Returns a Halide error code.
pub const SET_SETTING_SYMBOL: &str = "vkcopy_halide_set_setting";
pub type SetSettingFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
