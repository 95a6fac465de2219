//! A context on a device the caller made (Halide's
//! `halide_vulkan_acquire_context`): copies run on the caller's queue, and the
//! caller's device outlives the context, still usable after it.

use ash::vk;
use vkcopy::{Buffer, Context, ContextOptions, ElemType, ExternalDevice};

/// The caller's instance and device: Vulkan 1.2 with timeline semaphores, one
/// queue of the first compute family. `None` without a loader or device.
fn callers_device() -> Option<(ash::Entry, ash::Instance, ExternalDevice, ash::Device)> {
    // SAFETY: loading the system loader runs its initialisers.
    let entry = unsafe { ash::Entry::load() }.ok()?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: a valid create info over locals.
    let instance = unsafe { entry.create_instance(&info, None) }.ok()?;
    // SAFETY: the instance is alive.
    let physical = *unsafe { instance.enumerate_physical_devices() }
        .ok()?
        .first()?;
    // SAFETY: as above.
    let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
    let family = families
        .iter()
        .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))? as u32;
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(family)
        .queue_priorities(&priorities)];
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
    let info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .push_next(&mut v12);
    // SAFETY: a valid create info over locals.
    let device = unsafe { instance.create_device(physical, &info, None) }.ok()?;
    // SAFETY: one queue of `family` was requested.
    let queue = unsafe { device.get_device_queue(family, 0) };
    let external = ExternalDevice {
        instance: instance.handle(),
        physical_device: physical,
        device: device.handle(),
        queue,
        queue_family: family,
    };
    Some((entry, instance, external, device))
}

#[test]
fn copies_run_on_the_callers_device_which_outlives_the_context() {
    let Some((_entry, instance, external, device)) = callers_device() else {
        assert!(std::env::var_os("CI").is_none(), "no Vulkan device in CI");
        return;
    };
    // SAFETY: the handles are live and outlive the context; nothing else
    // submits to the queue meanwhile.
    let ctx = unsafe { Context::on_device(external, ContextOptions::default()) }.unwrap();
    assert_eq!(ctx.raw_device().handle(), external.device);
    assert_eq!(ctx.kernel_queue(), (external.queue, external.queue_family));
    for n in [1000i64, 3 << 20] {
        let mut b = Buffer::new("b", ElemType::U32, &[n]).unwrap();
        b.fill(|c| c[0] * 7 + 1).unwrap();
        ctx.copy_to_device(&mut b).unwrap();
        b.fill(|_| 0).unwrap();
        b.set_host_dirty(false);
        b.set_device_dirty(true);
        ctx.copy_to_host(&mut b).unwrap();
        let cmp = b.compare(|c| c[0] * 7 + 1, 3).unwrap();
        assert_eq!(cmp.mismatches, 0, "{n} elements: {:?}", cmp.first);
    }
    let report = ctx.close();
    assert!(report.is_empty(), "{report}");
    // The caller's device is still there: it makes and frees a buffer, then
    // goes, and its instance after it.
    let info = vk::BufferCreateInfo::default()
        .size(256)
        .usage(vk::BufferUsageFlags::TRANSFER_DST);
    // SAFETY: the device is alive; the buffer is destroyed right away, then
    // the device and the instance, which nothing uses any more.
    unsafe {
        let buf = device.create_buffer(&info, None).unwrap();
        device.destroy_buffer(buf, None);
        device.destroy_device(None);
        instance.destroy_instance(None);
    }
}
