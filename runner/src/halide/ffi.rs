//! Halide's C ABI (`HalideRuntime.h`, `HalideRuntimeVulkan.h`), written by hand
//! for the few types and entry points the suite calls, and the runtime library
//! that exports them, loaded once per process.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::OnceLock;

use super::shim::CopyCounts;
use crate::outcome::PlacementRecord;
use crate::rt::{property_flags_name, vk};

/// `halide_type_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HalideType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// `halide_dimension_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HalideDimension {
    pub min: i32,
    pub extent: i32,
    pub stride: i32,
    pub flags: u32,
}

/// `halide_buffer_t`.
#[repr(C)]
#[derive(Debug)]
pub struct HalideBuffer {
    pub device: u64,
    pub device_interface: *const c_void,
    pub host: *mut u8,
    pub flags: u64,
    pub ty: HalideType,
    pub dimensions: i32,
    pub dim: *mut HalideDimension,
    pub padding: *mut c_void,
}

/// `halide_buffer_flag_host_dirty`.
pub const HOST_DIRTY: u64 = 1;
/// `halide_buffer_flag_device_dirty`.
pub const DEVICE_DIRTY: u64 = 2;

type Interface = unsafe extern "C" fn() -> *const c_void;
type Malloc = unsafe extern "C" fn(*mut c_void, *mut HalideBuffer, *const c_void) -> c_int;
type OneBuffer = unsafe extern "C" fn(*mut c_void, *mut HalideBuffer) -> c_int;
type BufferCopy =
    unsafe extern "C" fn(*mut c_void, *mut HalideBuffer, *const c_void, *mut HalideBuffer) -> c_int;
type Crop = unsafe extern "C" fn(*mut c_void, *const HalideBuffer, *mut HalideBuffer) -> c_int;
type Slice = unsafe extern "C" fn(
    *mut c_void,
    *const HalideBuffer,
    c_int,
    c_int,
    *mut HalideBuffer,
) -> c_int;
type Release = unsafe extern "C" fn(*mut c_void, *const c_void);
type Reuse = unsafe extern "C" fn(*mut c_void, bool) -> c_int;
type CanReuse = unsafe extern "C" fn(*mut c_void) -> bool;
pub type ErrorHandler = unsafe extern "C" fn(*mut c_void, *const c_char);
type SetErrorHandler = unsafe extern "C" fn(ErrorHandler) -> ErrorHandler;
type SetPrint = unsafe extern "C" fn(ErrorHandler) -> ErrorHandler;
pub type GetLibrarySymbol = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
type SetGetLibrarySymbol = unsafe extern "C" fn(GetLibrarySymbol) -> GetLibrarySymbol;

/// The entry points of one Halide runtime library.
pub struct Library {
    _lib: libloading::Library,
    /// `halide_vulkan_device_interface()`.
    pub vulkan: *const c_void,
    device_malloc: Malloc,
    device_free: OneBuffer,
    device_and_host_malloc: Malloc,
    device_and_host_free: OneBuffer,
    can_reuse: CanReuse,
    copy_to_device: Malloc,
    copy_to_host: OneBuffer,
    buffer_copy: BufferCopy,
    device_crop: Crop,
    device_slice: Slice,
    device_release_crop: OneBuffer,
    device_release: Release,
    reuse_device_allocations: Reuse,
    set_error_handler: SetErrorHandler,
    set_custom_print: SetPrint,
    set_get_library_symbol: SetGetLibrarySymbol,
    /// `vkcopy_halide_copy_counts`, where the library reports the copies it
    /// made (vkcopy's library does; Halide's runtimes do not).
    pub copy_counts: Option<CopyCounts>,
    /// `vkcopy_halide_placements`, where the library reports where it placed
    /// memory (vkcopy's library does).
    placements: Option<Placements>,
    /// `vkcopy_halide_set_setting`, where the library takes vkcopy's settings
    /// (vkcopy's library does).
    set_setting: Option<SetSetting>,
    /// Where it was loaded from, for messages.
    pub path: String,
}

/// One placement as vkcopy's library reports it (`vkcopy_halide_placements`,
/// an extension of the library's own, not Halide's ABI).
#[repr(C)]
struct LibraryPlacement {
    role: [c_char; 24],
    memory_type: u32,
    heap: u32,
    flags: u32,
    fallbacks: u32,
    size: u64,
    imported: u32,
}

type Placements = unsafe extern "C" fn(*mut LibraryPlacement, usize) -> usize;
type SetSetting = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;

impl Library {
    /// Whether the library takes vkcopy's settings: it is vkcopy's library,
    /// which runs vkcopy's policies and routes as vkcopy does.
    pub fn takes_settings(&self) -> bool {
        self.set_setting.is_some()
    }

