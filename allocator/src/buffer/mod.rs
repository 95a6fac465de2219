//! A `halide_buffer_t`-like buffer: element type, up to 16 dimensions of
//! (min, extent, stride), host memory, a device allocation, and the
//! `host_dirty` / `device_dirty` bits (Halide's `src/runtime/HalideBuffer.h`,
//! `HalideRuntime.h`).
//!
//! Strides are in elements and must not be negative. The element at the mins
//! is at byte offset 0 of the host view; element `c` is at
//! `sum((c[d] - min[d]) * stride[d]) * elem_bytes`.

use std::sync::{Arc, RwLock};

pub(crate) mod host;
mod sync;
mod typed;
mod view;

pub use typed::{Element, HostSlice, HostSliceMut};

use crate::error::{Error, Result};
use crate::types::{dense_dims, span_bytes, Dim, ElemType, Value, MAX_DIMS};
use crate::vk::region::Region;
use host::HostBytes;

/// A buffer's device side: a region and the element offset of the element at
/// the buffer's mins (non-zero for crops and slices).
#[derive(Clone, Debug)]
pub struct DeviceView {
    /// The device memory, shared with the buffer's views.
    pub region: Arc<Region>,
    /// Elements from the start of the region.
    pub offset: u64,
}

impl DeviceView {
    /// Byte offset in the region of the element at the view's mins.
    pub fn byte_offset(&self, elem_bytes: usize) -> u64 {
        self.offset * elem_bytes as u64
    }
}

/// An element that differs from what was expected.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Its coordinates.
    pub coords: Vec<i64>,
    /// The value expected there.
    pub expected: i64,
    /// The value found.
    pub actual: Value,
}

/// The result of [`Buffer::compare`].
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// How many elements differ.
    pub mismatches: u64,
    /// The first few, in element order.
    pub first: Vec<Mismatch>,
}

/// Host memory shared by a buffer and the views made from it.
pub type HostMemory = Arc<RwLock<HostBytes>>;

/// A buffer's host side: shared memory and the byte offset of the element at the mins.
#[derive(Clone, Debug)]
pub struct HostView {
    /// The host memory, shared with views.
    pub memory: HostMemory,
    /// Byte offset of the element at the mins.
    pub offset: usize,
}

/// A multi-dimensional strided buffer with optional host memory and device allocation.
#[derive(Debug)]
pub struct Buffer {
    name: String,
    elem: ElemType,
    dims: Vec<Dim>,
    pub(crate) host: Option<HostView>,
    pub(crate) device: Option<DeviceView>,
    /// Host memory holds data the device does not have: this buffer's own bit,
    /// as in Halide. [`Buffer::is_host_dirty`] also counts writes through views of
    /// the same memory; [`Buffer::set_host_dirty`] keeps views informed.
    pub(crate) host_dirty: bool,
    /// Device memory holds data the host does not have: this buffer's own bit,
    /// as in Halide. [`Buffer::is_device_dirty`] also counts kernels and copies
    /// into views of the same memory; [`Buffer::set_device_dirty`] keeps views informed.
    pub(crate) device_dirty: bool,
    /// The host memory's write count this buffer's device side has seen.
    pub(crate) host_seen: u64,
    /// The device memory's write count this buffer's host side has seen.
    pub(crate) device_seen: u64,
}

/// Zeroed host memory of `bytes`, or an error naming the buffer when the system
/// cannot provide it.
fn host_bytes(name: &str, bytes: u64) -> Result<HostBytes> {
    usize::try_from(bytes)
        .ok()
        .and_then(HostBytes::try_zeroed)
        .ok_or_else(|| {
            Error::BadDimensions(format!(
                "{name}: cannot allocate {bytes} bytes of host memory"
            ))
        })
}

fn check_dims(name: &str, dims: &[Dim]) -> Result<()> {
    if dims.len() > MAX_DIMS {
        return Err(Error::BadDimensions(format!(
            "{name}: {} dimensions; at most {MAX_DIMS}",
            dims.len()
        )));
    }
    for (i, d) in dims.iter().enumerate() {
        if d.extent < 0 {
            return Err(Error::BadDimensions(format!(
                "{name}: dimension {i} has extent {}",
                d.extent
            )));
        }
        if d.stride < 0 {
            return Err(Error::BadDimensions(format!(
                "{name}: dimension {i} has stride {}; negative strides are not supported",
                d.stride
            )));
        }
        if d.min.checked_add(d.extent).is_none() {
            return Err(Error::BadDimensions(format!(
                "{name}: dimension {i} min {} + extent {} overflows",
                d.min, d.extent
            )));
        }
    }
    Ok(())
}

