//! Crops and slices: buffers that alias a part of another buffer's host and
//! device memory (Halide's `device_crop`, `device_slice`, `device_release_crop`
//! in `src/runtime/device_interface.cpp` and `vulkan.cpp`).
//!
//! Two fixes over Halide's Vulkan runtime:
//! - offsets accumulate from the *source view*, so a crop of a crop (or a slice of
//!   a slice) addresses the right memory (Halide adds the new offset to the owner's);
//! - a view holds its region through an `Arc`, so the parent may be dropped first
//!   and the memory lives until the last view is gone (the use count starts at one,
//!   Halide #9237).
//!
//! Dirty bits are copied from the source when the view is made and are the view's
//! own afterwards, as in Halide's `Buffer::cropped`; writes through any view are
//! also counted on the shared memory, so the others learn of them (`sync`).

use crate::buffer::host::HostBytes;
use crate::buffer::{Buffer, DeviceView, HostView};
use crate::error::{Error, Result};
use crate::types::Dim;

impl Buffer {
    fn view(&self, name: &str, dims: Vec<Dim>, elem_offset: u64) -> Buffer {
        let esize = self.elem().bytes();
        let host = self.host.as_ref().map(|h| HostView {
            memory: h.memory.clone(),
            offset: h.offset + elem_offset as usize * esize,
        });
        let device = self.device.as_ref().map(|d| DeviceView {
            region: d.region.clone(),
            offset: if d.region.offsets_from_owner {
                elem_offset
            } else {
                d.offset + elem_offset
            },
        });
        Buffer::from_parts(self, name, dims, host, device)
    }

    /// A view of the box `min`..`min + extent` of this buffer, sharing its host and
    /// device memory. Halide: `Buffer::cropped`, `halide_device_crop`.
    pub fn cropped(&self, name: &str, min: &[i64], extent: &[i64]) -> Result<Buffer> {
        let dims = self.dims();
        if min.len() != dims.len() || extent.len() != dims.len() {
            return Err(Error::CropFailed(format!(
                "crop of {} ({} dimensions) given {} mins and {} extents",
                self.name(),
                dims.len(),
                min.len(),
                extent.len()
            )));
        }
        let mut offset = 0u64;
        let mut out = Vec::with_capacity(dims.len());
        for (d, ((&m, &e), p)) in min.iter().zip(extent).zip(dims).enumerate() {
            if e < 0 || m < p.min || m.saturating_add(e) > p.min + p.extent {
                return Err(Error::CropFailed(format!(
                    "dimension {d} of the crop, [{m}, {}), is outside {}'s [{}, {})",
                    m.saturating_add(e),
                    self.name(),
                    p.min,
                    p.min + p.extent
                )));
            }
            offset += (m - p.min) as u64 * p.stride as u64;
            out.push(Dim {
                min: m,
                extent: e,
                stride: p.stride,
            });
        }
        Ok(self.view(name, out, offset))
    }

    /// The `dim`-th dimension fixed at `pos`: a view with one dimension less.
    /// Halide: `Buffer::sliced`, `halide_device_slice`.
    pub fn sliced(&self, name: &str, dim: usize, pos: i64) -> Result<Buffer> {
        let dims = self.dims();
        let Some(d) = dims.get(dim) else {
            return Err(Error::CropFailed(format!(
                "slice of {} at dimension {dim}; it has {}",
                self.name(),
                dims.len()
            )));
        };
        if pos < d.min || pos >= d.min + d.extent {
            return Err(Error::CropFailed(format!(
                "slice of {} at {pos} in dimension {dim}, outside [{}, {})",
                self.name(),
                d.min,
                d.min + d.extent
            )));
        }
        let offset = (pos - d.min) as u64 * d.stride as u64;
        let mut out = dims.to_vec();
        out.remove(dim);
        Ok(self.view(name, out, offset))
    }

    /// A view of any shape over this buffer's memory (a `halide_buffer_t` made by hand over
    /// another's memory): its element at its mins is this
    /// buffer's element `offset` elements past the one at the mins. Every element of
    /// the view must lie within this buffer's span (`size_in_bytes`).
    pub fn view_at(&self, name: &str, dims: Vec<Dim>, offset: u64) -> Result<Buffer> {
        let probe = Buffer::with_dims(name, self.elem(), dims.clone(), false)?;
        let eb = self.elem().bytes() as u64;
        let end = offset
            .checked_mul(eb)
            .and_then(|o| o.checked_add(probe.size_in_bytes()))
            .ok_or_else(|| Error::CropFailed(format!("{name}: offset overflows")))?;
        if end > self.size_in_bytes() {
            return Err(Error::CropFailed(format!(
                "{name}: the view ends at byte {end} of {}, which spans {} bytes",
                self.name(),
                self.size_in_bytes()
            )));
        }
        Ok(self.view(name, dims, offset))
    }

    /// A strided view: `at` (coordinates in this buffer) becomes the view's element at
    /// its mins; `dims` give the view's mins, extents and strides (in elements of this
    /// buffer's memory). Halide tests build these by hand as `halide_buffer_t`s over
    /// another buffer's memory (`gpu_non_contiguous_copy`).
    pub fn strided_view(&self, name: &str, at: &[i64], dims: Vec<Dim>) -> Result<Buffer> {
        let offset = self.offset_of(at).ok_or_else(|| {
            Error::CropFailed(format!(
                "{name}: {at:?} is not an element of {}",
                self.name()
            ))
        })?;
        self.view_at(name, dims, offset)
    }

    /// The same buffer without host memory: Halide tests make these with a raw
    /// `halide_buffer_t` copy whose `host` is null.
    pub fn without_host(&self, name: &str) -> Buffer {
        let mut v = self.view(name, self.dims().to_vec(), 0);
        v.host = None;
        v.host_dirty = false;
        v
    }

    /// The same device side over `host`, whose first byte is the element at the
    /// mins: for callers that own their host memory and may hand in another
    /// pointer between copies (`halide_buffer_t::host`). Dirty bits start clear.
    pub fn with_host(&self, name: &str, host: HostBytes) -> Result<Buffer> {
        if host.len() < self.size_in_bytes() as usize {
            return Err(Error::BadDimensions(format!(
                "{name}: {} bytes of host memory for a buffer that spans {}",
                host.len(),
                self.size_in_bytes()
            )));
        }
        let mut v = self.without_host(name);
        v.host = Some(HostView {
            memory: std::sync::Arc::new(std::sync::RwLock::new(host)),
            offset: 0,
        });
        // Clean on both sides: it has seen every write so far.
        v.device_dirty = false;
        v.host_seen = 0;
        if let Some(d) = &v.device {
            v.device_seen = d.region.writes();
        }
        Ok(v)
    }

    /// Whether this buffer's device memory is a view into a region at a non-zero
    /// offset, or shared with another buffer.
    pub fn is_device_view(&self) -> bool {
        self.device
            .as_ref()
            .is_some_and(|d| d.offset != 0 || std::sync::Arc::strong_count(&d.region) > 1)
    }
}
