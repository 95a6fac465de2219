//! Host memory of buffers. Either allocated here (zeroed, aligned to 4096 bytes
//! and padded to a multiple of 4096), or the caller's: a `Vec<u8>` handed over,
//! or memory behind a raw pointer that the caller keeps alive (what a
//! `halide_buffer_t`'s `host` pointer is). Copies import either kind for the
//! device (`VK_EXT_external_memory_host`) by the enclosing page range.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut, Range};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// Alignment and padding of host memory allocated here, in bytes.
pub const HOST_ALIGNMENT: usize = 4096;

/// Runs when host memory is freed, before it is: frees a device's import of it.
pub(crate) type DropHook = Box<dyn FnOnce() + Send + Sync>;

/// Who frees the memory.
enum Owner {
    /// Allocated here with this many bytes, at [`HOST_ALIGNMENT`].
    Aligned { capacity: usize },
    /// The caller's vector; the bytes are a range of it.
    Vec(#[allow(dead_code)] Vec<u8>),
    /// The caller's vector of elements (a `Vec<T>`, kept as it was allocated).
    Typed(#[allow(dead_code)] Box<dyn std::any::Any + Send + Sync>),
    /// The caller's memory; this runs once the memory is no longer used here.
    Foreign(Option<DropHook>),
}

/// Bytes of host memory, owned by the buffers that use them.
pub struct HostBytes {
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
    /// Identifies the memory for the device imports of it.
    id: u64,
    /// Imports of this memory by devices, released before the memory is freed
    /// (imported host memory must outlive the import).
    hooks: std::sync::Mutex<Vec<DropHook>>,
    /// Writes through any buffer over this memory (see `buffer::sync`).
    writes: AtomicU64,
}

// SAFETY: HostBytes owns (or, for foreign memory, has the caller's promise of
// exclusive use of) its bytes, like a Vec<u8>.
unsafe impl Send for HostBytes {}
// SAFETY: shared access only reads.
unsafe impl Sync for HostBytes {}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl HostBytes {
    fn with(ptr: NonNull<u8>, len: usize, owner: Owner) -> Self {
        HostBytes {
            ptr,
            len,
            owner,
            id: next_id(),
            hooks: std::sync::Mutex::new(Vec::new()),
            writes: AtomicU64::new(0),
        }
    }

    /// `len` zero bytes, page-aligned; None when the system cannot provide them
    /// (unlike `vec!`, which aborts the process).
    pub fn try_zeroed(len: usize) -> Option<Self> {
        let capacity = len.max(1).checked_next_multiple_of(HOST_ALIGNMENT)?;
        let layout = Layout::from_size_align(capacity, HOST_ALIGNMENT).ok()?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)?;
        Some(Self::with(ptr, len, Owner::Aligned { capacity }))
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

    /// The caller's vector, at whatever address the allocator gave it.
    pub fn from_vec(v: Vec<u8>) -> Self {
        let len = v.len();
        Self::from_vec_range(v, 0..len).expect("the whole vector")
    }

    /// The caller's vector of elements, without a copy, at the vector's own
    /// (element-aligned) address: what [`Buffer::from_vec`](crate::Buffer::from_vec) uses.
    pub fn from_elems<T: bytemuck::Pod + Send + Sync>(mut v: Vec<T>) -> Self {
        let len = std::mem::size_of_val(v.as_slice());
        let ptr = NonNull::new(v.as_mut_ptr().cast::<u8>()).unwrap_or(NonNull::dangling());
        Self::with(ptr, len, Owner::Typed(Box::new(v)))
    }

    /// `range` of the caller's vector; None when the range is not inside it.
    pub fn from_vec_range(mut v: Vec<u8>, range: Range<usize>) -> Option<Self> {
        if range.start > range.end || range.end > v.len() {
            return None;
        }
        // SAFETY: the range lies inside the vector, whose heap buffer does not move
        // while the vector is owned here.
        let ptr = unsafe { NonNull::new_unchecked(v.as_mut_ptr().add(range.start)) };
        Some(Self::with(ptr, range.len(), Owner::Vec(v)))
    }

    /// `len` bytes of the caller's memory at `ptr`; `release` runs when vkcopy no
    /// longer uses them (after any device import of them is gone).
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes until `release`
    /// runs (or, without `release`, until every buffer using these bytes is
    /// dropped), and nothing else may access them while a copy uses them.
    pub unsafe fn from_raw_parts(ptr: NonNull<u8>, len: usize, release: Option<DropHook>) -> Self {
        Self::with(ptr, len, Owner::Foreign(release))
    }

    /// Start of the bytes.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Identifies this memory among all host memory of the process.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Writes through any buffer over this memory so far.
    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }

    /// Counts a write through a buffer over this memory.
    /// Returns the count before this write.
    pub(crate) fn count_write(&self) -> u64 {
        self.writes.fetch_add(1, Ordering::AcqRel)
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
        // SAFETY: `len` bytes at `ptr` are valid (allocated here, the caller's
        // vector, or the caller's promise) and initialised.
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
        match &mut self.owner {
            Owner::Aligned { capacity } => {
                let layout =
                    Layout::from_size_align(*capacity, HOST_ALIGNMENT).expect("made in zeroed");
                // SAFETY: allocated in `try_zeroed` with this layout.
                unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
            }
            Owner::Vec(_) | Owner::Typed(_) => {}
            Owner::Foreign(release) => {
                if let Some(release) = release.take() {
                    release();
                }
            }
        }
    }
}

impl std::fmt::Debug for HostBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBytes({} bytes at {:p})", self.len, self.ptr)
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
            assert!(b.iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn caller_memory_keeps_its_address_and_contents() {
        let v: Vec<u8> = (0..100u8).collect();
        let addr = v.as_ptr() as usize;
        let b = HostBytes::from_vec_range(v, 16..80).unwrap();
        assert_eq!(b.as_ptr() as usize, addr + 16);
        assert_eq!(b.len(), 64);
        assert_eq!(b[0], 16);
        assert_eq!(b[63], 79);
        assert!(HostBytes::from_vec_range(vec![0u8; 4], 2..5).is_none());
        assert_ne!(HostBytes::zeroed(1).id(), HostBytes::zeroed(1).id());
    }

    #[test]
    fn foreign_memory_is_released_once_after_the_hooks() {
        use std::sync::{Arc, Mutex};
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut backing = vec![7u8; 32];
        let (o1, o2) = (order.clone(), order.clone());
        // SAFETY: `backing` outlives `b`, which is dropped below.
        let b = unsafe {
            HostBytes::from_raw_parts(
                NonNull::new(backing.as_mut_ptr()).unwrap(),
                32,
                Some(Box::new(move || o1.lock().unwrap().push("release"))),
            )
        };
        b.on_drop(Box::new(move || o2.lock().unwrap().push("import freed")));
        assert_eq!(b[31], 7);
        drop(b);
        assert_eq!(*order.lock().unwrap(), ["import freed", "release"]);
    }
}
