//! Leaf types of the runtime: element types, values and dimensions
//! (`halide_type_t`, `halide_dimension_t`), and the shape arithmetic every layer
//! above shares. Imports nothing of the crate.

/// Most dimensions a buffer may have (Halide's `MAX_COPY_DIMS`).
pub const MAX_DIMS: usize = 16;

/// Element type of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// 8-bit signed integer.
    I8,
    /// 16-bit signed integer.
    I16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 8-bit unsigned integer.
    U8,
    /// 16-bit unsigned integer.
    U16,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

impl ElemType {
    /// Every element type.
    pub const ALL: [ElemType; 10] = [
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::U8,
        ElemType::U16,
        ElemType::U32,
        ElemType::U64,
        ElemType::F32,
        ElemType::F64,
    ];

    /// Size of one element in bytes.
    pub fn bytes(self) -> usize {
        match self {
            ElemType::I8 | ElemType::U8 => 1,
            ElemType::I16 | ElemType::U16 => 2,
            ElemType::I32 | ElemType::U32 | ElemType::F32 => 4,
            ElemType::I64 | ElemType::U64 | ElemType::F64 => 8,
        }
    }

    /// The name as cases write it: `i8` ... `f64`.
    pub fn name(self) -> &'static str {
        match self {
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::U8 => "u8",
            ElemType::U16 => "u16",
            ElemType::U32 => "u32",
            ElemType::U64 => "u64",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
        }
    }

    /// Whether this is `f32` or `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F64)
    }

    /// Writes `v` at `bytes[0..self.bytes()]`, little-endian, converting as a C cast
    /// does (integers wrap, floats take the nearest value).
    pub fn store(self, bytes: &mut [u8], v: i64) {
        match self {
            ElemType::I8 | ElemType::U8 => bytes[0] = v as u8,
            ElemType::I16 | ElemType::U16 => bytes[..2].copy_from_slice(&(v as u16).to_le_bytes()),
            ElemType::I32 | ElemType::U32 => bytes[..4].copy_from_slice(&(v as u32).to_le_bytes()),
            ElemType::I64 | ElemType::U64 => bytes[..8].copy_from_slice(&v.to_le_bytes()),
            ElemType::F32 => bytes[..4].copy_from_slice(&(v as f32).to_le_bytes()),
            ElemType::F64 => bytes[..8].copy_from_slice(&(v as f64).to_le_bytes()),
        }
    }

    /// Reads the element at `bytes[0..self.bytes()]`.
    pub fn load(self, bytes: &[u8]) -> Value {
        let b = |n: usize| -> [u8; 8] {
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(&bytes[..n]);
            a
        };
        match self {
            ElemType::I8 => Value::Int(bytes[0] as i8 as i64),
            ElemType::U8 => Value::Int(bytes[0] as i64),
            ElemType::I16 => Value::Int(i16::from_le_bytes([bytes[0], bytes[1]]) as i64),
            ElemType::U16 => Value::Int(u16::from_le_bytes([bytes[0], bytes[1]]) as i64),
            ElemType::I32 => {
                Value::Int(i32::from_le_bytes(b(4)[..4].try_into().unwrap_or_default()) as i64)
            }
            ElemType::U32 => {
                Value::Int(u32::from_le_bytes(b(4)[..4].try_into().unwrap_or_default()) as i64)
            }
            ElemType::I64 => Value::Int(i64::from_le_bytes(b(8))),
            // u64 values above i64::MAX compare by their bit pattern, as a cast would.
            ElemType::U64 => Value::Int(u64::from_le_bytes(b(8)) as i64),
            ElemType::F32 => {
                Value::Float(f32::from_le_bytes(b(4)[..4].try_into().unwrap_or_default()) as f64)
            }
            ElemType::F64 => Value::Float(f64::from_le_bytes(b(8))),
        }
    }

    /// Whether a stored element equals the integer `v` converted to this type.
    pub fn equals(self, stored: Value, v: i64) -> bool {
        let mut tmp = [0u8; 8];
        self.store(&mut tmp, v);
        stored == self.load(&tmp)
    }
}

