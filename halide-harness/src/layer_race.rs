//! Halide's runtime making and dropping its context beside vkcopy contexts that
//! copy, others made and dropped, and an application's own instances and
//! devices (one of them shared with a vkcopy context, as
//! `halide_vulkan_acquire_context` shares it), all under the validation layer,
//! in one process. The layer's per-device map is changed by every creation and
//! destruction without a lock its readers take (Vulkan-ValidationLayers issue
//! 4391). vkcopy's gate covers its own calls; the shim and `ffi::Library` put
//! Halide's under the same gate, and the application takes it through
//! `vkcopy::layer_gate`. Without the gate on Halide's side this crashes within
//! a minute (TESTING.md has the figures). `LAYER_RACE_SECS` sets how long
//! (default 3). Needs Halide's runtime (`scripts/halide-runtime.sh 21.0.0`);
//! without one the test says so and passes.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{ffi, shim};
use vkcopy::ash;
use vkcopy::layer_gate;
use vkcopy::ExternalDevice;
use vkcopy_engine::rt::{vk, Buffer, Context, ContextOptions, ElemType};
use vkcopy_engine::runtime::Runtime;

fn seconds() -> u64 {
    std::env::var("LAYER_RACE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

fn layered() -> ContextOptions {
    ContextOptions {
        validation: Path::new("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")
            .exists(),
        ..ContextOptions::default()
    }
}

/// An application's own instance and device (Vulkan 1.2, timeline
/// semaphores, a queue of family 0), made and destroyed under the gate.
struct AppDevice {
    instance: ash::Instance,
    device: ash::Device,
    external: ExternalDevice,
}

fn app_device(entry: &ash::Entry) -> AppDevice {
    let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    let mut info = vk::InstanceCreateInfo::default().application_info(&app);
    if layered().validation {
        info = info.enabled_layer_names(&layers);
    }
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
    let _lifecycle = layer_gate::creating();
    // SAFETY: a valid create info over locals.
    let instance = unsafe { entry.create_instance(&info, None) }.expect("vkCreateInstance");
    // SAFETY: the instance is alive.
    let physical = unsafe { instance.enumerate_physical_devices() }.expect("devices")[0];
    let info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .push_next(&mut v12);
    // SAFETY: a physical device of `instance`; `info` refers to live locals.
    let device = unsafe { instance.create_device(physical, &info, None) }.expect("vkCreateDevice");
    // SAFETY: one queue of family 0 was asked for (lavapipe's and every
    // desktop GPU's family 0 has compute).
    let queue = unsafe { device.get_device_queue(0, 0) };
    let external = ExternalDevice {
        instance: instance.handle(),
        physical_device: physical,
        device: device.handle(),
        queue,
        queue_family: 0,
    };
    AppDevice {
        instance,
        device,
        external,
    }
}

impl Drop for AppDevice {
    fn drop(&mut self) {
        let _lifecycle = layer_gate::creating();
        // SAFETY: nothing made from them is alive; device first.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

#[test]
fn halide_contexts_made_and_dropped_beside_vkcopy_copies() {
    let lib = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/halide/21.0.0/libhalide_runtime_vulkan.so"
    ));
    if !lib.is_file() {
        eprintln!("skipped: no Halide runtime (scripts/halide-runtime.sh 21.0.0 builds it)");
        return;
    }
    if let Err(e) = Context::new(layered()) {
        assert!(std::env::var_os("CI").is_none(), "no Vulkan device: {e}");
        eprintln!("skipped: {e}");
        return;
    }
    // SAFETY: loads the system loader; it stays loaded for the test.
    let entry = unsafe { ash::Entry::load() }.expect("loader");
    let deadline = Instant::now() + Duration::from_secs(seconds());
    let (copies, cycles, halide) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..2i64 {
            let copies = &copies;
            s.spawn(move || {
                let ctx = Context::new(layered()).unwrap();
                let mut i = 0i64;
                while Instant::now() < deadline {
                    let seed = t * 1_000_000 + i;
                    let mut b = Buffer::new("b", ElemType::U32, &[1024]).unwrap();
                    b.fill(|c| c[0] + seed).unwrap();
                    ctx.copy_to_device(&mut b).unwrap();
                    b.fill(|_| -1).unwrap();
                    b.set_host_dirty(false);
                    b.set_device_dirty(true);
                    ctx.copy_to_host(&mut b).unwrap();
                    assert_eq!(b.compare(|c| c[0] + seed, 1).unwrap().mismatches, 0);
                    i += 1;
                }
                copies.fetch_add(i as u64, Ordering::Relaxed);
                assert_eq!(ctx.take_validation_messages(), Vec::<String>::new());
            });
        }
        {
            let cycles = &cycles;
            s.spawn(move || {
                while Instant::now() < deadline {
                    let ctx = Context::new(layered()).unwrap();
                    assert_eq!(ctx.take_validation_messages(), Vec::<String>::new());
                    drop(ctx);
                    cycles.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // The application: a device of its own shared with a vkcopy context, and
        // its own calls on it; and its instances and devices made and dropped.
        let entry = &entry;
        s.spawn(move || {
            let app = app_device(entry);
            // SAFETY: the application's live handles outlive the context, and it
            // submits nothing to the queue.
            let ctx =
                unsafe { Context::on_device(app.external, ContextOptions::default()) }.unwrap();
            let mut i = 0i64;
            while Instant::now() < deadline {
                let mut b = Buffer::new("b", ElemType::U16, &[3000]).unwrap();
                b.fill(|c| (c[0] + i) % 65536).unwrap();
                ctx.copy_to_device(&mut b).unwrap();
                b.fill(|_| 0).unwrap();
                b.set_host_dirty(false);
                b.set_device_dirty(true);
                ctx.copy_to_host(&mut b).unwrap();
                assert_eq!(b.compare(|c| (c[0] + i) % 65536, 1).unwrap().mismatches, 0);
                let _calls = layer_gate::calling();
                // SAFETY: the application's live device and instance.
                unsafe {
                    app.device.device_wait_idle().unwrap();
                    let props = app
                        .instance
                        .get_physical_device_properties(app.external.physical_device);
                    assert!(props.limits.max_storage_buffer_range > 0);
                }
                i += 1;
            }
            assert!(ctx.close().is_empty());
        });
        s.spawn(move || {
            while Instant::now() < deadline {
                drop(app_device(entry));
            }
        });
        let halide = &halide;
        s.spawn(move || {
            let mut rt = super::open(lib, &layered(), vec!["a".into()]).unwrap();
            let mut i = 0i64;
            while Instant::now() < deadline {
                let mut b = Buffer::new("a", ElemType::U32, &[1024]).unwrap();
                b.fill(|c| 7 * c[0] + i).unwrap();
                rt.put(0, b).unwrap();
                rt.set_dirty(0, Some(true), None).unwrap();
                rt.copy_to_device(0).unwrap();
                assert_eq!(shim::live().devices, 1, "Halide's context is up");
                rt.host_mut(0).unwrap().fill(|_| -1).unwrap();
                rt.set_dirty(0, Some(false), Some(true)).unwrap();
                rt.copy_to_host(0).unwrap();
                let back = rt.host(0).unwrap().compare(|c| 7 * c[0] + i, 1).unwrap();
                assert_eq!(back.mismatches, 0, "Halide's round trip {i}");
                rt.device_free(0).unwrap();
                rt.device_release().unwrap();
                assert_eq!(shim::live().devices, 0, "Halide's context is dropped");
                i += 1;
            }
            let end = rt.finish();
            assert_eq!(end.messages, Vec::<String>::new());
            assert_eq!(end.findings, Vec::<String>::new());
            assert_eq!(end.leaks, None);
            assert_eq!(ffi::take_errors(), Vec::<String>::new());
            halide.fetch_add(i as u64, Ordering::Relaxed);
        });
    });
    let (copies, cycles, halide) = (
        copies.into_inner(),
        cycles.into_inner(),
        halide.into_inner(),
    );
    eprintln!(
        "{} s: {copies} vkcopy round trips and {cycles} vkcopy contexts beside {halide} Halide contexts made and dropped",
        seconds()
    );
    assert!(copies > 0 && cycles > 0 && halide > 0);
}
