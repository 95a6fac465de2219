//! Copy planning: the `device_copy` of Halide's `src/runtime/device_buffer_utils.h`,
//! with the true intersection of the two boxes instead of `min(extent)`.
//!
//! A plan copies `chunk` contiguous bytes at every point of an outer grid of
//! up to 16 dimensions; offsets are in bytes from `src_begin` / `dst_begin`.
//! A destination dimension of stride 0 keeps only its last element (as copying
//! them all in order would), so a copy costs what it writes, not its extents.

use crate::error::{Error, Result};
use crate::types::{Dim, MAX_DIMS};

/// One outer dimension of a plan. Strides in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlanDim {
    pub extent: u64,
    pub src_stride: u64,
    pub dst_stride: u64,
}

/// A planned copy between two strided layouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CopyPlan {
    /// Bytes copied at each grid point.
    pub chunk: u64,
    /// The outer grid, innermost first (sorted by destination stride).
    pub dims: Vec<PlanDim>,
    /// Byte offset of the first chunk in the source.
    pub src_begin: u64,
    /// Byte offset of the first chunk in the destination.
    pub dst_begin: u64,
}

impl CopyPlan {
    /// Plans a copy of the intersection of the boxes `src` and `dst`, whose element at
    /// the mins is at byte 0 of each side. Both have `elem_bytes`-sized elements.
    pub(crate) fn new(src: &[Dim], dst: &[Dim], elem_bytes: usize) -> Result<Self> {
        if src.len() != dst.len() {
            return Err(Error::IncompatibleBuffers(format!(
                "cannot copy {} dimensions into {}",
                src.len(),
                dst.len()
            )));
        }
        if src.len() > MAX_DIMS {
            return Err(Error::BadDimensions(format!(
                "{} dimensions; at most {MAX_DIMS}",
                src.len()
            )));
        }
        let eb = elem_bytes as u64;
        let mut plan = CopyPlan {
            chunk: eb,
            dims: Vec::new(),
            src_begin: 0,
            dst_begin: 0,
        };
        for (s, d) in src.iter().zip(dst) {
            let lo = s.min.max(d.min);
            let hi = (s.min + s.extent).min(d.min + d.extent);
            if hi <= lo {
                return Ok(CopyPlan::empty());
            }
            plan.src_begin += (lo - s.min) as u64 * s.stride as u64 * eb;
            plan.dst_begin += (lo - d.min) as u64 * d.stride as u64 * eb;
            if d.stride == 0 {
                // Every element of this dimension lands on the same destination
                // bytes and the last one copied stays: copy only that one.
                plan.src_begin += (hi - lo - 1) as u64 * s.stride as u64 * eb;
                continue;
            }
            if hi - lo > 1 {
                plan.dims.push(PlanDim {
                    extent: (hi - lo) as u64,
                    src_stride: s.stride as u64 * eb,
                    dst_stride: d.stride as u64 * eb,
                });
            }
        }
        // Destination order, as Halide does; stable so equal strides keep dim order.
        plan.dims.sort_by_key(|d| d.dst_stride);
        plan.fold();
        Ok(plan)
    }

    /// Halide's `make_buffer_copy` (`device_buffer_utils.h`), kept to emulate its bug:
    /// each dimension copies `min(src.extent, dst.extent)` elements from the later
    /// min, which overruns when the boxes overlap only partly.
    pub(crate) fn halide(src: &[Dim], dst: &[Dim], elem_bytes: usize) -> Result<Self> {
        // Same shape checks as the real planner.
        CopyPlan::new(src, dst, elem_bytes)?;
        let eb = elem_bytes as u64;
        let mut plan = CopyPlan {
            chunk: eb,
            dims: Vec::new(),
            src_begin: 0,
            dst_begin: 0,
        };
        for (s, d) in src.iter().zip(dst) {
            let diff = d.min - s.min;
            if diff > 0 {
                plan.src_begin += s.stride as u64 * diff as u64 * eb;
            } else {
                plan.dst_begin += d.stride as u64 * (-diff) as u64 * eb;
            }
            let extent = s.extent.min(d.extent);
            if extent <= 0 {
                return Ok(CopyPlan::empty());
            }
            if extent > 1 {
                plan.dims.push(PlanDim {
                    extent: extent as u64,
                    src_stride: s.stride as u64 * eb,
                    dst_stride: d.stride as u64 * eb,
                });
            }
        }
        plan.dims.sort_by_key(|d| d.dst_stride);
        plan.fold();
        Ok(plan)
    }

    /// A plan that copies nothing.
    pub(crate) fn empty() -> Self {
        CopyPlan {
            chunk: 0,
            dims: Vec::new(),
            src_begin: 0,
            dst_begin: 0,
        }
    }

    /// Merges contiguous dimensions into the chunk and adjacent dimensions into one.
    fn fold(&mut self) {
        while let Some(d0) = self.dims.first() {
            if d0.src_stride == self.chunk && d0.dst_stride == self.chunk {
                self.chunk *= d0.extent;
                self.dims.remove(0);
            } else {
                break;
            }
        }
        let mut i = 0;
        while i + 1 < self.dims.len() {
            let (a, b) = (self.dims[i], self.dims[i + 1]);
            if b.src_stride == a.src_stride * a.extent && b.dst_stride == a.dst_stride * a.extent {
                self.dims[i].extent *= b.extent;
                self.dims.remove(i + 1);
            } else {
                i += 1;
            }
        }
    }

