use super::*;
use crate::types::dense_dims;

fn dims(v: &[(i64, i64, i64)]) -> Vec<Dim> {
    v.iter()
        .map(|&(min, extent, stride)| Dim {
            min,
            extent,
            stride,
        })
        .collect()
}

#[test]
fn dense_whole_buffer_is_one_chunk() {
    let d = dense_dims(&[128, 128]);
    let p = CopyPlan::new(&d, &d, 4).unwrap();
    assert_eq!(p.chunk, 128 * 128 * 4);
    assert!(p.dims.is_empty());
    assert_eq!(p.chunks(), 1);
}

#[test]
fn crop_of_dense_buffer_copies_rows() {
    // A 64x64 crop at (32, 32) of a 128x128 i32 buffer: Halide's device_crop.
    let parent = dense_dims(&[128, 128]);
    let crop = dims(&[(32, 64, 1), (32, 64, 128)]);
    let p = CopyPlan::new(&parent, &crop, 4).unwrap();
    assert_eq!(p.chunk, 256);
    assert_eq!(p.chunks(), 64);
    assert_eq!(p.src_begin, (32 + 32 * 128) * 4);
    assert_eq!(p.dst_begin, 0);
}

#[test]
fn partial_overlap_uses_true_intersection() {
    // Halide's make_buffer_copy would copy min(extent) = 10 elements and overrun.
    let src = dims(&[(0, 10, 1)]);
    let dst = dims(&[(5, 10, 1)]);
    let p = CopyPlan::new(&src, &dst, 4).unwrap();
    assert_eq!(p.bytes(), 5 * 4);
    assert_eq!(p.src_begin, 5 * 4);
    assert_eq!(p.dst_begin, 0);
    assert_eq!(p.src_end(), 40);
    assert_eq!(p.dst_end(), 20);
}

#[test]
fn disjoint_boxes_copy_nothing() {
    let p = CopyPlan::new(&dims(&[(0, 4, 1)]), &dims(&[(4, 4, 1)]), 4).unwrap();
    assert_eq!(p.chunks(), 0);
    assert_eq!(p.bytes(), 0);
}

#[test]
fn stride_two_view_does_not_fold() {
    // gpu_non_contiguous_copy: 16x16x3x3 with doubled strides: 2304 chunks of 4 bytes.
    let full = dims(&[(0, 16, 2), (0, 16, 160), (0, 3, 9600), (0, 3, 96000)]);
    let p = CopyPlan::new(&full, &dense_dims(&[16, 16, 3, 3]), 4).unwrap();
    assert_eq!(p.chunk, 4);
    assert_eq!(p.chunks(), 2304);
    let dense = p.with_dense_dst();
    assert_eq!(dense.bytes(), 2304 * 4);
}

#[test]
fn staging_round_trip_agrees_between_layouts() {
    // Source and destination of different layouts through dense staging.
    let src = dims(&[(0, 8, 3), (0, 5, 40)]);
    let dst = dims(&[(2, 4, 1), (1, 3, 4)]);
    let p = CopyPlan::new(&src, &dst, 1).unwrap();
    let src_bytes: Vec<u8> = (0..200u8).collect();
    let mut direct = vec![0u8; 16];
    p.copy_host(&src_bytes, &mut direct);
    let mut staging = vec![0u8; p.bytes() as usize];
    p.with_dense_dst().copy_host(&src_bytes, &mut staging);
    let mut via = vec![0u8; 16];
    p.with_dense_src().copy_host(&staging, &mut via);
    assert_eq!(direct, via);
    // Element (2,1) of dst is element (2,1) of src: byte 2*3 + 1*40.
    assert_eq!(direct[0], 46);
}

#[test]
fn mismatched_dimension_counts_are_an_error() {
    let e = CopyPlan::new(&dense_dims(&[4]), &dense_dims(&[2, 2]), 4).unwrap_err();
    assert_eq!(e.name(), "incompatible_buffers");
}

/// The bytes a plan copies as `(src, dst)` pairs, in the order of `for_each_chunk`.
fn plan_bytes(p: &CopyPlan) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    p.for_each_chunk(|s, d| out.extend((0..p.chunk).map(|b| (s + b, d + b))));
    out
}

