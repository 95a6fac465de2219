//! The one vkcopy context behind Halide's entry points: made on first use from
//! the settings of `config`, shared by every buffer and kernel, and torn down
//! by `halide_device_release` once nothing uses it.
//!
//! Vulkan is resolved through `halide_load_library` and
//! `halide_get_library_symbol`, as Halide's runtime does, so an application
//! (or a test harness) that replaces those sees every Vulkan call.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use vkcopy::{
    ash::vk, AllocConfig, Context, ContextOptions, CopyPath, DeviceSelector, DeviceTypeFilter,
    ExternalDevice, Placement,
};

use crate::config;
use crate::error::Failure;
use crate::ffi;

/// A context and what identifies it among the contexts of the process.
pub(crate) struct Device {
    pub(crate) ctx: Context,
    /// Distinguishes this context from earlier ones, for kernel caches made on
    /// one that `halide_device_release` has since torn down.
    pub(crate) generation: u64,
}

static CURRENT: Mutex<Option<Arc<Device>>> = Mutex::new(None);
/// Whether the current context has the validation layer.
static VALIDATING: AtomicBool = AtomicBool::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The context, made on first use.
pub(crate) fn acquire() -> Result<Arc<Device>, Failure> {
    let mut cur = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = &*cur {
        return Ok(d.clone());
    }
    register_pool();
    load_vulkan()?;
    let made = match application_device()? {
        // SAFETY: the application's acquire hook vouches for its handles, as
        // Halide's runtime takes them on trust too.
        Some(e) => unsafe { Context::on_device(e, options()?) },
        None => Context::new(options()?),
    };
    let ctx = made.map_err(|e| Failure::vk(ffi::code::GPU_DEVICE_ERROR, e))?;
    VALIDATING.store(ctx.validation(), Ordering::Relaxed);
    let d = Arc::new(Device {
        ctx,
        generation: GENERATION.fetch_add(1, Ordering::Relaxed),
    });
    *cur = Some(d.clone());
    crate::trace::say("vk_create_context (vkcopy)");
    Ok(d)
}

type Acquire = unsafe extern "C" fn(
    ffi::Uc,
    *mut *mut c_void,
    *mut u64,
    *mut u64,
    *mut u64,
    *mut u64,
    *mut u32,
    *mut u64,
    bool,
) -> c_int;
type Release = unsafe extern "C" fn(ffi::Uc, u64, u64, u64, u64) -> c_int;

/// The application's device, where it defines `halide_vulkan_acquire_context`
/// itself (as Halide lets it, to share its instance, device and queue): found
/// in the process's symbols when it is not this library's own. Asked once;
/// `halide_vulkan_release_context` (the application's too) is called right
/// after, since vkcopy keeps no lock of the application's between calls.
fn application_device() -> Result<Option<ExternalDevice>, Failure> {
    let find = |name: &CStr| {
        // SAFETY: dlsym of a NUL-terminated name in the process's global scope.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
    };
    // Ours or the application's: by the object each lives in (a reference to
    // our own exported symbol would itself bind to the application's).
    let object = |p: *const c_void| {
        // SAFETY: Dl_info is plain pointers, for which zero is a valid value.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr fills `info` for any address, or returns 0.
        (unsafe { libc::dladdr(p, &mut info) } != 0).then_some(info.dli_fbase)
    };
    let here = object(application_device as *const c_void);
    let theirs = |f: *mut c_void| !f.is_null() && object(f.cast_const()) != here;
    let f = find(c"halide_vulkan_acquire_context");
    if !theirs(f) {
        return Ok(None);
    }
    // SAFETY: the symbol has the type HalideRuntimeVulkan.h declares.
    let acquire: Acquire = unsafe { std::mem::transmute::<*mut c_void, Acquire>(f) };
    let mut allocator = std::ptr::null_mut();
    let (mut instance, mut device, mut physical, mut queue, mut messenger) = (0, 0, 0, 0, 0);
    let mut family = 0u32;
    // SAFETY: every pointer is to a local.
    let code = unsafe {
        acquire(
            std::ptr::null_mut(),
            &mut allocator,
            &mut instance,
            &mut device,
            &mut physical,
            &mut queue,
            &mut family,
            &mut messenger,
            true,
        )
    };
    if code != 0 {
        return Err(Failure::new(
            code,
            format!("the application's halide_vulkan_acquire_context returned {code}"),
        ));
    }
    let r = find(c"halide_vulkan_release_context");
    if theirs(r) {
        // SAFETY: as above, for the release hook, given what acquire gave.
        unsafe {
            let release = std::mem::transmute::<*mut c_void, Release>(r);
            release(std::ptr::null_mut(), instance, device, queue, messenger);
        }
    }
    if instance == 0 || device == 0 || physical == 0 || queue == 0 {
        return Err(Failure::new(
            ffi::code::GPU_DEVICE_ERROR,
            "the application's halide_vulkan_acquire_context gave a null instance, device, physical device or queue".into(),
        ));
    }
    use vkcopy::ash::vk::Handle;
    Ok(Some(ExternalDevice {
        instance: vk::Instance::from_raw(instance),
        physical_device: vk::PhysicalDevice::from_raw(physical),
        device: vk::Device::from_raw(device),
        queue: vk::Queue::from_raw(queue),
        queue_family: family,
    }))
}