impl std::str::FromStr for ElemType {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        ElemType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown element type '{s}'; expected one of i8, i16, i32, i64, u8, u16, u32, u64, f32, f64"))
    }
}

impl std::fmt::Display for ElemType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An element's value as read back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// An integer element.
    Int(i64),
    /// A floating-point element.
    Float(f64),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

/// One dimension: `halide_dimension_t` without flags. Extent and stride in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim {
    /// Coordinate of the first element.
    pub min: i64,
    /// Number of elements.
    pub extent: i64,
    /// Elements between neighbours in this dimension.
    pub stride: i64,
}

/// The box of `dims` for messages: `[0..8, 2..6]`, each dimension's
/// `min..min + extent`, innermost first.
pub fn box_text(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| format!("{}..{}", d.min, d.min.saturating_add(d.extent)))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Dense strides (first dimension innermost) for `extents`.
pub fn dense_dims(extents: &[i64]) -> Vec<Dim> {
    let mut stride = 1;
    extents
        .iter()
        .map(|&extent| {
            let d = Dim {
                min: 0,
                extent,
                stride,
            };
            // Saturates: an overflowing shape is refused by the size check after.
            stride = stride.saturating_mul(extent.max(1));
            d
        })
        .collect()
}

/// Elements in the intersection of two boxes of the same dimensions.
pub fn intersection(a: &[Dim], b: &[Dim]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(a, b)| {
            let lo = a.min.max(b.min);
            let hi = (a.min + a.extent).min(b.min + b.extent);
            (hi - lo).max(0) as u64
        })
        .product()
}

/// Bytes spanned by `dims` from the element at the mins to the last element, inclusive.
pub fn span_bytes(elem: ElemType, dims: &[Dim]) -> Option<u64> {
    if dims.iter().any(|d| d.extent == 0) {
        return Some(0);
    }
    let mut last: u64 = 0;
    for d in dims {
        let far = (d.extent as u64 - 1).checked_mul(d.stride as u64)?;
        last = last.checked_add(far)?;
    }
    last.checked_add(1)?.checked_mul(elem.bytes() as u64)
}
/// Which way a copy moved data (what [`Context::buffer_copy`] took, and the
/// direction of the copy counters).
///
/// [`Context::buffer_copy`]: crate::Context::buffer_copy
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CopyPath {
    /// Host memory to device memory.
    HostToDevice,
    /// Device memory to host memory.
    DeviceToHost,
    /// Device memory to device memory.
    DeviceToDevice,
    /// Host memory to host memory, without the device.
    HostToHost,
}

impl CopyPath {
    /// Every path, in counter order.
    pub const ALL: [CopyPath; 4] = [
        CopyPath::HostToDevice,
        CopyPath::DeviceToHost,
        CopyPath::DeviceToDevice,
        CopyPath::HostToHost,
    ];

    /// The name in counters and reports: `to_device`, `to_host`,
    /// `device_to_device`, `host_to_host`.
    pub fn name(self) -> &'static str {
        match self {
            CopyPath::HostToDevice => "to_device",
            CopyPath::DeviceToHost => "to_host",
            CopyPath::DeviceToDevice => "device_to_device",
            CopyPath::HostToHost => "host_to_host",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersections() {
        let d = |min, extent| Dim {
            min,
            extent,
            stride: 1,
        };
        assert_eq!(
            intersection(&[d(0, 10), d(0, 10)], &[d(5, 10), d(8, 4)]),
            10
        );
        assert_eq!(intersection(&[d(100, 64)], &[d(0, 64)]), 0);
        assert_eq!(intersection(&[d(100, 64)], &[d(0, 110)]), 10);
    }
}
