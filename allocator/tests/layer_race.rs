//! Reproducer of a crash in the Khronos validation layer (1.3.239, Debian 12),
//! with plain `ash` and no vkcopy code: the layer finds its per-device state in a
//! process-wide map (`layer_data_map`, read by `GetLayerDataPtr` in every entry
//! point) that `vkCreateDevice` / `vkDestroyDevice` (and the instance calls)
//! change without a lock that readers take (Vulkan-ValidationLayers issue 4391).
//! So one thread's device creation or destruction can crash another thread's
//! unrelated call on its own device, here `vkResetCommandBuffer`.
//!
//! Creation and destruction are serialised among themselves here (as vkcopy's
//! `lifecycle()` does, for Vulkan-Loader issue 2018), so the crash below is not
//! the loader's.
//!
//! `cargo run --example layer_race -- SECONDS [THREADS_CALLING] [THREADS_CHURNING]`;
//! validation on unless `LAYER_RACE_VALIDATION=0`; `LAYER_RACE_GATE=1` holds a
//! process-wide `RwLock` for reading around each call and for writing around each
//! create and destroy (the avoidance proposed in TESTING.md). Exits 0 when it
//! survived.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ash::vk;

static LIFECYCLE: Mutex<()> = Mutex::new(());

/// With `LAYER_RACE_GATE=1`, the avoidance proposed in TESTING.md: every
/// call holds this for reading, every create and destroy for writing.
static GATE: RwLock<()> = RwLock::new(());

fn gated() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("LAYER_RACE_GATE").is_ok_and(|v| v == "1"))
}

fn write_gate() -> Option<std::sync::RwLockWriteGuard<'static, ()>> {
    gated().then(|| GATE.write().unwrap())
}

fn instance(entry: &ash::Entry, validation: bool) -> ash::Instance {
    let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    let mut info = vk::InstanceCreateInfo::default().application_info(&app);
    if validation {
        info = info.enabled_layer_names(&layers);
    }
    let _order = LIFECYCLE.lock().unwrap();
    let _gate = write_gate();
    // SAFETY: every pointer in `info` refers to locals alive across the call.
    unsafe { entry.create_instance(&info, None) }.expect("vkCreateInstance")
}

fn device(instance: &ash::Instance) -> (vk::PhysicalDevice, ash::Device) {
    // SAFETY: a live instance.
    let physical = unsafe { instance.enumerate_physical_devices() }.expect("devices")[0];
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
    let _order = LIFECYCLE.lock().unwrap();
    let _gate = write_gate();
    // SAFETY: a physical device of `instance`; `info` refers to live locals.
    let device = unsafe { instance.create_device(physical, &info, None) }.expect("vkCreateDevice");
    (physical, device)
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let seconds = args.first().copied().unwrap_or(30);
    let callers = args.get(1).copied().unwrap_or(2);
    let churners = args.get(2).copied().unwrap_or(2);
    let validation = std::env::var("LAYER_RACE_VALIDATION").map_or(true, |v| v != "0");
    // SAFETY: loads the system loader; it stays loaded for the process.
    let entry = Arc::new(unsafe { ash::Entry::load() }.expect("loader"));
    // One instance kept for the process, so the drivers stay loaded.
    let _keep = instance(&entry, false);
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let cycles = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for _ in 0..callers {
        let (entry, stop, calls) = (entry.clone(), stop.clone(), calls.clone());
        threads.push(std::thread::spawn(move || {
            let instance = instance(&entry, validation);
            let (_, device) = device(&instance);
            // SAFETY: objects of this thread's device, used by this thread only,
            // destroyed in reverse order before the device.
            unsafe {
                let pool = device
                    .create_command_pool(
                        &vk::CommandPoolCreateInfo::default()
                            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                        None,
                    )
                    .unwrap();
                let cmd = device
                    .allocate_command_buffers(
                        &vk::CommandBufferAllocateInfo::default()
                            .command_pool(pool)
                            .command_buffer_count(1),
                    )
                    .unwrap()[0];
                while !stop.load(Ordering::Relaxed) {
                    let _gate = gated().then(|| GATE.read().unwrap());
                    device
                        .reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                        .unwrap();
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                device.destroy_command_pool(pool, None);
                let _order = LIFECYCLE.lock().unwrap();
                let _gate = write_gate();
                device.destroy_device(None);
                instance.destroy_instance(None);
            }
        }));
    }
    for _ in 0..churners {
        let (entry, stop, cycles) = (entry.clone(), stop.clone(), cycles.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let instance = instance(&entry, validation);
                let (_, device) = device(&instance);
                let _order = LIFECYCLE.lock().unwrap();
                let _gate = write_gate();
                // SAFETY: nothing was made from either; destroyed in order.
                unsafe {
                    device.destroy_device(None);
                    instance.destroy_instance(None);
                }
                cycles.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let layer: &CStr = if validation { c"on" } else { c"off" };
    println!(
        "survived {seconds} s: {} vkResetCommandBuffer calls beside {} device create/destroy cycles, validation {layer:?}",
        calls.load(Ordering::Relaxed),
        cycles.load(Ordering::Relaxed)
    );
}