/// The model: every element of the box `count` elements wide from coordinate
/// `start` in each dimension, copied byte by byte.
fn model_bytes(src: &[Dim], dst: &[Dim], eb: u64, start: &[i64], count: &[i64]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if count.iter().any(|&c| c <= 0) {
        return out;
    }
    let mut at = vec![0i64; count.len()];
    loop {
        let (mut s, mut d) = (0i64, 0i64);
        for k in 0..count.len() {
            let c = start[k] + at[k];
            s += (c - src[k].min) * src[k].stride;
            d += (c - dst[k].min) * dst[k].stride;
        }
        let (s, d) = (s as u64 * eb, d as u64 * eb);
        out.extend((0..eb).map(|b| (s + b, d + b)));
        let mut k = 0;
        loop {
            if k == count.len() {
                return out;
            }
            at[k] += 1;
            if at[k] < count[k] {
                break;
            }
            at[k] = 0;
            k += 1;
        }
    }
}

/// The true intersection, element by element; along a destination dimension of
/// stride 0 only the last element, the one an in-order copy leaves.
fn model(src: &[Dim], dst: &[Dim], eb: u64) -> Vec<(u64, u64)> {
    let mut start: Vec<i64> = src.iter().zip(dst).map(|(s, d)| s.min.max(d.min)).collect();
    let mut count: Vec<i64> = src
        .iter()
        .zip(dst)
        .map(|(s, d)| (s.min + s.extent).min(d.min + d.extent) - s.min.max(d.min))
        .collect();
    for (k, d) in dst.iter().enumerate() {
        if d.stride == 0 && count[k] > 1 {
            start[k] += count[k] - 1;
            count[k] = 1;
        }
    }
    model_bytes(src, dst, eb, &start, &count)
}

/// Halide's `make_buffer_copy`: `min(extent)` elements from the later min.
fn model_halide(src: &[Dim], dst: &[Dim], eb: u64) -> Vec<(u64, u64)> {
    let start: Vec<i64> = src.iter().zip(dst).map(|(s, d)| s.min.max(d.min)).collect();
    let count: Vec<i64> = src
        .iter()
        .zip(dst)
        .map(|(s, d)| s.extent.min(d.extent))
        .collect();
    model_bytes(src, dst, eb, &start, &count)
}

fn sorted(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    v
}

/// Exclusive end of the bytes on one side, 0 when nothing is copied.
fn end(v: &[(u64, u64)], side: fn(&(u64, u64)) -> u64) -> u64 {
    v.iter().map(side).max().map_or(0, |m| m + 1)
}

/// What every plan keeps: dims of extent > 1 sorted by destination stride, and
/// nothing left that `fold` could merge.
fn assert_folded(p: &CopyPlan) {
    assert!(p.dims.iter().all(|d| d.extent > 1), "{p:?}");
    assert!(
        p.dims
            .windows(2)
            .all(|w| w[0].dst_stride <= w[1].dst_stride),
        "{p:?}"
    );
    if let Some(d0) = p.dims.first() {
        assert!(
            !(d0.src_stride == p.chunk && d0.dst_stride == p.chunk),
            "{p:?}"
        );
    }
    for w in p.dims.windows(2) {
        assert!(
            !(w[1].src_stride == w[0].src_stride * w[0].extent
                && w[1].dst_stride == w[0].dst_stride * w[0].extent),
            "{p:?}"
        );
    }
}

/// Checks a plan against the bytes it must copy.
fn assert_plan(p: &CopyPlan, want: &[(u64, u64)]) {
    let got = plan_bytes(p);
    assert_eq!(sorted(got.clone()), sorted(want.to_vec()), "{p:?}");
    assert_eq!(p.bytes(), want.len() as u64);
    assert_eq!(p.chunks() * p.chunk, p.bytes());
    assert_eq!(p.src_end(), end(want, |b| b.0), "{p:?}");
    assert_eq!(p.dst_end(), end(want, |b| b.1), "{p:?}");
    // The iterator and the callback walk the same chunks in the same order.
    let mut chunks = Vec::new();
    p.for_each_chunk(|s, d| chunks.push((s, d)));
    assert_eq!(p.chunk_offsets().collect::<Vec<_>>(), chunks);
    assert_eq!(chunks.len() as u64, p.chunks());
    // Along the innermost dimension destinations increase.
    if let Some(d0) = p.dims.first() {
        let inner = d0.extent as usize;
        for run in chunks.chunks(inner) {
            assert!(run.windows(2).all(|w| w[1].1 == w[0].1 + d0.dst_stride));
        }
    }
    // dst_disjoint is conservative: true only where no byte is written twice.
    let mut dst: Vec<u64> = want.iter().map(|b| b.1).collect();
    dst.sort_unstable();
    let unique = dst.windows(2).all(|w| w[0] != w[1]);
    if p.dst_disjoint() {
        assert!(unique, "{p:?}");
    }
    assert_folded(p);
}