impl Buffer {
    /// A dense buffer with host memory of zeros and mins at 0.
    pub fn new(name: &str, elem: ElemType, extents: &[i64]) -> Result<Self> {
        Self::with_dims(name, elem, dense_dims(extents), true)
    }

    /// A buffer of the given shape; host memory (zeros) when `host` is true.
    pub fn with_dims(name: &str, elem: ElemType, dims: Vec<Dim>, host: bool) -> Result<Self> {
        check_dims(name, &dims)?;
        let bytes = span_bytes(elem, &dims)
            .filter(|&b| b <= isize::MAX as u64)
            .ok_or_else(|| Error::BadDimensions(format!("{name}: size overflows")))?;
        let host = match host {
            true => Some(HostView {
                memory: Arc::new(RwLock::new(host_bytes(name, bytes)?)),
                offset: 0,
            }),
            false => None,
        };
        Ok(Buffer {
            name: name.to_owned(),
            elem,
            dims,
            host,
            device: None,
            host_dirty: false,
            device_dirty: false,
            host_seen: 0,
            device_seen: 0,
        })
    }

    /// A buffer over host memory the caller provides (what a `halide_buffer_t`'s
    /// `host` pointer is: a `Vec`, a mapped file, memory at any alignment): `dims`
    /// describe it, with the element at the mins at byte 0 of `host`. The buffer is
    /// host-dirty, as its host memory holds its data. Large copies go straight to
    /// and from this memory where the device can import it.
    pub fn from_host(name: &str, elem: ElemType, dims: Vec<Dim>, host: HostBytes) -> Result<Self> {
        check_dims(name, &dims)?;
        let bytes = span_bytes(elem, &dims)
            .ok_or_else(|| Error::BadDimensions(format!("{name}: size overflows")))?;
        if bytes > host.len() as u64 {
            return Err(Error::BadDimensions(format!(
                "{name}: the shape spans {bytes} bytes; the host memory has {}",
                host.len()
            )));
        }
        let mut buf = Buffer::with_dims(name, elem, dims, false)?;
        buf.host = Some(HostView {
            memory: Arc::new(RwLock::new(host)),
            offset: 0,
        });
        buf.host_dirty = true;
        Ok(buf)
    }

    /// A view of `from`'s memory: its dirty bits and what it has seen.
    pub(crate) fn from_parts(
        from: &Buffer,
        name: &str,
        dims: Vec<Dim>,
        host: Option<HostView>,
        device: Option<DeviceView>,
    ) -> Buffer {
        Buffer {
            name: name.to_owned(),
            elem: from.elem,
            dims,
            host,
            device,
            host_dirty: from.host_dirty,
            device_dirty: from.device_dirty,
            host_seen: from.host_seen,
            device_seen: from.device_seen,
        }
    }

    /// A dense buffer with mins at 0 over the caller's elements, without a copy:
    /// `data.len()` must be the product of `extents`, and `T` gives the element
    /// type. The buffer is host-dirty, as its host memory holds its data.
    pub fn from_vec<T: Element>(name: &str, extents: &[i64], data: Vec<T>) -> Result<Self> {
        let dims = dense_dims(extents);
        let want: Option<u64> = extents.iter().try_fold(1u64, |n, &e| {
            u64::try_from(e).ok().and_then(|e| n.checked_mul(e))
        });
        if want != Some(data.len() as u64) {
            return Err(Error::BadDimensions(format!(
                "{name}: extents {extents:?} need {want:?} elements; the vector has {}",
                data.len()
            )));
        }
        Buffer::from_host(name, T::ELEM, dims, HostBytes::from_elems(data))
    }

    /// Gives the buffer host memory (zeros) if it has none.
    pub(crate) fn ensure_host(&mut self) -> Result<()> {
        if self.host.is_none() {
            let bytes = self.size_in_bytes();
            self.host = Some(HostView {
                memory: Arc::new(RwLock::new(host_bytes(self.name(), bytes)?)),
                offset: 0,
            });
            self.host_seen = 0;
        }
        Ok(())
    }

    /// The host side: shared memory and the offset of the element at the mins.
    pub fn host_view(&self) -> Option<&HostView> {
        self.host.as_ref()
    }

    /// The device side: region and element offset.
    pub fn device_view(&self) -> Option<&DeviceView> {
        self.device.as_ref()
    }