    /// Sets vkcopy's variable `name` to `value` for the contexts the library
    /// makes from now on.
    pub fn set_setting(&self, name: &str, value: &str) -> Result<(), String> {
        let f = self
            .set_setting
            .ok_or_else(|| format!("{}: takes no vkcopy settings", self.path))?;
        let (n, v) = (CString::new(name), CString::new(value));
        let (Ok(n), Ok(v)) = (n, v) else {
            return Err(format!("{name}={value:?}: has a NUL"));
        };
        // SAFETY: two NUL-terminated strings that outlive the call.
        match unsafe { f(n.as_ptr(), v.as_ptr()) } {
            0 => Ok(()),
            e => Err(format!(
                "{name}={value}: refused ({e}): {}",
                take_errors().join("; ")
            )),
        }
    }

    /// The library's own account of its placements since the process began,
    /// where it gives one: vkcopy's record of each, which a harness watching
    /// Vulkan calls cannot rebuild (a region's role within a block, a staging
    /// ring reused, a copy the CPU makes into mapped memory).
    pub fn own_placements(&self) -> Option<Vec<PlacementRecord>> {
        let f = self.placements?;
        // SAFETY: asks for the count only.
        let n = unsafe { f(std::ptr::null_mut(), 0) };
        let mut out: Vec<LibraryPlacement> = Vec::with_capacity(n);
        // SAFETY: room for `n` records; the library writes at most that many
        // and says how many it has.
        let written = unsafe { f(out.as_mut_ptr(), n) }.min(n);
        // SAFETY: the first `written` records were written.
        unsafe { out.set_len(written) };
        Some(
            out.iter()
                .map(|p| PlacementRecord {
                    // SAFETY: the library NUL-terminates the name within the array.
                    role: unsafe { CStr::from_ptr(p.role.as_ptr()) }
                        .to_string_lossy()
                        .into_owned(),
                    memory_type: p.memory_type,
                    flags: property_flags_name(vk::MemoryPropertyFlags::from_raw(p.flags)),
                    heap: p.heap,
                    bytes: p.size,
                    fallbacks: p.fallbacks,
                    imported: p.imported != 0,
                })
                .collect(),
        )
    }
}

// SAFETY: the pointers are a static interface table and function pointers of a
// library that stays loaded for the process.
unsafe impl Send for Library {}
// SAFETY: as above; the runner calls the runtime from one thread at a time.
unsafe impl Sync for Library {}

/// Halide's entry points, each called with vkcopy's layer gate held shared:
/// Halide's Vulkan calls then never run while a vkcopy context of this process
/// is made or dropped, and the shim holds the gate exclusive around Halide's
/// own creations and destructions. The user context is always null.
///
/// # Safety (every method)
/// Each buffer is a valid `halide_buffer_t` for the call, as Halide requires.
impl Library {
    pub unsafe fn device_malloc(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer and this library's interface.
        unsafe { (self.device_malloc)(std::ptr::null_mut(), b, self.vulkan) }
    }

    /// `halide_device_and_host_malloc`: host memory from `halide_malloc` and
    /// device memory, in one call.
    pub unsafe fn device_and_host_malloc(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer and this library's interface.
        unsafe { (self.device_and_host_malloc)(std::ptr::null_mut(), b, self.vulkan) }
    }

    /// `halide_device_and_host_free`: both sides, the host's with `halide_free`.
    pub unsafe fn device_and_host_free(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer.
        unsafe { (self.device_and_host_free)(std::ptr::null_mut(), b) }
    }

    /// `halide_can_reuse_device_allocations`.
    pub fn can_reuse_device_allocations(&self) -> bool {
        // SAFETY: takes no pointer but the null user context.
        unsafe { (self.can_reuse)(std::ptr::null_mut()) }
    }

    pub unsafe fn device_free(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer.
        unsafe { (self.device_free)(std::ptr::null_mut(), b) }
    }

    pub unsafe fn copy_to_device(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer and this library's interface.
        unsafe { (self.copy_to_device)(std::ptr::null_mut(), b, self.vulkan) }
    }

    pub unsafe fn copy_to_host(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer.
        unsafe { (self.copy_to_host)(std::ptr::null_mut(), b) }
    }

    /// `halide_buffer_copy` to the device when `to_device`, else to the host.
    pub unsafe fn buffer_copy(
        &self,
        src: *mut HalideBuffer,
        to_device: bool,
        dst: *mut HalideBuffer,
    ) -> c_int {
        let iface = if to_device {
            self.vulkan
        } else {
            std::ptr::null()
        };
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffers.
        unsafe { (self.buffer_copy)(std::ptr::null_mut(), src, iface, dst) }
    }

    pub unsafe fn device_crop(&self, src: *const HalideBuffer, dst: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffers.
        unsafe { (self.device_crop)(std::ptr::null_mut(), src, dst) }
    }

    pub unsafe fn device_slice(
        &self,
        src: *const HalideBuffer,
        dim: c_int,
        pos: c_int,
        dst: *mut HalideBuffer,
    ) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffers.
        unsafe { (self.device_slice)(std::ptr::null_mut(), src, dim, pos, dst) }
    }

    pub unsafe fn device_release_crop(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer.
        unsafe { (self.device_release_crop)(std::ptr::null_mut(), b) }
    }

    /// `halide_device_release`: Halide drops its context (its device and
    /// instance), taking the gate exclusive in the shim. No buffer may hold a
    /// device allocation of this runtime any more.
    pub unsafe fn device_release(&self) {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: this library's own interface.
        unsafe { (self.device_release)(std::ptr::null_mut(), self.vulkan) }
    }

    pub fn reuse_device_allocations(&self, on: bool) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: takes no pointer but the null user context.
        unsafe { (self.reuse_device_allocations)(std::ptr::null_mut(), on) }
    }
}

