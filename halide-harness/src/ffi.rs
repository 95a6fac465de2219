//! Halide's C ABI (`HalideRuntime.h`, `HalideRuntimeVulkan.h`), written by hand
//! for the few types and entry points the suite calls, and the runtime library
//! that exports them, loaded once per process.

use crate::HarnessError;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::OnceLock;

use vkcopy_engine::rt::{property_flags_name, vk};
use vkcopy_results::outcome::PlacementRecord;

use halide_ffi::vkcopy::{
    CopyCountsFn, Placement, PlacementsFn, SetSettingFn, COPY_COUNTS_SYMBOL, PLACEMENTS_SYMBOL,
    SET_SETTING_SYMBOL,
};
use halide_ffi::{BufferCopyFn, CropFn, DeviceInterface, MallocFn, OneBufferFn, SliceFn};
pub use halide_ffi::{HalideBuffer, HalideDimension, HalideType, DEVICE_DIRTY, HOST_DIRTY};

type Interface = unsafe extern "C" fn() -> *const DeviceInterface;
type Release = unsafe extern "C" fn(*mut c_void, *const DeviceInterface);
type Reuse = unsafe extern "C" fn(*mut c_void, bool) -> c_int;
type CanReuse = unsafe extern "C" fn(*mut c_void) -> bool;
/// `halide_set_error_handler`'s handler (and `halide_set_custom_print`'s).
pub type ErrorHandler = unsafe extern "C" fn(*mut c_void, *const c_char);
type SetErrorHandler = unsafe extern "C" fn(ErrorHandler) -> ErrorHandler;
type SetPrint = unsafe extern "C" fn(ErrorHandler) -> ErrorHandler;
/// `halide_set_custom_get_library_symbol`'s lookup, through which Halide
/// finds its Vulkan entry points.
pub type GetLibrarySymbol = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
type SetGetLibrarySymbol = unsafe extern "C" fn(GetLibrarySymbol) -> GetLibrarySymbol;

/// The entry points of one Halide runtime library.
pub struct Library {
    _lib: libloading::Library,
    /// `halide_vulkan_device_interface()`.
    pub vulkan: *const DeviceInterface,
    device_malloc: MallocFn,
    device_free: OneBufferFn,
    device_and_host_malloc: MallocFn,
    device_and_host_free: OneBufferFn,
    can_reuse: CanReuse,
    copy_to_device: MallocFn,
    copy_to_host: OneBufferFn,
    buffer_copy: BufferCopyFn,
    device_crop: CropFn,
    device_slice: SliceFn,
    device_release_crop: OneBufferFn,
    device_release: Release,
    reuse_device_allocations: Reuse,
    set_error_handler: SetErrorHandler,
    set_custom_print: SetPrint,
    set_get_library_symbol: SetGetLibrarySymbol,
    /// `vkcopy_halide_copy_counts`, where the library reports the copies it
    /// made (vkcopy's library does; Halide's runtimes do not).
    pub copy_counts: Option<CopyCountsFn>,
    /// `vkcopy_halide_placements`, where the library reports where it placed
    /// memory (vkcopy's library does).
    placements: Option<PlacementsFn>,
    /// `vkcopy_halide_set_setting`, where the library takes vkcopy's settings
    /// (vkcopy's library does).
    set_setting: Option<SetSettingFn>,
    /// Where it was loaded from, for messages.
    pub path: String,
}

impl Library {
    /// Whether the library takes vkcopy's settings: it is vkcopy's library,
    /// which runs vkcopy's policies and routes as vkcopy does.
    pub fn takes_settings(&self) -> bool {
        self.set_setting.is_some()
    }

