//! Native buffers: a `VkBuffer` and its memory made by the case, outside the
//! runtime, as an application hands its own buffers to Halide.

use crate::rt::{vk, Context};

/// Why a native buffer could not be made.
#[derive(Debug)]
pub enum NativeError {
    /// The device has no memory for it: the case is skipped.
    Unsupported(String),
    /// A Vulkan call failed.
    Failed(String),
}

/// Most bytes of one native buffer.
pub const MAX_NATIVE_BYTES: u64 = 1 << 30;

/// A `VkBuffer` bound to device-local memory of its own, destroyed on drop.
pub struct Native<'a> {
    ctx: &'a Context,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
}

fn failed(call: &str, r: vk::Result) -> NativeError {
    NativeError::Failed(format!("native_buffer: {call} failed: {r}"))
}

impl<'a> Native<'a> {
    /// A buffer of `size` bytes usable for copies and as a storage buffer.
    pub fn new(ctx: &'a Context, size: u64) -> Result<Self, NativeError> {
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
        let buffer = unsafe { device.create_buffer(&info, None) }
            .map_err(|r| failed("vkCreateBuffer", r))?;
        let mut native = Native {
            ctx,
            buffer,
            memory: vk::DeviceMemory::null(),
            size,
        };
        // SAFETY: `buffer` was made on this device.
        let req = unsafe { device.get_buffer_memory_requirements(buffer) };
        // SAFETY: the physical device belongs to the context's instance.
        let props = unsafe {
            ctx.raw_instance()
                .get_physical_device_memory_properties(ctx.raw_physical_device())
        };
        let device_local = |i: u32| {
            req.memory_type_bits & (1 << i) != 0
                && props.memory_types[i as usize]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        };
        let Some(memory_type) = (0..props.memory_type_count).find(|&i| device_local(i)) else {
            return Err(NativeError::Unsupported(
                "native_buffer: no device-local memory type takes the buffer".into(),
            ));
        };
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(memory_type);
        // SAFETY: a valid allocate info for a memory type of this device.
        native.memory = unsafe { device.allocate_memory(&alloc, None) }
            .map_err(|r| failed("vkAllocateMemory", r))?;
        // SAFETY: buffer and memory are new and unbound; the type fits the buffer.
        unsafe { device.bind_buffer_memory(buffer, native.memory, 0) }
            .map_err(|r| failed("vkBindBufferMemory", r))?;
        Ok(native)
    }

    /// Its handle.
    pub fn buffer(&self) -> vk::Buffer {
        self.buffer
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for Native<'_> {
    fn drop(&mut self) {
        let device = &self.ctx.raw_device();
        // SAFETY: the runtime's work is synchronous or waited for before the case's
        // state is dropped, and the buffers that wrapped this one are dropped
        // before it (they come first in the state); nothing uses it any more.
        unsafe {
            device.destroy_buffer(self.buffer, None);
            if self.memory != vk::DeviceMemory::null() {
                device.free_memory(self.memory, None);
            }
        }
    }
}
