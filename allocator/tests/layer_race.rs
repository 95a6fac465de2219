//! The Khronos validation layer (1.3.239, Debian 12) finds its per-device state
//! in a process-wide map (`layer_data_map`, read by `GetLayerDataPtr` in every
//! entry point) that `vkCreateDevice` / `vkDestroyDevice` (and the instance
//! calls) change without a lock that readers take (Vulkan-ValidationLayers
//! issue 4391). So one thread's device creation or destruction can crash
//! another thread's unrelated call on its own device.
//!
//! `contexts_made_and_dropped_beside_copies`: vkcopy contexts made and dropped
//! on two threads while two others copy on contexts of their own and make
//! calls of their own through `Context::raw_instance`, under the layer. vkcopy's layer gate (`vk/gate.rs`) holds every call shared and every
//! creation and destruction exclusive; before it, this crashed within seconds.
//! `plain_ash_beside_device_churn` is the reproducer with plain `ash` and no
//! vkcopy code (ignored: with `LAYER_RACE_GATE=0` it crashes, by design; with
//! `1` it takes `vkcopy::layer_gate`, as an application would). `LAYER_RACE_SECS` sets how long
//! each runs (default 3); `LAYER_RACE_VALIDATION=0` runs the plain one without
//! the layer, as a control.
//!
//! Creation and destruction are serialised among themselves in the plain
//! reproducer (as vkcopy's `lifecycle()` does, for Vulkan-Loader issue 2018),
//! so its crash is not the loader's.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vkcopy::ash;
use vkcopy::ash::vk;

mod common;

fn seconds() -> u64 {
    std::env::var("LAYER_RACE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

#[test]
fn contexts_made_and_dropped_beside_copies() {
    let layered = || vkcopy::ContextOptions {
        validation: common::validation_installed(),
        ..vkcopy::ContextOptions::default()
    };
    if common::context(layered()).is_none() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(seconds());
    let (copies, cycles) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..2i64 {
            let copies = &copies;
            s.spawn(move || {
                let ctx = vkcopy::Context::new(layered()).unwrap();
                let mut i = 0i64;
                while Instant::now() < deadline {
                    let seed = t * 1_000_000 + i;
                    let mut b = vkcopy::Buffer::new("b", vkcopy::ElemType::U32, &[1024]).unwrap();
                    b.fill(|c| c[0] + seed).unwrap();
                    ctx.copy_to_device(&mut b).unwrap();
                    b.fill(|_| -1).unwrap();
                    b.set_host_dirty(false);
                    b.set_device_dirty(true);
                    ctx.copy_to_host(&mut b).unwrap();
                    assert_eq!(b.compare(|c| c[0] + seed, 1).unwrap().mismatches, 0);
                    // And a caller's own calls, through the functions vkcopy hands out.
                    for _ in 0..200 {
                        let instance = ctx.raw_instance();
                        // SAFETY: the context's live physical device.
                        let props = unsafe {
                            instance.get_physical_device_properties(ctx.raw_physical_device())
                        };
                        assert!(props.limits.max_storage_buffer_range > 0);
                    }
                    i += 1;
                }
                copies.fetch_add(i as u64, Ordering::Relaxed);
                common::assert_clean(&ctx);
            });
        }
        for _ in 0..2 {
            let cycles = &cycles;
            s.spawn(move || {
                while Instant::now() < deadline {
                    let ctx = vkcopy::Context::new(layered()).unwrap();
                    assert!(ctx.take_validation_messages().is_empty());
                    drop(ctx);
                    cycles.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let (copies, cycles) = (copies.into_inner(), cycles.into_inner());
    eprintln!(
        "{} s: {copies} round trips beside {cycles} contexts made and dropped, layer {}",
        seconds(),
        if common::validation_installed() {
            "on"
        } else {
            "off"
        }
    );
    assert!(
        copies > 0 && cycles > 0,
        "{copies} round trips, {cycles} contexts"
    );
}

static LIFECYCLE: Mutex<()> = Mutex::new(());

/// With `LAYER_RACE_GATE=1`, the plain program takes vkcopy's gate as an
/// application sharing the process with vkcopy would (`vkcopy::layer_gate`):
/// every call holds it shared, every create and destroy exclusive.
fn gated() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("LAYER_RACE_GATE").is_ok_and(|v| v == "1"))
}

fn write_gate() -> Option<vkcopy::layer_gate::Exclusive> {
    gated().then(vkcopy::layer_gate::creating)
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

#[test]
#[ignore = "the layer's race with plain ash: crashes by design without LAYER_RACE_GATE=1"]
fn plain_ash_beside_device_churn() {
    if std::env::var_os("LAYER_RACE_GATE").is_none() {
        eprintln!("set LAYER_RACE_GATE=0 (no gate: crashes) or 1 (gated) to run this");
        return;
    }
    let (seconds, callers, churners) = (seconds(), 2, 2);
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
                    let _gate = gated().then(vkcopy::layer_gate::calling);
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
    eprintln!(
        "survived {seconds} s: {} vkResetCommandBuffer calls beside {} device create/destroy cycles, validation {layer:?}",
        calls.load(Ordering::Relaxed),
        cycles.load(Ordering::Relaxed)
    );
}