/// The context if one is open.
pub(crate) fn current() -> Option<Arc<Device>> {
    CURRENT.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// What the validation layer said since the last call, as a failure (when
/// the layer is on: `HL_VK_LAYERS`).
pub(crate) fn validation_findings() -> Result<(), Failure> {
    // Without the layer (the usual case) every call returns here, unlocked.
    if !VALIDATING.load(Ordering::Relaxed) {
        return Ok(());
    }
    let Some(d) = current() else {
        return Ok(());
    };
    if !d.ctx.validation() {
        return Ok(());
    }
    let found = d.ctx.take_validation_messages();
    if found.is_empty() {
        return Ok(());
    }
    Err(Failure::new(
        ffi::code::GENERIC_ERROR,
        format!("the validation layer: {}", found.join("; ")),
    ))
}

/// Halide's generic runtime lets each device API give back what it keeps
/// when reuse is turned off (`halide_reuse_device_allocations(false)`), as
/// Halide's own Vulkan runtime registers its pool: once per process.
fn register_pool() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let pool = Box::leak(Box::new(ffi::AllocationPool {
            release_unused: pool_release_unused,
            next: std::ptr::null_mut(),
        }));
        // SAFETY: the pool lives as long as the process; Halide links it
        // into its list under its own lock.
        unsafe { ffi::halide_register_device_allocation_pool(pool) };
    });
}

/// The pool's entry: what `halide_vulkan_release_unused_device_allocations`
/// does, without its error report (nothing here fails).
unsafe extern "C" fn pool_release_unused(uc: ffi::Uc) -> std::ffi::c_int {
    release_unused(uc);
    0
}

/// Takes up Halide's reuse flag and gives back what the context keeps for
/// reuse.
pub(crate) fn release_unused(uc: ffi::Uc) {
    if let Some(d) = current() {
        follow_reuse(uc, &d);
        d.ctx.release_unused();
    }
}

/// Follows Halide's reuse flag (`halide_can_reuse_device_allocations`, which
/// an application may override): turned off, what is unused goes back now and
/// every freed region from then on.
pub(crate) fn follow_reuse(uc: ffi::Uc, d: &Device) {
    // SAFETY: a plain query of Halide's generic runtime.
    let on = unsafe { ffi::halide_can_reuse_device_allocations(uc) };
    if on != d.ctx.reuses_device_allocations() {
        d.ctx.reuse_device_allocations(on);
    }
}

/// `halide_device_release`: frees pooled memory and cached pipelines, and
/// closes the context when no buffer or kernel holds it. Returns what leaked
/// when it closed.
pub(crate) fn release() -> Option<vkcopy::LeakReport> {
    let mut cur = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    let d = cur.take()?;
    let counts = copy_counts_of(&d.ctx);
    d.ctx.release_pipelines();
    d.ctx.device_release();
    match Arc::try_unwrap(d) {
        Ok(d) => {
            let mut closed = CLOSED.lock().unwrap_or_else(|p| p.into_inner());
            for (c, n) in closed.iter_mut().zip(counts) {
                *c += n;
            }
            crate::trace::say("vk_destroy_context (vkcopy)");
            CLOSED_PLACEMENTS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(d.ctx.stats().placements());
            Some(d.ctx.close())
        }
        Err(d) => {
            // Buffers or kernels still use it: it stays the context.
            *cur = Some(d);
            None
        }
    }
}

/// Placements of contexts already closed, oldest first.
static CLOSED_PLACEMENTS: Mutex<Vec<Placement>> = Mutex::new(Vec::new());