#[test]
fn crop_plan_is_pinned() {
    // A 3x2 crop at (1, 1) of a 5x4 u16 buffer padded to rows of 6, into a dense 3x2.
    let src = dims(&[(0, 5, 1), (0, 4, 6)]);
    let dst = dims(&[(1, 3, 1), (1, 2, 3)]);
    let p = CopyPlan::new(&src, &dst, 2).unwrap();
    let want = CopyPlan {
        chunk: 6,
        dims: vec![PlanDim {
            extent: 2,
            src_stride: 12,
            dst_stride: 6,
        }],
        src_begin: (1 + 6) * 2,
        dst_begin: 0,
    };
    assert_eq!(p, want);
    assert_eq!((p.src_end(), p.dst_end()), (14 + 12 + 6, 12));
    assert!(p.dst_disjoint());
    assert_eq!(p.chunk_offsets().collect::<Vec<_>>(), [(14, 0), (26, 6)]);
}

#[test]
fn adjacent_dims_fold_into_one() {
    // Rows of 4 bytes every 8 in both: the two outer dims (strides 8 and 32) are one.
    let d = dims(&[(0, 4, 1), (0, 4, 8), (0, 3, 32)]);
    let crop = dims(&[(0, 4, 1), (0, 4, 8), (0, 3, 32)]);
    let mut src = d.clone();
    src[0].extent = 8;
    let p = CopyPlan::new(&src, &crop, 1).unwrap();
    assert_eq!(p.chunk, 4);
    assert_eq!(
        p.dims,
        [PlanDim {
            extent: 12,
            src_stride: 8,
            dst_stride: 8
        }]
    );
    // Dims are ordered by destination stride: a transpose keeps the source's order.
    let src = dims(&[(0, 3, 4), (0, 4, 1)]);
    let dst = dims(&[(0, 3, 1), (0, 4, 3)]);
    let p = CopyPlan::new(&src, &dst, 1).unwrap();
    assert_eq!(p.chunk, 1);
    assert_eq!(
        p.dims,
        [
            PlanDim {
                extent: 3,
                src_stride: 4,
                dst_stride: 1
            },
            PlanDim {
                extent: 4,
                src_stride: 1,
                dst_stride: 3
            }
        ]
    );
}

#[test]
fn dst_disjoint_at_its_bounds() {
    let plan = |chunk, dims: &[(u64, u64, u64)]| CopyPlan {
        chunk,
        dims: dims
            .iter()
            .map(|&(extent, src_stride, dst_stride)| PlanDim {
                extent,
                src_stride,
                dst_stride,
            })
            .collect(),
        src_begin: 0,
        dst_begin: 0,
    };
    // Chunks of 4 exactly 4 apart: touching, not overlapping.
    assert!(plan(4, &[(2, 8, 4)]).dst_disjoint());
    assert!(!plan(4, &[(2, 8, 3)]).dst_disjoint());
    // The outer dim must clear the span of the inner: 4 + 1 * 4 = 8.
    assert!(plan(4, &[(2, 8, 4), (3, 64, 8)]).dst_disjoint());
    assert!(!plan(4, &[(2, 8, 4), (3, 64, 7)]).dst_disjoint());
    // Span counts extent - 1 strides: 1 + 2 * 2 = 5.
    assert!(plan(1, &[(3, 1, 2), (2, 9, 5)]).dst_disjoint());
    assert!(!plan(1, &[(3, 1, 2), (2, 9, 4)]).dst_disjoint());
    // Broadcast into one place.
    assert!(!plan(4, &[(2, 4, 0)]).dst_disjoint());
    // Interleaved yet disjoint (0 2 4 / 3 5 7): refused, as the check is conservative.
    assert!(!plan(1, &[(3, 1, 2), (2, 9, 3)]).dst_disjoint());
    assert!(plan(4, &[]).dst_disjoint());
}

