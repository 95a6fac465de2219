//! Context creation on the real default device (lavapipe in CI): device
//! selection, errors, validation-message capture.

use ash::vk;
use vkcopy::{Context, ContextOptions, DeviceSelector, DeviceType, DeviceTypeFilter};

mod common;

use common::{context, validation_installed};

#[test]
fn device_type_filter_matches_exactly() {
    assert_eq!(
        DeviceTypeFilter::parse("discrete-gpu"),
        Some(DeviceTypeFilter::Is(DeviceType::DiscreteGpu))
    );
    assert_eq!(
        DeviceTypeFilter::parse(" GPU "),
        Some(DeviceTypeFilter::Gpu)
    );
    assert_eq!(DeviceTypeFilter::parse("discrete"), None);
    // The memory tables' old spelling names the same type.
    assert_eq!(
        DeviceTypeFilter::parse("Integrated_GPU"),
        Some(DeviceTypeFilter::Is(DeviceType::IntegratedGpu))
    );
    assert!(!DeviceTypeFilter::Is(DeviceType::Cpu).matches(DeviceType::IntegratedGpu));
    assert!(DeviceTypeFilter::Gpu.matches(DeviceType::DiscreteGpu));
    assert!(!DeviceTypeFilter::Gpu.matches(DeviceType::Cpu));
}

#[test]
fn unknown_device_name_lists_the_devices() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let name = ctx.info().name.clone();
    drop(ctx);
    let err = Context::new(ContextOptions {
        device: DeviceSelector::Name("no-such-gpu-anywhere".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(err.name(), "no_matching_device");
    let text = err.to_string();
    assert!(text.contains("no-such-gpu-anywhere"), "{text}");
    assert!(
        text.contains(&name),
        "the message lists the devices: {text}"
    );
}

#[test]
fn device_index_and_name_select_the_same_device() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let devices = Context::list_devices().unwrap();
    assert!(!devices.is_empty());
    let by_index = Context::new(ContextOptions {
        device: DeviceSelector::Index(0),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(by_index.info().name, devices[0].name);
    let upper = devices[0].name.to_uppercase();
    let by_name = Context::new(ContextOptions {
        device: DeviceSelector::Name(upper[..upper.len().min(6)].to_owned()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(by_name.info().name, devices[0].name);
    let out_of_range = Context::new(ContextOptions {
        device: DeviceSelector::Index(devices.len()),
        ..Default::default()
    });
    assert_eq!(out_of_range.unwrap_err().name(), "no_matching_device");
    drop(ctx);
}

#[test]
fn device_type_selector_finds_the_device_of_that_type() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let filter = DeviceTypeFilter::Is(ctx.info().device_type);
    let by_type = Context::new(ContextOptions {
        device: DeviceSelector::Type(filter),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(by_type.info().name, ctx.info().name);
}

#[test]
fn live_memory_table_is_valid_and_matches_the_device() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let t = ctx.device_memory();
    assert!(!t.types.is_empty());
    assert_eq!(t.name, ctx.info().name);
    assert_eq!(t.non_coherent_atom_size, ctx.info().non_coherent_atom_size);
    // The YAML form round-trips, as `vkcopy-suite devices` relies on.
    let back = vkcopy::MemoryTable::from_yaml_str(&t.to_yaml(), "live").unwrap();
    assert_eq!(back.types.len(), t.types.len());
    assert_eq!(back.heaps.len(), t.heaps.len());
}

#[test]
fn validation_messages_are_caught() {
    if !validation_installed() {
        eprintln!("skipping: the validation layer is not installed");
        return;
    }
    let Some(ctx) = context(ContextOptions {
        validation: true,
        ..Default::default()
    }) else {
        return;
    };
    assert!(ctx.take_validation_messages().is_empty());
    // A buffer with no usage flags breaks VUID-VkBufferCreateInfo-usage-requiredbitmask.
    let info = vk::BufferCreateInfo::default().size(64);
    let device = &ctx.raw_device();
    // SAFETY: deliberately invalid create info, to provoke a validation message; the
    // buffer (if the driver made one) is destroyed right away.
    unsafe {
        if let Ok(b) = device.create_buffer(&info, None) {
            device.destroy_buffer(b, None);
        }
    }
    let messages = ctx.take_validation_messages();
    assert!(
        messages.iter().any(|m| m.contains("usage")),
        "expected a message about usage, got {messages:?}"
    );
}

#[test]
fn leak_reports_say_alive_before_teardown_and_leaked_after() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut kept = vkcopy::Buffer::new("kept", vkcopy::ElemType::U8, &[256]).unwrap();
    ctx.device_malloc(&mut kept).unwrap();
    let alive = ctx.leak_check();
    assert!(!alive.after_teardown);
    assert!(alive.to_string().starts_with("still alive:"), "{alive}");
    assert!(!alive.to_string().contains("leaked"), "{alive}");
    let _ = ctx.take_validation_messages();
    let leaked = ctx.close();
    assert!(leaked.after_teardown);
    assert!(leaked.to_string().starts_with("leaked"), "{leaked}");
    drop(kept);
}

/// Contexts made and dropped on several threads at once: the loader keeps one
/// list of devices for the process, so creation and destruction race unless the
/// runtime orders them.
#[test]
fn contexts_made_and_dropped_on_threads_at_once() {
    if context(ContextOptions::default()).is_none() {
        return;
    }
    let rounds = 40;
    let made: usize = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(move || {
                    (0..rounds)
                        .map(|_| {
                            let ctx = Context::new(ContextOptions::default()).expect("a context");
                            let report = ctx.close();
                            assert!(report.is_empty(), "{report}");
                        })
                        .count()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert_eq!(made, 4 * rounds);
}