static LOADED: OnceLock<Result<Library, String>> = OnceLock::new();

/// The runtime library at `path`, loaded on first use. A process holds one
/// Halide runtime (its state is global), so a later call with another path is
/// an error.
pub fn library(path: &Path) -> Result<&'static Library, String> {
    let lib = LOADED.get_or_init(|| load(path)).as_ref()?;
    if Path::new(&lib.path) != path {
        return Err(format!(
            "this process already runs Halide's runtime from {}; one runtime per process",
            lib.path
        ));
    }
    Ok(lib)
}

fn load(path: &Path) -> Result<Library, String> {
    let shown = path.display().to_string();
    // SAFETY: loading runs the library's initializers; a Halide runtime has
    // none beyond static data.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("cannot load Halide's runtime {shown}: {e}"))?;
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol's type is the one `HalideRuntime*.h` declares.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{shown}: no {}: {e}", $name))?
        };
    }
    let interface: Interface = sym!("halide_vulkan_device_interface");
    // SAFETY: returns a pointer to a static table.
    let vulkan = unsafe { interface() };
    let l = Library {
        vulkan,
        device_malloc: sym!("halide_device_malloc"),
        device_and_host_malloc: sym!("halide_device_and_host_malloc"),
        device_and_host_free: sym!("halide_device_and_host_free"),
        can_reuse: sym!("halide_can_reuse_device_allocations"),
        device_free: sym!("halide_device_free"),
        copy_to_device: sym!("halide_copy_to_device"),
        copy_to_host: sym!("halide_copy_to_host"),
        buffer_copy: sym!("halide_buffer_copy"),
        device_crop: sym!("halide_device_crop"),
        device_slice: sym!("halide_device_slice"),
        device_release_crop: sym!("halide_device_release_crop"),
        device_release: sym!("halide_device_release"),
        reuse_device_allocations: sym!("halide_reuse_device_allocations"),
        set_error_handler: sym!("halide_set_error_handler"),
        set_custom_print: sym!("halide_set_custom_print"),
        set_get_library_symbol: sym!("halide_set_custom_get_library_symbol"),
        // SAFETY: the symbol's type is the one vkcopy-halide's README gives.
        copy_counts: unsafe { lib.get::<CopyCounts>(b"vkcopy_halide_copy_counts\0") }
            .ok()
            .map(|f| *f),
        // SAFETY: as above (halide-abi/src/placements.rs).
        placements: unsafe { lib.get::<Placements>(b"vkcopy_halide_placements\0") }
            .ok()
            .map(|f| *f),
        // SAFETY: as above (halide-abi/src/vulkan.rs).
        set_setting: unsafe { lib.get::<SetSetting>(b"vkcopy_halide_set_setting\0") }
            .ok()
            .map(|f| *f),
        path: shown,
        _lib: lib,
    };
    // SAFETY: the handlers are `extern "C"` functions of the right types that
    // live for the process.
    unsafe {
        (l.set_error_handler)(on_error);
        (l.set_custom_print)(on_print);
        (l.set_get_library_symbol)(super::shim::get_library_symbol);
    }
    Ok(l)
}

static MESSAGES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// What `halide_error` reported since the last call.
pub fn take_errors() -> Vec<String> {
    std::mem::take(&mut *MESSAGES.lock().unwrap_or_else(|p| p.into_inner()))
}

unsafe extern "C" fn on_error(_user_context: *mut c_void, msg: *const c_char) {
    if msg.is_null() {
        return;
    }
    // SAFETY: Halide passes a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
    MESSAGES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(text.trim().to_owned());
}

/// Halide's prints (debug runtimes, warnings) go to stderr, as its default does.
unsafe extern "C" fn on_print(_user_context: *mut c_void, msg: *const c_char) {
    if !msg.is_null() {
        // SAFETY: Halide passes a NUL-terminated string.
        eprint!("{}", unsafe { CStr::from_ptr(msg) }.to_string_lossy());
    }
}

/// The name of a Halide error code, as `expect_error` names errors (vkcopy's
/// names where the two runtimes mean the same).
pub fn error_name(code: c_int) -> &'static str {
    match code {
        -11 => "out_of_memory",
        -14 => "copy_to_host_failed",
        -15 => "copy_to_device_failed",
        -16 => "device_malloc_failed",
        -17 => "device_sync_failed",
        -18 => "device_free_failed",
        -19 => "no_device_interface",
        -34 => "host_is_null",
        -36 => "no_device_allocation",
        -37 => "both_dirty",
        -38 => "buffer_is_null",
        -39 => "device_buffer_copy_failed",
        -40 => "device_crop_unsupported",
        -41 => "device_crop_failed",
        -42 => "incompatible_device_interface",
        -43 => "bad_dimensions",
        -44 => "device_dirty",
        _ => "halide_error",
    }
}