    /// Sets vkcopy's variable `name` to `value` for the contexts the library
    /// makes from now on.
    pub fn set_setting(&self, name: &str, value: &str) -> Result<(), HarnessError> {
        let refused = |what| Err(HarnessError::Setting { what });
        let Some(f) = self.set_setting else {
            return refused(format!("{}: takes no vkcopy settings", self.path));
        };
        let (n, v) = (CString::new(name), CString::new(value));
        let (Ok(n), Ok(v)) = (n, v) else {
            return refused(format!("{name}={value:?}: has a NUL"));
        };
        // SAFETY: two NUL-terminated strings that outlive the call.
        match unsafe { f(n.as_ptr(), v.as_ptr()) } {
            0 => Ok(()),
            e => refused(format!(
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
        let mut out: Vec<Placement> = Vec::with_capacity(n);
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
    /// `halide_device_malloc`.
    ///
    /// # Safety
    /// `b` is a live `halide_buffer_t`, its shape within its host memory,
    /// any device side made by this library.
    pub unsafe fn device_malloc(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer and this library's interface.
        unsafe { (self.device_malloc)(std::ptr::null_mut(), b, self.vulkan) }
    }

    /// `halide_device_and_host_malloc`: host memory from `halide_malloc` and
    /// device memory, in one call.
    ///
    /// # Safety
    /// `b` is a live `halide_buffer_t`, its shape within its host memory,
    /// any device side made by this library.
    pub unsafe fn device_and_host_malloc(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer and this library's interface.
        unsafe { (self.device_and_host_malloc)(std::ptr::null_mut(), b, self.vulkan) }
    }

    /// `halide_device_and_host_free`: both sides, the host's with `halide_free`.
    ///
    /// # Safety
    /// `b` is a live `halide_buffer_t`, its shape within its host memory,
    /// any device side made by this library.
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

    /// `halide_device_free`.
    ///
    /// # Safety
    /// `b` is a live `halide_buffer_t`, its shape within its host memory,
    /// any device side made by this library.
    pub unsafe fn device_free(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer.
        unsafe { (self.device_free)(std::ptr::null_mut(), b) }
    }

    /// `halide_copy_to_device`.
    ///
    /// # Safety
    /// `b` is a live `halide_buffer_t`, its shape within its host memory,
    /// any device side made by this library.
    pub unsafe fn copy_to_device(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer and this library's interface.
        unsafe { (self.copy_to_device)(std::ptr::null_mut(), b, self.vulkan) }
    }

    /// `halide_copy_to_host`.
    ///
    /// # Safety
    /// `b` is a live `halide_buffer_t`, its shape within its host memory,
    /// any device side made by this library.
    pub unsafe fn copy_to_host(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer.
        unsafe { (self.copy_to_host)(std::ptr::null_mut(), b) }
    }

    /// `halide_buffer_copy` to the device when `to_device`, else to the host.
    ///
    /// # Safety
    /// The buffers are live `halide_buffer_t`s, their shapes within their
    /// host memory, any device side made by this library.
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

    /// `halide_device_crop`.
    ///
    /// # Safety
    /// The buffers are live `halide_buffer_t`s, their shapes within their
    /// host memory, any device side made by this library.
    pub unsafe fn device_crop(&self, src: *const HalideBuffer, dst: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffers.
        unsafe { (self.device_crop)(std::ptr::null_mut(), src, dst) }
    }

    /// `halide_device_slice`.
    ///
    /// # Safety
    /// The buffers are live `halide_buffer_t`s, their shapes within their
    /// host memory, any device side made by this library.
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

    /// `halide_device_release_crop`.
    ///
    /// # Safety
    /// `b` is a live `halide_buffer_t`, its shape within its host memory,
    /// any device side made by this library.
    pub unsafe fn device_release_crop(&self, b: *mut HalideBuffer) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: the caller's buffer.
        unsafe { (self.device_release_crop)(std::ptr::null_mut(), b) }
    }

    /// `halide_device_release`: Halide drops its context (its device and
    /// instance), taking the gate exclusive in the shim. No buffer may hold a
    /// device allocation of this runtime any more.
    ///
    /// # Safety
    /// No buffer may hold a device allocation of this library any more.
    pub unsafe fn device_release(&self) {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: this library's own interface.
        unsafe { (self.device_release)(std::ptr::null_mut(), self.vulkan) }
    }

    /// `halide_reuse_device_allocations`.
    pub fn reuse_device_allocations(&self, on: bool) -> c_int {
        let _calls = vkcopy::layer_gate::calling();
        // SAFETY: takes no pointer but the null user context.
        unsafe { (self.reuse_device_allocations)(std::ptr::null_mut(), on) }
    }
}

static LOADED: OnceLock<Result<Library, HarnessError>> = OnceLock::new();

/// The runtime library at `path`, loaded on first use. A process holds one
/// Halide runtime (its state is global), so a later call with another path is
/// an error.
pub fn library(path: &Path) -> Result<&'static Library, HarnessError> {
    let lib = LOADED
        .get_or_init(|| load(path))
        .as_ref()
        .map_err(Clone::clone)?;
    if Path::new(&lib.path) != path {
        return Err(HarnessError::OtherRuntime {
            loaded: lib.path.clone(),
        });
    }
    Ok(lib)
}

/// A symbol of vkcopy's library beyond Halide's ABI, if `lib` exports it.
///
/// # Safety
/// `F` is the type `halide_ffi::vkcopy` declares for `name` (vkcopy's library
/// defines the symbol with it; halide-abi checks that), and the value is used
/// only while `lib` stays loaded.
unsafe fn optional<F: Copy>(lib: &libloading::Library, name: &str) -> Option<F> {
    let name = CString::new(name).ok()?;
    // SAFETY: the caller's promise.
    unsafe { lib.get::<F>(name.as_bytes_with_nul()) }
        .ok()
        .map(|f| *f)
}

fn load(path: &Path) -> Result<Library, HarnessError> {
    let shown = path.display().to_string();
    // SAFETY: loading runs the library's initializers; a Halide runtime has
    // none beyond static data.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| HarnessError::Load {
        path: shown.clone(),
        why: e.to_string(),
    })?;
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol's type is the one `HalideRuntime*.h` declares.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| {
                HarnessError::Symbol {
                    path: shown.clone(),
                    symbol: $name,
                    why: e.to_string(),
                }
            })?
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
        // SAFETY: each with the type halide-ffi declares for its name; the
        // library is kept in `_lib` for as long as the pointers are.
        copy_counts: unsafe { optional(&lib, COPY_COUNTS_SYMBOL) },
        // SAFETY: as above.
        placements: unsafe { optional(&lib, PLACEMENTS_SYMBOL) },
        // SAFETY: as above.
        set_setting: unsafe { optional(&lib, SET_SETTING_SYMBOL) },
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

/// The name of a Halide error code, as `expect_error` names errors: Halide's
/// own (`halide-ffi`), or vkcopy's where the two runtimes mean the same
/// thing by other words; `halide_error` for a code Halide does not define.
pub fn error_name(code: c_int) -> &'static str {
    match halide_ffi::code::name(code) {
        Some("device_interface_no_device") => "no_device_allocation",
        Some("host_and_device_dirty") => "both_dirty",
        Some("device_dirty_with_no_device_support") => "device_dirty",
        Some(name) => name,
        None => "halide_error",
    }
}

#[cfg(test)]
mod tests {
    use super::error_name;

    #[test]
    fn error_names_are_halides_or_the_suites_for_the_same_error() {
        assert_eq!(error_name(-14), "copy_to_host_failed");
        assert_eq!(error_name(-19), "no_device_interface");
        assert_eq!(error_name(-36), "no_device_allocation");
        assert_eq!(error_name(-37), "both_dirty");
        assert_eq!(error_name(-1), "generic_error");
        assert_eq!(error_name(-1000), "halide_error");
    }
}
