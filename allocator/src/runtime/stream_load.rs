//! Copies out of host-visible device memory with streaming loads, as NVIDIA's
//! GDRCopy reads BAR-mapped VRAM. Such memory is mapped write-combined: a plain
//! load is one uncached read across PCIe, while SSE4.1's `movntdqa` fills a
//! whole line per read and keeps several in flight. On ordinary write-back
//! memory (lavapipe, integrated GPUs) it is a plain load.

/// Copies `n` bytes from `src` to `dst`.
///
/// The loads read whole aligned 16-byte blocks: the bytes before `src` and
/// after `src + n` within their blocks are read and dropped.
///
/// # Safety
/// `src` points into a mapping whose aligned 16-byte blocks around
/// `src..src + n` are mapped (every Vulkan mapping is: memory is mapped in
/// pages); `dst` holds `n` writable bytes that do not overlap them.
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.1") {
        // SAFETY: the caller's bounds; the CPU has SSE4.1.
        return unsafe { streamed(src, dst, n) };
    }
    // SAFETY: the caller's bounds.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
}

/// [`copy`] by 16-byte streaming loads, four at a time where it can.
///
/// # Safety
/// As [`copy`], on a CPU with SSE4.1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
unsafe fn streamed(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_storeu_si128, _mm_stream_load_si128};
    if n == 0 {
        return;
    }
    // Loads must not pass the wait that saw the device's writes done.
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    let head = src as usize % 16;
    let mut block = src.wrapping_sub(head) as *const __m128i;
    let (mut at, mut out) = (0usize, dst);
    // A block the copy starts or ends inside: loaded whole, its part kept.
    let partial = |block: *const __m128i, from: usize, len: usize, out: *mut u8| {
        let mut bytes = [0u8; 16];
        // SAFETY: an aligned, mapped block (the caller's bounds); `bytes` holds
        // 16 bytes; `out` holds `len` of them.
        unsafe {
            _mm_storeu_si128(
                bytes.as_mut_ptr() as *mut __m128i,
                _mm_stream_load_si128(block),
            );
            std::ptr::copy_nonoverlapping(bytes.as_ptr().add(from), out, len);
        }
    };
    if head != 0 {
        let len = (16 - head).min(n);
        partial(block, head, len, out);
        // SAFETY: within the blocks and `dst` (the caller's bounds).
        (block, out, at) = unsafe { (block.add(1), out.add(len), len) };
    }
    while n - at >= 64 {
        // SAFETY: the four blocks read are aligned and lie within `src..src +
        // n`; the 64 bytes stored lie within `dst`.
        unsafe {
            let (a, b, c, d) = (
                _mm_stream_load_si128(block),
                _mm_stream_load_si128(block.add(1)),
                _mm_stream_load_si128(block.add(2)),
                _mm_stream_load_si128(block.add(3)),
            );
            let o = out as *mut __m128i;
            _mm_storeu_si128(o, a);
            _mm_storeu_si128(o.add(1), b);
            _mm_storeu_si128(o.add(2), c);
            _mm_storeu_si128(o.add(3), d);
            (block, out) = (block.add(4), out.add(64));
        }
        at += 64;
    }
    while n - at >= 16 {
        // SAFETY: the block read is aligned and lies within `src..src + n`; the
        // 16 bytes stored lie within `dst`.
        unsafe {
            _mm_storeu_si128(out as *mut __m128i, _mm_stream_load_si128(block));
            (block, out) = (block.add(1), out.add(16));
        }
        at += 16;
    }
    if at < n {
        partial(block, 0, n - at, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn copies_every_byte_of_any_span_and_no_other(
            start in 0usize..80,
            n in 0usize..300,
            out_at in 0usize..16,
        ) {
            // The source's whole 16-byte blocks are readable: the buffer is
            // aligned and padded.
            let src: Vec<u128> = (0..32u128).map(|i| i * 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10).collect();
            let src = src.as_ptr() as *const u8;
            let mut dst = vec![0xeeu8; 400];
            // SAFETY: start + n < 380 < 512 bytes of the aligned source; the
            // destination holds out_at + n < 316 bytes.
            unsafe { copy(src.add(start), dst.as_mut_ptr().add(out_at), n) };
            // SAFETY: the same span, read plainly.
            let want = unsafe { std::slice::from_raw_parts(src.add(start), n) };
            prop_assert_eq!(&dst[out_at..out_at + n], want);
            prop_assert!(dst[..out_at].iter().chain(&dst[out_at + n..]).all(|&b| b == 0xee));
        }
    }
}