#[test]
fn dense_layouts_of_a_plan() {
    let src = dims(&[(0, 8, 3), (0, 5, 40)]);
    let dst = dims(&[(2, 4, 1), (1, 3, 4)]);
    let p = CopyPlan::new(&src, &dst, 1).unwrap();
    let dd = p.with_dense_dst();
    assert_eq!((dd.dst_begin, dd.src_begin), (0, p.src_begin));
    assert_eq!(
        dd.dims,
        [
            PlanDim {
                extent: 4,
                src_stride: 3,
                dst_stride: 1
            },
            PlanDim {
                extent: 3,
                src_stride: 40,
                dst_stride: 4
            }
        ]
    );
    // Dense on both sides: one chunk.
    let d = dims(&[(0, 4, 1), (0, 3, 4)]);
    let mut wide = d.clone();
    wide[1].stride = 8;
    let p = CopyPlan::new(&wide, &d, 2).unwrap();
    assert_eq!((p.chunk, p.dims.len()), (8, 1));
    let ds = p.with_dense_src();
    assert_eq!((ds.chunk, ds.dims.len(), ds.src_begin), (24, 0, 0));
}

#[test]
fn halide_plan_copies_min_extent_from_the_later_min() {
    let src = dims(&[(0, 10, 1)]);
    let dst = dims(&[(5, 10, 1)]);
    let p = CopyPlan::halide(&src, &dst, 4).unwrap();
    // Ten elements from 5: five past the end of the source.
    assert_eq!((p.chunk, p.src_begin, p.dst_begin), (40, 20, 0));
    let p = CopyPlan::halide(&dst, &src, 4).unwrap();
    assert_eq!((p.chunk, p.src_begin, p.dst_begin), (40, 0, 20));
    // Boxes that do not meet still copy min(extent) elements.
    let p = CopyPlan::halide(&dims(&[(0, 4, 1)]), &dims(&[(4, 4, 1)]), 1).unwrap();
    assert_eq!((p.bytes(), p.src_begin), (4, 4));
    let p = CopyPlan::halide(&dims(&[(0, 0, 1)]), &dims(&[(0, 4, 1)]), 1).unwrap();
    assert_eq!(p, CopyPlan::empty());
    let e = CopyPlan::halide(&dense_dims(&[4]), &dense_dims(&[2, 2]), 4).unwrap_err();
    assert_eq!(e.name(), "incompatible_buffers");
}

#[test]
fn too_many_dimensions_are_an_error() {
    let d = dense_dims(&[1; MAX_DIMS + 1]);
    let e = CopyPlan::new(&d, &d, 1).unwrap_err();
    assert_eq!(e.name(), "bad_dimensions");
    let d = dense_dims(&[2; MAX_DIMS]);
    assert_eq!(CopyPlan::new(&d, &d, 1).unwrap().bytes(), 1 << MAX_DIMS);
}

mod props {
    use proptest::prelude::*;

    use super::*;

    /// One side of a copy: a box with either nested strides (a dense buffer in some
    /// dimension order, rows padded) or arbitrary ones (gaps, overlaps, broadcasts).
    fn side(n: usize) -> impl Strategy<Value = Vec<Dim>> {
        let extent = prop_oneof![9 => 1i64..5, 1 => Just(0i64)];
        (
            proptest::collection::vec(extent, n),
            proptest::collection::vec(-2i64..3, n),
            Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
            proptest::collection::vec(0i64..2, n),
            proptest::option::weighted(0.3, proptest::collection::vec(0i64..24, n)),
        )
            .prop_map(|(extents, mins, order, pad, arbitrary)| {
                let mut strides = vec![0; extents.len()];
                let mut stride = 1;
                for &k in &order {
                    strides[k] = stride;
                    stride *= extents[k].max(1) + pad[k];
                }
                let strides = arbitrary.unwrap_or(strides);
                (0..extents.len())
                    .map(|k| Dim {
                        min: mins[k],
                        extent: extents[k],
                        stride: strides[k],
                    })
                    .collect()
            })
    }

    fn case() -> impl Strategy<Value = (Vec<Dim>, Vec<Dim>, usize)> {
        (1usize..=4).prop_flat_map(|n| {
            (
                side(n),
                side(n),
                prop_oneof![Just(1usize), Just(2), Just(4), Just(8)],
            )
        })
    }