    /// Number of chunks.
    pub(crate) fn chunks(&self) -> u64 {
        if self.chunk == 0 {
            return 0;
        }
        self.dims.iter().map(|d| d.extent).product()
    }

    /// Bytes copied.
    pub(crate) fn bytes(&self) -> u64 {
        self.chunk * self.chunks()
    }

    /// The same copy with a densely packed destination starting at 0: the layout of
    /// a staging buffer. Packing and unpacking through it use one layout, so they agree
    /// (Halide's staging layout mismatch of `buffer_copy` cannot happen).
    pub(crate) fn with_dense_dst(&self) -> CopyPlan {
        self.with_dense(|p| &mut p.dst_begin, |d| &mut d.dst_stride)
    }

    /// The same copy reading from a densely packed source starting at 0.
    pub(crate) fn with_dense_src(&self) -> CopyPlan {
        self.with_dense(|p| &mut p.src_begin, |d| &mut d.src_stride)
    }

    /// The same copy with one side (its `begin` and `stride`s) densely packed
    /// from 0.
    fn with_dense(
        &self,
        begin: impl Fn(&mut CopyPlan) -> &mut u64,
        stride: impl Fn(&mut PlanDim) -> &mut u64,
    ) -> CopyPlan {
        let mut out = self.clone();
        *begin(&mut out) = 0;
        let mut next = self.chunk;
        for d in &mut out.dims {
            *stride(d) = next;
            next *= d.extent;
        }
        out.fold();
        out
    }

    /// Calls `f(src_offset, dst_offset)` for every chunk, in order of increasing
    /// destination offset along the innermost dimension.
    pub(crate) fn for_each_chunk(&self, mut f: impl FnMut(u64, u64)) {
        if self.chunks() == 0 {
            return;
        }
        let n = self.dims.len();
        let mut idx = vec![0u64; n];
        let (mut s, mut d) = (self.src_begin, self.dst_begin);
        loop {
            f(s, d);
            let mut k = 0;
            loop {
                if k == n {
                    return;
                }
                idx[k] += 1;
                s += self.dims[k].src_stride;
                d += self.dims[k].dst_stride;
                if idx[k] < self.dims[k].extent {
                    break;
                }
                s -= self.dims[k].src_stride * self.dims[k].extent;
                d -= self.dims[k].dst_stride * self.dims[k].extent;
                idx[k] = 0;
                k += 1;
            }
        }
    }

    /// The chunks' `(src_offset, dst_offset)`, in the order of [`CopyPlan::for_each_chunk`].
    pub(crate) fn chunk_offsets(&self) -> ChunkOffsets<'_> {
        ChunkOffsets {
            plan: self,
            idx: vec![0; self.dims.len()],
            at: (self.src_begin, self.dst_begin),
            left: self.chunks(),
        }
    }

    /// Whether no two chunks write the same destination byte (so they may be
    /// copied in any order, or at once).
    pub(crate) fn dst_disjoint(&self) -> bool {
        let mut span = self.chunk;
        for d in &self.dims {
            if d.dst_stride < span {
                return false;
            }
            span += (d.extent - 1) * d.dst_stride;
        }
        true
    }

    /// Highest source byte touched, exclusive.
    pub(crate) fn src_end(&self) -> u64 {
        self.end(self.src_begin, |d| d.src_stride)
    }

    /// Highest destination byte touched, exclusive.
    pub(crate) fn dst_end(&self) -> u64 {
        self.end(self.dst_begin, |d| d.dst_stride)
    }

    /// Highest byte touched on the side that starts at `begin`, with `stride`.
    fn end(&self, begin: u64, stride: impl Fn(&PlanDim) -> u64) -> u64 {
        if self.chunks() == 0 {
            return 0;
        }
        let last: u64 = self.dims.iter().map(|d| (d.extent - 1) * stride(d)).sum();
        begin + last + self.chunk
    }

    /// Copies on the host from `src` to `dst`, byte offsets relative to each slice.
    pub(crate) fn copy_host(&self, src: &[u8], dst: &mut [u8]) {
        let c = self.chunk as usize;
        self.for_each_chunk(|s, d| {
            let (s, d) = (s as usize, d as usize);
            dst[d..d + c].copy_from_slice(&src[s..s + c]);
        });
    }
}

/// Iterator of [`CopyPlan::chunk_offsets`].
pub(crate) struct ChunkOffsets<'a> {
    plan: &'a CopyPlan,
    idx: Vec<u64>,
    at: (u64, u64),
    left: u64,
}

impl Iterator for ChunkOffsets<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let here = self.at;
        for (k, d) in self.plan.dims.iter().enumerate() {
            self.idx[k] += 1;
            self.at.0 += d.src_stride;
            self.at.1 += d.dst_stride;
            if self.idx[k] < d.extent {
                break;
            }
            self.at.0 -= d.src_stride * d.extent;
            self.at.1 -= d.dst_stride * d.extent;
            self.idx[k] = 0;
        }
        Some(here)
    }
}

#[cfg(test)]
mod tests;