/// Every placement since the process began, oldest first (vkcopy keeps the
/// latest 4096 of each context).
pub(crate) fn placements() -> Vec<Placement> {
    let mut all = CLOSED_PLACEMENTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some(d) = current() {
        all.extend(d.ctx.stats().placements());
    }
    all
}

/// Copies and bytes of contexts already closed, in [`copy_counts`]' order.
static CLOSED: Mutex<[u64; 6]> = Mutex::new([0; 6]);

fn copy_counts_of(ctx: &Context) -> [u64; 6] {
    let mut out = [0; 6];
    let paths = [
        CopyPath::HostToDevice,
        CopyPath::DeviceToHost,
        CopyPath::DeviceToDevice,
    ];
    for (i, p) in paths.into_iter().enumerate() {
        let c = ctx.copy_stats(p);
        (out[2 * i], out[2 * i + 1]) = (c.copies, c.bytes);
    }
    out
}

/// Copies and bytes made since the process began, to the device, to the
/// host and device to device: `[copies, bytes]` of each, in that order.
pub(crate) fn copy_counts() -> [u64; 6] {
    let mut out = *CLOSED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = current() {
        for (o, n) in out.iter_mut().zip(copy_counts_of(&d.ctx)) {
            *o += n;
        }
    }
    out
}

fn options() -> Result<ContextOptions, Failure> {
    let mut o = ContextOptions::from_settings(config::vkcopy_setting)
        .map_err(|e| Failure::vk(ffi::code::GENERIC_ERROR, e))?;
    if let Some(t) = config::DEVICE_TYPE.get() {
        let f = DeviceTypeFilter::parse(&t).ok_or_else(|| {
            Failure::new(
                ffi::code::GENERIC_ERROR,
                format!("HL_VK_DEVICE_TYPE {t:?}: not a device type (cpu, gpu, integrated-gpu, discrete-gpu, virtual-gpu)"),
            )
        })?;
        o.device = DeviceSelector::Type(f);
    }
    // Halide's way to ask for the layer; VKCOPY_VALIDATION is for vkcopy's own
    // contexts, and a host that loads the layer itself would get it twice.
    o.validation = false;
    if let Some(layers) = config::LAYERS.get() {
        o.validation = config::names(&layers).any(|n| n == "VK_LAYER_KHRONOS_validation");
    }
    if let Some(c) = config::ALLOC_CONFIG.get() {
        o.alloc_config = AllocConfig::parse(&c).map_err(|e| {
            Failure::new(
                ffi::code::GENERIC_ERROR,
                format!("HL_VK_ALLOC_CONFIG {c:?}: {e}"),
            )
        })?;
    }
    Ok(o)
}

/// Points vkcopy at the loader Halide's library functions give.
fn load_vulkan() -> Result<(), Failure> {
    static DONE: Mutex<bool> = Mutex::new(false);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if *done {
        return Ok(());
    }
    let name = std::env::var("HL_VK_LOADER_LIB").unwrap_or_else(|_| "libvulkan.so.1".into());
    let cname = CString::new(name.clone()).map_err(|_| {
        Failure::new(
            ffi::code::GENERIC_ERROR,
            "HL_VK_LOADER_LIB has a NUL".into(),
        )
    })?;
    // SAFETY: both are Halide's runtime functions, given NUL-terminated names.
    let gipa = unsafe {
        let lib = ffi::halide_load_library(cname.as_ptr());
        if lib.is_null() {
            return Err(Failure::new(
                ffi::code::GPU_DEVICE_ERROR,
                format!("cannot load the Vulkan loader {name}"),
            ));
        }
        ffi::halide_get_library_symbol(lib, c"vkGetInstanceProcAddr".as_ptr())
    };
    if gipa.is_null() {
        return Err(Failure::new(
            ffi::code::GPU_DEVICE_ERROR,
            format!("{name} has no vkGetInstanceProcAddr"),
        ));
    }
    // SAFETY: the loader's vkGetInstanceProcAddr (or what the application
    // resolved in its place), from a library Halide keeps loaded.
    unsafe {
        let gipa: vk::PFN_vkGetInstanceProcAddr = std::mem::transmute(gipa);
        vkcopy::use_loader(gipa);
    }
    *done = true;
    Ok(())
}

/// A C string's text, for messages.
///
/// # Safety
/// `p` is null or NUL-terminated.
pub(crate) unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}