    /// Whether the strides nest (each at least the span of the smaller ones), as a
    /// dense or padded buffer's do.
    fn nested(d: &[Dim]) -> bool {
        let mut v: Vec<&Dim> = d.iter().collect();
        v.sort_by_key(|d| d.stride);
        let mut span = 1;
        for d in v {
            if d.stride < span {
                return false;
            }
            span = d.stride * d.extent.max(1);
        }
        true
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn plan_matches_the_element_model((src, dst, eb) in case()) {
            let p = CopyPlan::new(&src, &dst, eb).unwrap();
            let want = model(&src, &dst, eb as u64);
            assert_plan(&p, &want);
            if want.is_empty() {
                prop_assert_eq!(p, CopyPlan::empty());
            } else if nested(&dst) {
                prop_assert!(p.dst_disjoint(), "{:?}", p);
            }
        }

        #[test]
        fn halide_plan_matches_its_model((src, dst, eb) in case()) {
            let p = CopyPlan::halide(&src, &dst, eb).unwrap();
            assert_plan(&p, &model_halide(&src, &dst, eb as u64));
        }

        #[test]
        fn dense_layouts_keep_the_other_side((src, dst, eb) in case()) {
            let p = CopyPlan::new(&src, &dst, eb).unwrap();
            let bytes = plan_bytes(&p);
            let n = bytes.len() as u64;
            let dd = plan_bytes(&p.with_dense_dst());
            prop_assert_eq!(
                dd,
                bytes.iter().zip(0..n).map(|(b, i)| (b.0, i)).collect::<Vec<_>>()
            );
            let ds = plan_bytes(&p.with_dense_src());
            prop_assert_eq!(
                ds,
                bytes.iter().zip(0..n).map(|(b, i)| (i, b.1)).collect::<Vec<_>>()
            );
            assert_folded(&p.with_dense_dst());
            assert_folded(&p.with_dense_src());
        }

        #[test]
        fn copy_host_moves_the_model_bytes((src, dst, eb) in case()) {
            let p = CopyPlan::new(&src, &dst, eb).unwrap();
            let want = model(&src, &dst, eb as u64);
            let from: Vec<u8> = (0..p.src_end()).map(|i| (i % 251) as u8 + 1).collect();
            let mut got = vec![0u8; p.dst_end() as usize];
            p.copy_host(&from, &mut got);
            // Where a byte is written twice, the last write in chunk order wins.
            let mut expect = vec![0u8; p.dst_end() as usize];
            for (s, d) in plan_bytes(&p) {
                expect[d as usize] = from[s as usize];
            }
            prop_assert_eq!(&got, &expect);
            for (s, d) in want {
                prop_assert!(got[d as usize] != 0 || from[s as usize] == 0);
            }
        }
    }
}

#[test]
fn zero_destination_strides_copy_only_the_last_element() {
    // 2^31 elements aliasing one byte on both sides: one byte to copy.
    let one = dims(&[(0, 65536, 0), (0, 32768, 0)]);
    let p = CopyPlan::new(&one, &one, 1).unwrap();
    assert_eq!(
        (p.chunk, p.chunks(), p.src_begin, p.dst_begin),
        (1, 1, 0, 0)
    );
    // A dense source into a broadcast destination row: the last source element of
    // each row stays, as an in-order copy of every element leaves it.
    let src = dense_dims(&[10, 3]);
    let dst = dims(&[(0, 10, 0), (0, 3, 1)]);
    let p = CopyPlan::new(&src, &dst, 4).unwrap();
    assert_eq!(p.chunks(), 3);
    let mut seen = Vec::new();
    p.for_each_chunk(|s, d| seen.push((s, d)));
    assert_eq!(seen, [(9 * 4, 0), ((10 + 9) * 4, 4), ((20 + 9) * 4, 8)]);
    let mut src_bytes = vec![0u8; 30 * 4];
    for (i, b) in src_bytes.iter_mut().enumerate() {
        *b = i as u8;
    }
    let (mut planned, mut in_order) = (vec![0u8; 12], vec![0u8; 12]);
    p.copy_host(&src_bytes, &mut planned);
    for y in 0..3 {
        for x in 0..10 {
            let s = (x + 10 * y) * 4;
            in_order[y * 4..y * 4 + 4].copy_from_slice(&src_bytes[s..s + 4]);
        }
    }
    assert_eq!(planned, in_order);
}