    /// The name used in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The element type.
    pub fn elem(&self) -> ElemType {
        self.elem
    }

    /// The dimensions, innermost first.
    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    /// The number of dimensions.
    pub fn dimensions(&self) -> usize {
        self.dims.len()
    }

    /// Number of elements.
    pub fn len(&self) -> u64 {
        self.dims.iter().map(|d| d.extent as u64).product()
    }

    /// Whether the buffer has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes from the first to the last element (Halide's `size_in_bytes`).
    pub fn size_in_bytes(&self) -> u64 {
        span_bytes(self.elem, &self.dims).unwrap_or(0)
    }

    /// Whether the buffer has host memory.
    pub fn has_host(&self) -> bool {
        self.host.is_some()
    }

    /// Whether the buffer has device memory.
    pub fn has_device_allocation(&self) -> bool {
        self.device.is_some()
    }

    /// Element offset of `coords` from the element at the mins; None outside the box.
    pub fn offset_of(&self, coords: &[i64]) -> Option<u64> {
        if coords.len() != self.dims.len() {
            return None;
        }
        let mut off = 0u64;
        for (c, d) in coords.iter().zip(&self.dims) {
            if *c < d.min || *c >= d.min + d.extent {
                return None;
            }
            off += (c - d.min) as u64 * d.stride as u64;
        }
        Some(off)
    }

    /// Calls `f(coords, byte_offset)` for every element, first dimension fastest.
    pub fn for_each_element(&self, mut f: impl FnMut(&[i64], usize)) {
        if self.is_empty() {
            return;
        }
        let n = self.dims.len();
        let esize = self.elem.bytes();
        let mut coords: Vec<i64> = self.dims.iter().map(|d| d.min).collect();
        let mut offset = 0usize;
        loop {
            f(&coords, offset * esize);
            // Odometer increment with incremental offset.
            let mut d = 0;
            loop {
                if d == n {
                    return;
                }
                coords[d] += 1;
                offset += self.dims[d].stride as usize;
                if coords[d] < self.dims[d].min + self.dims[d].extent {
                    break;
                }
                offset -= (self.dims[d].extent * self.dims[d].stride) as usize;
                coords[d] = self.dims[d].min;
                d += 1;
            }
        }
    }

    fn host_or_err(&self) -> Result<&HostView> {
        self.host
            .as_ref()
            .ok_or_else(|| Error::HostIsNull(format!("{} has no host memory", self.name)))
    }

    /// Sets every element on the host to `f(coords)` and marks the host dirty.
    pub fn fill(&mut self, mut f: impl FnMut(&[i64]) -> i64) -> Result<()> {
        let host = self.host_or_err()?.clone();
        let mut mem = host.memory.write().unwrap_or_else(|p| p.into_inner());
        let esize = self.elem.bytes();
        let elem = self.elem;
        let base = host.offset;
        self.for_each_element(|c, off| {
            let at = base + off;
            elem.store(&mut mem[at..at + esize], f(c));
        });
        drop(mem);
        self.set_host_dirty(true);
        Ok(())
    }

    /// The element at `coords`, read from host memory.
    pub fn get(&self, coords: &[i64]) -> Result<Value> {
        let host = self.host_or_err()?;
        let off = self.offset_of(coords).ok_or_else(|| {
            Error::BadDimensions(format!("{}: {coords:?} is outside the buffer", self.name))
        })?;
        let mem = host.memory.read().unwrap_or_else(|p| p.into_inner());
        let at = host.offset + off as usize * self.elem.bytes();
        Ok(self.elem.load(&mem[at..]))
    }

    /// Compares every element on the host with `f(coords)`; keeps the first `keep`
    /// mismatches.
    pub fn compare(&self, mut f: impl FnMut(&[i64]) -> i64, keep: usize) -> Result<Comparison> {
        let host = self.host_or_err()?;
        let mem = host.memory.read().unwrap_or_else(|p| p.into_inner());
        let elem = self.elem;
        let base = host.offset;
        let mut count = 0u64;
        let mut first = Vec::new();
        self.for_each_element(|c, off| {
            let expected = f(c);
            let actual = elem.load(&mem[base + off..]);
            if !elem.equals(actual, expected) {
                count += 1;
                if first.len() < keep {
                    first.push(Mismatch {
                        coords: c.to_vec(),
                        expected,
                        actual,
                    });
                }
            }
        });
        Ok(Comparison {
            mismatches: count,
            first,
        })
    }
}
