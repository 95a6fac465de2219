//! Host memory of buffers: zeroed, aligned to 4096 bytes and padded to a multiple
//! of 4096, so that a device can import it (`VK_EXT_external_memory_host`
//! requires `minImportedHostPointerAlignment`, 4096 on the devices we know).

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment and padding of host memory, in bytes.
pub const HOST_ALIGNMENT: usize = 4096;

/// Runs when host memory is freed, before it is: frees a device's import of it.
pub(crate) type DropHook = Box<dyn FnOnce() + Send + Sync>;

/// Page-aligned, zero-initialised bytes.
pub struct HostBytes {
    ptr: NonNull<u8>,
    len: usize,
    /// Bytes allocated: `len` rounded up to [`HOST_ALIGNMENT`], at least one page.
    capacity: usize,
    /// Imports of this memory by devices, released before the memory is freed
    /// (imported host memory must outlive the import).
    hooks: std::sync::Mutex<Vec<DropHook>>,
}

// SAFETY: HostBytes owns its allocation like a Vec<u8>.
unsafe impl Send for HostBytes {}
// SAFETY: shared access only reads.
unsafe impl Sync for HostBytes {}

impl HostBytes {
    /// `len` zero bytes; None when the system cannot provide them (unlike `vec!`,
    /// which aborts the process).
    pub fn try_zeroed(len: usize) -> Option<Self> {
        let capacity = len.max(1).checked_next_multiple_of(HOST_ALIGNMENT)?;
        let layout = Layout::from_size_align(capacity, HOST_ALIGNMENT).ok()?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)?;
        Some(HostBytes {
            ptr,
            len,
            capacity,
            hooks: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// `len` zero bytes. Aborts like `vec!` when they cannot be had; the runtime uses
    /// [`HostBytes::try_zeroed`].
    pub fn zeroed(len: usize) -> Self {
        match Self::try_zeroed(len) {
            Some(b) => b,
            None => alloc::handle_alloc_error(
                Layout::from_size_align(len.max(1), HOST_ALIGNMENT).unwrap_or(Layout::new::<u8>()),
            ),
        }
    }

    /// Bytes allocated, a multiple of [`HOST_ALIGNMENT`]; the bytes past `len` are zeros.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Start of the allocation.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Adds something to run just before the memory is freed.
    pub(crate) fn on_drop(&self, hook: DropHook) {
        self.hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(hook);
    }
}

impl Deref for HostBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len <= capacity` bytes are allocated and initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for HostBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we have exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostBytes {
    fn drop(&mut self) {
        let hooks = std::mem::take(self.hooks.get_mut().unwrap_or_else(|p| p.into_inner()));
        for hook in hooks {
            hook();
        }
        let layout =
            Layout::from_size_align(self.capacity, HOST_ALIGNMENT).expect("made in zeroed");
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl std::fmt::Debug for HostBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBytes({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_padded_and_zeroed() {
        for len in [0, 1, 4095, 4096, 4097, 100_000] {
            let b = HostBytes::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % HOST_ALIGNMENT, 0);
            assert_eq!(b.capacity() % HOST_ALIGNMENT, 0);
            assert!(b.capacity() >= len.max(1));
            assert!(b.iter().all(|&x| x == 0));
        }
    }
}
