//! Buffers whose dimensions of stride 0 put many coordinates on one element: a
//! host fill or check whose value does not depend on such a coordinate visits
//! it once, so its cost follows the elements, not the coordinates.

use crate::rt::{Buffer, Error};
use vkcopy_kernels::expr::Expr;

/// The part of `b` that a fill or check of `value` has to visit, and how many
/// coordinates each of its elements stands for: every dimension of stride 0 that
/// `value` does not use cut to its last coordinate (all of its coordinates hold
/// the same element and get the same value). None when there is nothing to cut.
pub fn distinct_part(b: &Buffer, value: &Expr) -> Result<Option<(Buffer, u64)>, Error> {
    let dims = b.dims();
    let cut = |d: usize| dims[d].stride == 0 && dims[d].extent > 1 && !value.uses_dim(d);
    if !(0..dims.len()).any(cut) {
        return Ok(None);
    }
    let (mut min, mut extent, mut repeats) = (Vec::new(), Vec::new(), 1u64);
    for (d, dim) in dims.iter().enumerate() {
        if cut(d) {
            min.push(dim.min + dim.extent - 1);
            extent.push(1);
            repeats = repeats.saturating_mul(dim.extent as u64);
        } else {
            min.push(dim.min);
            extent.push(dim.extent);
        }
    }
    Ok(Some((b.cropped(b.name(), &min, &extent)?, repeats)))
}
