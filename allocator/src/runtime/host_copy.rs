//! Host to host: the intersection of two host views, copied by the CPU, with no
//! device and no context. `halide_buffer_copy` between two host buffers needs no
//! more, and Halide's generic layer gets it wrong where boxes overlap in part
//! (it copies `min(extent)` elements from each buffer's min).

use crate::buffer::{Buffer, HostView};
use crate::error::{Error, Result};
use crate::runtime::plan::CopyPlan;
use crate::types::Dim;

/// Copies the elements of `src` that `dst`'s box also covers into `dst`'s host
/// memory and returns how many bytes moved; `dst`'s dirty bits are the
/// caller's. Views of one host memory are copied through a temporary, so
/// boxes that overlap in memory behave as `memmove`.
pub fn copy_host(src: &Buffer, dst: &Buffer) -> Result<u64> {
    let (Some(s), Some(d)) = (src.host_view(), dst.host_view()) else {
        return Err(Error::BadDimensions(format!(
            "a host copy from {} to {}: {} has no host memory",
            src.name(),
            dst.name(),
            if src.host_view().is_none() {
                src.name()
            } else {
                dst.name()
            }
        )));
    };
    if src.elem() != dst.elem() {
        return Err(Error::BadDimensions(format!(
            "a host copy from {} ({:?}) to {} ({:?}): element types differ",
            src.name(),
            src.elem(),
            dst.name(),
            dst.elem()
        )));
    }
    let plan = CopyPlan::new(src.dims(), dst.dims(), src.elem().bytes())?;
    copy_views((s, src.dims()), (d, dst.dims()), &plan)?;
    Ok(plan.bytes())
}

/// Carries out `plan` between two host views.
pub(crate) fn copy_views(
    src: (&HostView, &[Dim]),
    dst: (&HostView, &[Dim]),
    plan: &CopyPlan,
) -> Result<()> {
    if plan.chunks() == 0 {
        return Ok(());
    }
    if std::sync::Arc::ptr_eq(&src.0.memory, &dst.0.memory) {
        let mut mem = dst.0.memory.write().unwrap_or_else(|p| p.into_inner());
        check("source", src.0, mem.len(), plan.src_end())?;
        check("destination", dst.0, mem.len(), plan.dst_end())?;
        let mut temp = vec![0u8; plan.bytes() as usize];
        plan.with_dense_dst()
            .copy_host(&mem[src.0.offset..], &mut temp);
        plan.with_dense_src()
            .copy_host(&temp, &mut mem[dst.0.offset..]);
        return Ok(());
    }
    let s = src.0.memory.read().unwrap_or_else(|p| p.into_inner());
    let mut d = dst.0.memory.write().unwrap_or_else(|p| p.into_inner());
    check("source", src.0, s.len(), plan.src_end())?;
    check("destination", dst.0, d.len(), plan.dst_end())?;
    plan.copy_host(&s[src.0.offset..], &mut d[dst.0.offset..]);
    Ok(())
}

/// A view's span must lie within its host memory.
pub(crate) fn check(side: &str, view: &HostView, len: usize, end: u64) -> Result<()> {
    if view.offset as u64 + end > len as u64 {
        return Err(Error::BadDimensions(format!(
            "{side} of the copy ends at byte {} of {len} bytes of host memory",
            view.offset as u64 + end
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ElemType;

    fn buffer(name: &str, mins: &[i64], extents: &[i64]) -> Buffer {
        let mut stride = 1;
        let dims = mins
            .iter()
            .zip(extents)
            .map(|(&min, &extent)| {
                let d = Dim {
                    min,
                    extent,
                    stride,
                };
                stride *= extent;
                d
            })
            .collect();
        Buffer::with_dims(name, ElemType::I32, dims, true).unwrap()
    }

    #[test]
    fn copies_the_intersection_of_boxes_that_overlap_in_part() {
        // The second half of Halide's latent bug 4: [-20, 40) x [0, 4) into
        // [10, 70) x [2, 6) copies [10, 40) x [2, 4) and nothing else.
        let mut c = buffer("c", &[-20, 0], &[60, 4]);
        c.fill(|p| p[0] + 100 * p[1]).unwrap();
        let mut d = buffer("d", &[10, 2], &[60, 4]);
        d.fill(|_| -2).unwrap();
        assert_eq!(copy_host(&c, &d).unwrap(), 30 * 2 * 4);
        let cmp = d
            .compare(
                |p| {
                    if p[0] < 40 && p[1] < 4 {
                        p[0] + 100 * p[1]
                    } else {
                        -2
                    }
                },
                4,
            )
            .unwrap();
        assert_eq!(cmp.mismatches, 0, "{cmp:?}");
    }

    #[test]
    fn boxes_that_do_not_meet_copy_nothing() {
        let mut a = buffer("a", &[0], &[10]);
        a.fill(|p| p[0]).unwrap();
        let mut b = buffer("b", &[10], &[10]);
        b.fill(|_| 7).unwrap();
        assert_eq!(copy_host(&a, &b).unwrap(), 0);
        assert_eq!(b.compare(|_| 7, 4).unwrap().mismatches, 0);
    }

    #[test]
    fn a_buffer_without_host_memory_is_an_error() {
        let a = buffer("a", &[0], &[10]);
        let b = Buffer::with_dims(
            "b",
            ElemType::I32,
            vec![Dim {
                min: 0,
                extent: 10,
                stride: 1,
            }],
            false,
        )
        .unwrap();
        let e = copy_host(&a, &b).unwrap_err().to_string();
        assert!(e.contains("b has no host memory"), "{e}");
    }
}
