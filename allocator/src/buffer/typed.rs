//! Typed access to a buffer's host memory: `&[T]` and `&mut [T]` of its element
//! type, checked by `bytemuck` (type and alignment), at memcpy speed.
//!
//! The slice spans the buffer's memory from the element at its mins to its last
//! element (`size_in_bytes`), so the element at coordinates `c` is at index
//! [`Buffer::offset_of`]`(c)`; for a dense buffer that is every element in order.
//!
//! The rule: the host side is readable and writable only when the device does not
//! hold newer data ([`Buffer::is_device_dirty`]); otherwise the access is
//! [`Error::DeviceDirty`] and the caller runs
//! [`Context::copy_to_host`](crate::Context::copy_to_host) first. A mutable
//! slice marks the buffer host-dirty (and tells its views) when the guard drops.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, Range};
use std::sync::{RwLockReadGuard, RwLockWriteGuard, TryLockError};

use crate::buffer::host::HostBytes;
use crate::buffer::sync::seen_own_write;
use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::types::ElemType;

/// A Rust type that is the element type of a buffer: `i8` ... `u64`, `f32`, `f64`.
pub trait Element: bytemuck::Pod + Send + Sync {
    /// The buffer element type it is.
    const ELEM: ElemType;
}

macro_rules! element {
    ($($t:ty => $e:ident),*) => {
        $(impl Element for $t {
            const ELEM: ElemType = ElemType::$e;
        })*
    };
}

element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16,
    u32 => U32, u64 => U64, f32 => F32, f64 => F64);

/// A buffer's host memory as `&[T]`; see [`Buffer::host`]. Holds a read lock on
/// the memory until dropped.
pub struct HostSlice<'a, T: Element> {
    guard: RwLockReadGuard<'a, HostBytes>,
    range: Range<usize>,
    elem: PhantomData<T>,
}

/// A buffer's host memory as `&mut [T]`; see [`Buffer::host_mut`]. Marks the
/// buffer host-dirty when dropped.
pub struct HostSliceMut<'a, T: Element> {
    guard: RwLockWriteGuard<'a, HostBytes>,
    range: Range<usize>,
    host_dirty: &'a mut bool,
    host_seen: &'a mut u64,
    elem: PhantomData<T>,
}

impl<T: Element> Deref for HostSlice<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // Checked in `Buffer::host`; the memory does not move while locked.
        bytemuck::cast_slice(&self.guard[self.range.clone()])
    }
}

impl<T: Element> Deref for HostSliceMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        bytemuck::cast_slice(&self.guard[self.range.clone()])
    }
}

impl<T: Element> DerefMut for HostSliceMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        bytemuck::cast_slice_mut(&mut self.guard[self.range.clone()])
    }
}

impl<T: Element> Drop for HostSliceMut<'_, T> {
    fn drop(&mut self) {
        *self.host_dirty = true;
        seen_own_write(self.host_seen, self.guard.count_write());
    }
}

impl<T: Element> std::fmt::Debug for HostSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostSlice({} x {})", self.len(), T::ELEM)
    }
}

impl<T: Element> std::fmt::Debug for HostSliceMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostSliceMut({} x {})", self.len(), T::ELEM)
    }
}

fn busy<G>(name: &str, e: TryLockError<G>) -> Result<G> {
    match e {
        TryLockError::Poisoned(p) => Ok(p.into_inner()),
        TryLockError::WouldBlock => Err(Error::HostInUse(format!(
            "{name}: its host memory is borrowed by another guard (of a view of the same memory)"
        ))),
    }
}

impl Buffer {
    /// Checks `T` and the device side; the byte range of the slice.
    fn typed_range<T: Element>(&self) -> Result<Range<usize>> {
        if T::ELEM != self.elem() {
            return Err(Error::IncompatibleBuffers(format!(
                "{} holds {}, not {}",
                self.name(),
                self.elem(),
                T::ELEM
            )));
        }
        if self.is_device_dirty() {
            return Err(Error::DeviceDirty(format!(
                "{}: the device holds newer data; copy_to_host first",
                self.name()
            )));
        }
        let host = self
            .host
            .as_ref()
            .ok_or_else(|| Error::HostIsNull(format!("{} has no host memory", self.name())))?;
        Ok(host.offset..host.offset + self.size_in_bytes() as usize)
    }

    fn check_cast<T: Element>(&self, bytes: &[u8]) -> Result<()> {
        bytemuck::try_cast_slice::<u8, T>(bytes)
            .map(|_| ())
            .map_err(|e| {
                Error::HostInUse(format!(
                    "{}: host memory at {:p} as {}: {e}",
                    self.name(),
                    bytes.as_ptr(),
                    T::ELEM
                ))
            })
    }

    /// The host memory as `&[T]`, `T` being the element type. Errors: another
    /// element type, no host memory, a device side with newer data
    /// ([`Error::DeviceDirty`]), memory not aligned for `T` (caller memory given
    /// as bytes), or a mutable guard of the same memory alive ([`Error::HostInUse`]).
    pub fn host<T: Element>(&self) -> Result<HostSlice<'_, T>> {
        let range = self.typed_range::<T>()?;
        let host = self.host.as_ref().expect("checked in typed_range");
        let guard = host.memory.try_read().or_else(|e| busy(self.name(), e))?;
        self.check_cast::<T>(&guard[range.clone()])?;
        Ok(HostSlice {
            guard,
            range,
            elem: PhantomData,
        })
    }

    /// The host memory as `&mut [T]`, under the rules of [`Buffer::host`]; the
    /// buffer is host-dirty once the guard drops, and views of the same memory
    /// know it ([`Buffer::is_host_dirty`]).
    pub fn host_mut<T: Element>(&mut self) -> Result<HostSliceMut<'_, T>> {
        let range = self.typed_range::<T>()?;
        let name = self.name.as_str();
        let host = self.host.as_ref().expect("checked in typed_range");
        let guard = host.memory.try_write().or_else(|e| busy(name, e))?;
        bytemuck::try_cast_slice::<u8, T>(&guard[range.clone()])
            .map_err(|e| Error::HostInUse(format!("{name}: host memory as {}: {e}", T::ELEM)))?;
        Ok(HostSliceMut {
            guard,
            range,
            host_dirty: &mut self.host_dirty,
            host_seen: &mut self.host_seen,
            elem: PhantomData,
        })
    }
}
