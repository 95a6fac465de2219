//! Copies that say what they moved: [`Context::buffer_copy_counted`] refuses a copy
//! whose boxes do not intersect (Halide's `halide_buffer_copy` returns success
//! having moved nothing), and [`Context::copy_to_new`] copies a crop into a new
//! buffer of the crop's shape.

use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::runtime::context::Context;
use crate::types::{dense_dims, intersection, CopyPath};

/// What a [`Context::buffer_copy_counted`] moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copied {
    /// The path taken.
    pub path: CopyPath,
    /// Elements copied: those of the intersection of the two boxes.
    pub elements: u64,
}

impl Context {
    /// [`Context::buffer_copy`], returning the number of elements copied, or
    /// [`Error::IncompatibleBuffers`] when the boxes do not intersect (a crop at
    /// (100, 100) and a new buffer with mins at 0 intersect only where their
    /// coordinates agree; [`Context::copy_to_new`] makes a destination that matches).
    pub fn buffer_copy_counted(
        &self,
        src: &Buffer,
        dst: &mut Buffer,
        to_device: bool,
    ) -> Result<Copied> {
        let elements = if src.dimensions() == dst.dimensions() {
            intersection(src.dims(), dst.dims())
        } else {
            0
        };
        if elements == 0 && src.dimensions() == dst.dimensions() && !src.is_empty() {
            return Err(Error::IncompatibleBuffers(format!(
                "{} {} and {} {} do not intersect: nothing to copy",
                src.name(),
                crate::types::box_text(src.dims()),
                dst.name(),
                crate::types::box_text(dst.dims())
            )));
        }
        let path = self.buffer_copy(src, dst, to_device)?;
        Ok(Copied { path, elements })
    }

    /// A new dense buffer of `src`'s shape (its mins and extents) holding `src`'s
    /// elements: on the device (device-dirty, no host memory) when `to_device`,
    /// else in new host memory (host-dirty). `src` may be a crop, a slice or any view.
    pub fn copy_to_new(&self, src: &Buffer, name: &str, to_device: bool) -> Result<Buffer> {
        let extents: Vec<i64> = src.dims().iter().map(|d| d.extent).collect();
        let mut dims = dense_dims(&extents);
        for (d, s) in dims.iter_mut().zip(src.dims()) {
            d.min = s.min;
        }
        let mut out = Buffer::with_dims(name, src.elem(), dims, !to_device)?;
        self.buffer_copy(src, &mut out, to_device)?;
        Ok(out)
    }
}
