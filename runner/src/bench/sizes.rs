//! Sizes as the bench and the CUDA reference write them: bytes, or a whole
//! number of `KiB`, `MiB` or `GiB`.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

const UNITS: [(&str, u64); 3] = [("GiB", GIB), ("MiB", MIB), ("KiB", KIB)];

/// `4KiB` is 4096, `1GiB` 1 << 30, `123` 123 bytes; the value must be positive.
pub fn parse(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, scale) = UNITS
        .iter()
        .find_map(|(u, scale)| text.strip_suffix(u).map(|n| (n, *scale)))
        .unwrap_or((text, 1));
    let bad = || format!("bad size '{text}': expected e.g. 4096, 4KiB, 64MiB, 1GiB");
    let value = number
        .parse::<u64>()
        .map_err(|_| bad())?
        .checked_mul(scale)
        .ok_or_else(bad)?;
    if value == 0 {
        return Err(format!("bad size '{text}': must be positive"));
    }
    Ok(value)
}

/// `64 KiB`, `1 GiB`, `100 B`: the largest unit that divides the size.
pub fn format(n: u64) -> String {
    UNITS
        .iter()
        .find(|(_, unit)| n >= *unit && n.is_multiple_of(*unit))
        .map_or(format!("{n} B"), |(u, unit)| format!("{} {u}", n / unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_sizes_as_the_cuda_reference_does() {
        assert_eq!(parse("4KiB"), Ok(4096));
        assert_eq!(parse("1GiB"), Ok(GIB));
        assert_eq!(parse("123"), Ok(123));
        for bad in ["4KB", "x", "0", "-1MiB", "KiB", "99999999999GiB"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(format(64 * KIB), "64 KiB");
        assert_eq!(format(GIB), "1 GiB");
        assert_eq!(format(100), "100 B");
        assert_eq!(format(1536), "1536 B");
    }
}
