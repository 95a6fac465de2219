//! The host memory that a readback writes or an upload reads.

use vkcopy_engine::rt::{Buffer, Context, ElemType, HostBytes};

/// Kinds of host memory the bench copies to and from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostMemory {
    /// Allocated by vkcopy with the buffer: page-aligned.
    Aligned,
    /// The caller's: a `Vec` whose first byte is 16 bytes past a page boundary,
    /// where glibc's `malloc` puts large blocks.
    Unaligned,
}

impl HostMemory {
    /// Every kind, in the order the bench runs them.
    pub const ALL: &'static [HostMemory] = &[HostMemory::Aligned, HostMemory::Unaligned];

    /// The name in the JSON's `host_memory`.
    pub fn name(self) -> &'static str {
        match self {
            HostMemory::Aligned => "aligned",
            HostMemory::Unaligned => "unaligned",
        }
    }

    /// A one-dimensional `u8` buffer of `bytes` over this kind of host memory,
    /// filled, so that no page is first touched while a copy is timed.
    pub fn buffer(self, name: &str, bytes: u64) -> Result<Buffer, String> {
        let extent = i64::try_from(bytes).map_err(|e| e.to_string())?;
        let b = match self {
            HostMemory::Aligned => Buffer::new(name, ElemType::U8, &[extent]),
            HostMemory::Unaligned => {
                const PAGE: usize = 4096;
                let len = bytes as usize;
                let v = vec![0u8; len + 2 * PAGE];
                let addr = v.as_ptr() as usize;
                let start = addr.next_multiple_of(PAGE) + 16 - addr;
                let host = HostBytes::from_vec_range(v, start..start + len)
                    .ok_or_else(|| format!("{name}: {bytes} bytes of host memory"))?;
                let dims = vkcopy_engine::rt::dense_dims(&[extent]);
                Buffer::from_host(name, ElemType::U8, dims, host)
            }
        }
        .map_err(|e| e.to_string())?;
        if let Some(h) = b.host_view() {
            h.memory
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .fill(0x5A);
        }
        Ok(b)
    }
}

/// The `host_memory` of device-to-device results, as the CUDA reference names it.
pub const DEVICE: &str = "device";

/// A `u8` buffer of `bytes` with device memory only.
pub fn device_buffer(ctx: &Context, name: &str, bytes: u64) -> Result<Buffer, String> {
    let extent = i64::try_from(bytes).map_err(|e| e.to_string())?;
    let dims = vkcopy_engine::rt::dense_dims(&[extent]);
    let mut b = Buffer::with_dims(name, ElemType::U8, dims, false).map_err(|e| e.to_string())?;
    ctx.device_malloc(&mut b).map_err(|e| e.to_string())?;
    Ok(b)
}
