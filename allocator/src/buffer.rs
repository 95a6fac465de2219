//! A `halide_buffer_t`-like buffer: element type, up to 16 dimensions of
//! (min, extent, stride), host memory, a device allocation, and the
//! `host_dirty` / `device_dirty` bits (Halide's `src/runtime/HalideBuffer.h`,
//! `HalideRuntime.h`).
//!
//! Strides are in elements and must not be negative. The element at the mins
//! is at byte offset 0 of the host view; element `c` is at
//! `sum((c[d] - min[d]) * stride[d]) * elem_bytes`.

use std::sync::{Arc, RwLock};

use crate::device::DeviceView;
use crate::error::{Error, Result};
use crate::host::HostBytes;

/// Most dimensions a buffer may have (Halide's `MAX_COPY_DIMS`).
pub const MAX_DIMS: usize = 16;

/// Element type of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
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
    Int(i64),
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

/// An element that differs from what was expected.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    pub coords: Vec<i64>,
    pub expected: i64,
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

/// One dimension: `halide_dimension_t` without flags. Extent and stride in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim {
    pub min: i64,
    pub extent: i64,
    pub stride: i64,
}

/// Host memory shared by a buffer and the views made from it.
pub type HostMemory = Arc<RwLock<HostBytes>>;

/// A buffer's host side: shared memory and the byte offset of the element at the mins.
#[derive(Clone, Debug)]
pub struct HostView {
    pub memory: HostMemory,
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
    /// Host memory holds data the device does not have.
    pub host_dirty: bool,
    /// Device memory holds data the host does not have.
    pub device_dirty: bool,
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
        })
    }

    pub(crate) fn from_parts(
        name: &str,
        elem: ElemType,
        dims: Vec<Dim>,
        host: Option<HostView>,
        device: Option<DeviceView>,
        host_dirty: bool,
        device_dirty: bool,
    ) -> Buffer {
        Buffer {
            name: name.to_owned(),
            elem,
            dims,
            host,
            device,
            host_dirty,
            device_dirty,
        }
    }

    /// Gives the buffer host memory (zeros) if it has none.
    pub(crate) fn ensure_host(&mut self) -> Result<()> {
        if self.host.is_none() {
            let bytes = self.size_in_bytes();
            self.host = Some(HostView {
                memory: Arc::new(RwLock::new(host_bytes(self.name(), bytes)?)),
                offset: 0,
            });
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

    pub fn elem(&self) -> ElemType {
        self.elem
    }

    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    pub fn dimensions(&self) -> usize {
        self.dims.len()
    }

    /// Number of elements.
    pub fn len(&self) -> u64 {
        self.dims.iter().map(|d| d.extent as u64).product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes from the first to the last element (Halide's `size_in_bytes`).
    pub fn size_in_bytes(&self) -> u64 {
        span_bytes(self.elem, &self.dims).unwrap_or(0)
    }

    pub fn has_host(&self) -> bool {
        self.host.is_some()
    }

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
        self.host_dirty = true;
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
