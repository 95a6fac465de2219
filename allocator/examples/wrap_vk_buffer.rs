//! Wrapping a `VkBuffer` the caller made (Halide's `halide_vulkan_wrap_vk_buffer`):
//! the caller creates the buffer and its memory on the context's device, vkcopy
//! copies into and out of it like any device memory, and after
//! `detach_vk_buffer` the caller destroys both.
//!
//! `cargo run --example wrap_vk_buffer`

use vkcopy::ash::vk;
use vkcopy::{Buffer, Context, ContextOptions, ElemType};

const N: i64 = 4096;

/// A `VkBuffer` of `size` bytes bound to new device-local memory of its own.
fn make_vk_buffer(ctx: &Context, size: u64) -> Result<(vk::Buffer, vk::DeviceMemory), vk::Result> {
    let device = &ctx.raw_device();
    let info = vk::BufferCreateInfo::default()
        .size(size)
        .usage(
            vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST
                | vk::BufferUsageFlags::STORAGE_BUFFER,
        )
        .sharing_mode(vk::SharingMode::EXCLUSIVE);
    // SAFETY: a valid create info on the context's live device.
    let buffer = unsafe { device.create_buffer(&info, None)? };
    // SAFETY: `buffer` was just created on this device.
    let req = unsafe { device.get_buffer_memory_requirements(buffer) };
    // SAFETY: the physical device belongs to this instance.
    let props = unsafe {
        ctx.raw_instance()
            .get_physical_device_memory_properties(ctx.raw_physical_device())
    };
    let Some(memory_type) = (0..props.memory_type_count).find(|&i| {
        req.memory_type_bits & (1 << i) != 0
            && props.memory_types[i as usize]
                .property_flags
                .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
    }) else {
        // SAFETY: the buffer is unused.
        unsafe { device.destroy_buffer(buffer, None) };
        return Err(vk::Result::ERROR_FEATURE_NOT_PRESENT);
    };
    let alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(req.size)
        .memory_type_index(memory_type);
    // SAFETY: a valid allocate info for a memory type of this device.
    let memory = unsafe { device.allocate_memory(&alloc, None)? };
    // SAFETY: buffer and memory are new, unbound, and the type fits the requirements.
    unsafe { device.bind_buffer_memory(buffer, memory, 0)? };
    Ok((buffer, memory))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::new(ContextOptions::from_env()?)?;
    let size = (N * 4) as u64;
    let (vk_buffer, memory) = make_vk_buffer(&ctx, size)?;

    let mut w = Buffer::new("wrapped", ElemType::U32, &[N])?;
    ctx.wrap_vk_buffer(&mut w, vk_buffer, size)?;
    for (i, v) in w.host_mut::<u32>()?.iter_mut().enumerate() {
        *v = 7 * i as u32;
    }
    ctx.copy_to_device(&mut w)?; // into the caller's VkBuffer

    // Read the caller's VkBuffer back through a view without host memory.
    let mut back = Buffer::new("back", ElemType::U32, &[N])?;
    ctx.buffer_copy(&w.without_host("wrapped_device"), &mut back, false)?;
    assert_eq!(back.host::<u32>()?[N as usize - 1], 7 * (N as u32 - 1));

    let handle = ctx.detach_vk_buffer(&mut w)?;
    assert_eq!(handle, vk_buffer);
    // SAFETY: vkcopy no longer uses the buffer (detached, and copies are
    // synchronous); the caller owns buffer and memory.
    unsafe {
        ctx.raw_device().destroy_buffer(vk_buffer, None);
        ctx.raw_device().free_memory(memory, None);
    }
    drop((w, back));
    let messages = ctx.take_validation_messages();
    let report = ctx.close();
    println!("wrapped a {size}-byte VkBuffer: ok; {report}");
    if !report.is_empty() || !messages.is_empty() {
        return Err(format!("{report}; validation: {messages:?}").into());
    }
    Ok(())
}
