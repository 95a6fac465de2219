//! WGSL source of the compute kernels.
//!
//! Every kernel is one 1-D grid-stride loop over the elements of the output's
//! box, with the whole shape baked in as constants: the linear index is split
//! into per-dimension counters `k0 .. kN` by division by the extents (first
//! dimension fastest), and each operand's element index in its binding is
//! `base + sum(k[d] * stride[d])`, where `base` holds the view's element offset
//! in the bound range (and, for inputs, the offset of the output's mins in the
//! input's box). All index arithmetic is `u32`: the caller checks that every
//! bound range fits `maxStorageBufferRange` (at most 2^32 - 1 bytes), and a
//! dimension of extent 1 adds no term, so a stride of any size (one that
//! only such a dimension can have in a bound range) is never written; no index
//! overflows ([`Kernel::index_overflow`] checks it before a kernel is made).
//!
//! Element types and their WGSL storage:
//!
//! | element | storage | computed as |
//! |---|---|---|
//! | i32, u32, f32 | `array<i32>` ... | itself |
//! | i64, u64 | `array<i64>`, `array<u64>` | itself (`SHADER_INT64`, Vulkan `shaderInt64`) |
//! | f64 | `array<f64>` | itself (`FLOAT64`, Vulkan `shaderFloat64`) |
//! | i8, u8, i16, u16 | `array<atomic<u32>>` (output), `array<u32>` (inputs) | `u32`, truncated |
//!
//! 8- and 16-bit elements need no device feature: they live in 32-bit words,
//! read by shift and mask, and written by an `atomicCompareExchangeWeak` loop
//! that replaces only the element's bits, so neighbours that share a word (and
//! that other invocations write at the same time) are never disturbed.
//! Integer arithmetic wraps; for 8/16-bit types wrapping in `u32` and keeping
//! the low bits gives the same result as wrapping in the element type.
//!
//! Values of [`Expr`] are computed in `i32` ([`Expr::to_wgsl`]) and converted as
//! a C cast does (sign-extended to 64 bits, rounded to floats).

use std::fmt::Write as _;

use crate::expr::Expr;
use vkcopy::ElemType;

/// Invocations per workgroup.
pub(crate) const WORKGROUP_SIZE: u32 = 64;

/// One buffer as a kernel addresses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Operand {
    /// Element index, in the bound range, of the element at the output box's mins.
    pub base: u64,
    /// Element stride per dimension of the output box.
    pub strides: Vec<u64>,
}

/// What a kernel computes.
#[derive(Clone, Debug)]
pub(crate) enum Body<'a> {
    /// `out = value(coords)`; `mins` are the output's mins.
    Fill { value: &'a Expr, mins: Vec<i64> },
    /// `out = value(coords, inputs)`: input `j` of `value` is `inputs[j]` (of
    /// element type `elems[j]`), and input `inputs.len()` is `out` itself before
    /// it is written; `mins` are the output's mins.
    Map {
        value: &'a Expr,
        inputs: Vec<Operand>,
        elems: Vec<ElemType>,
        mins: Vec<i64>,
    },
    /// `out = (out if read_out) + sum(inputs) + constant`.
    Add {
        inputs: Vec<Operand>,
        read_out: bool,
        constant: i64,
    },
    /// `out = sum over j < extent of input[base + j * stride]`.
    Sum {
        input: Operand,
        stride: u64,
        extent: u64,
    },
}

/// A kernel over the box of extents `extents`, writing `out` (binding 0); inputs
/// are bindings 1, 2, ... in order.
#[derive(Clone, Debug)]
pub(crate) struct Kernel<'a> {
    pub elem: ElemType,
    pub extents: Vec<u64>,
    pub out: Operand,
    pub body: Body<'a>,
}

fn is_small(elem: ElemType) -> bool {
    elem.bytes() < 4
}

/// The WGSL type values are computed in.
fn compute_type(elem: ElemType) -> &'static str {
    match elem {
        ElemType::I32 => "i32",
        ElemType::U32 => "u32",
        ElemType::F32 => "f32",
        ElemType::I64 => "i64",
        ElemType::U64 => "u64",
        ElemType::F64 => "f64",
        ElemType::I8 | ElemType::U8 | ElemType::I16 | ElemType::U16 => "u32",
    }
}

/// Mask of one element's bits, for 8- and 16-bit types.
fn mask(elem: ElemType) -> &'static str {
    if elem.bytes() == 1 {
        "0xffu"
    } else {
        "0xffffu"
    }
}

/// An `i32` literal with the low 32 bits of `v`.
pub(crate) fn i32_lit(v: i64) -> String {
    match v as i32 {
        i32::MIN => "(-2147483647i - 1i)".to_owned(),
        v if v < 0 => format!("(-{}i)", v.unsigned_abs()),
        v => format!("{v}i"),
    }
}

/// A literal of the compute type of `elem` with value `v` converted as a C cast does.
pub(crate) fn literal(elem: ElemType, v: i64) -> String {
    fn float(f: String, suffix: &str) -> String {
        // Debug formatting always has a '.' or an exponent: "1.0", "1e20".
        match f.strip_prefix('-') {
            Some(abs) => format!("(-{abs}{suffix})"),
            None => format!("{f}{suffix}"),
        }
    }
    match elem {
        ElemType::I32 => i32_lit(v),
        ElemType::F32 => float(format!("{:?}", v as f32), "f"),
        ElemType::I64 => match v {
            i64::MIN => "(-9223372036854775807li - 1li)".to_owned(),
            v if v < 0 => format!("(-{}li)", v.unsigned_abs()),
            v => format!("{v}li"),
        },
        ElemType::U64 => format!("{}lu", v as u64),
        ElemType::F64 => float(format!("{:?}", v as f64), "lf"),
        ElemType::U32 | ElemType::I8 | ElemType::U8 | ElemType::I16 | ElemType::U16 => {
            format!("{}u", v as u32)
        }
    }
}

/// Converts the WGSL `i32` expression `e` to the compute type of `elem`.
fn from_i32(elem: ElemType, e: &str) -> String {
    match elem {
        ElemType::I32 => e.to_owned(),
        ElemType::U32 | ElemType::I8 | ElemType::U8 | ElemType::I16 | ElemType::U16 => {
            format!("u32({e})")
        }
        ElemType::F32 => format!("f32({e})"),
        ElemType::I64 => format!("i64({e})"),
        ElemType::U64 => format!("u64(i64({e}))"),
        ElemType::F64 => format!("f64({e})"),
    }
}

/// A WGSL expression loading element `idx` (a `u32` variable name) of input
/// binding `b`, in the compute type.
fn load(elem: ElemType, b: &str, idx: &str) -> String {
    match elem.bytes() {
        1 => format!("(({b}[{idx} >> 2u] >> (({idx} & 3u) * 8u)) & 0xffu)"),
        2 => format!("(({b}[{idx} >> 1u] >> (({idx} & 1u) * 16u)) & 0xffffu)"),
        _ => format!("{b}[{idx}]"),
    }
}

/// Converts the value `v` of an element of type `elem`, as loaded (in its
/// compute type, 8/16-bit types as their bits in a `u32`), to `i32` as a C cast
/// does: integers keep their low 32 bits, floats are truncated (saturating).
fn to_i32(elem: ElemType, v: &str) -> String {
    match elem {
        ElemType::I32 => v.to_owned(),
        ElemType::I8 => format!("((bitcast<i32>({v}) << 24u) >> 24u)"),
        ElemType::I16 => format!("((bitcast<i32>({v}) << 16u) >> 16u)"),
        ElemType::U32 | ElemType::U8 | ElemType::U16 => format!("bitcast<i32>({v})"),
        ElemType::I64 => format!("i32({v} & 0xffffffffli)"),
        ElemType::U64 => format!("bitcast<i32>(u32({v} & 0xfffffffflu))"),
        ElemType::F32 | ElemType::F64 => format!("i32({v})"),
    }
}

/// Storage declaration of binding `n`.
fn binding(out: &mut String, elem: ElemType, n: usize, output: bool) {
    let ty = match (is_small(elem), output) {
        (true, true) => "atomic<u32>",
        (true, false) => "u32",
        (false, _) => compute_type(elem),
    };
    let access = if output { "read_write" } else { "read" };
    let _ = writeln!(
        out,
        "@group(0) @binding({n}) var<storage, {access}> b{n}: array<{ty}>;"
    );
}

/// Push-constant words a kernel's shape may take; a larger shape is written
/// into the source instead.
const PUSH_WORDS: usize = vkcopy::MAX_PUSH_WORDS;

/// Where each shape parameter of a kernel is among its words; word 0 is the
/// number of elements.
struct Layout {
    /// Extents of dimensions 0 .. n - 1 (the last needs none).
    extents: usize,
    /// Mins of the coordinates the value uses.
    mins: usize,
    /// Per operand (output first): its base, then its strides.
    operands: Vec<usize>,
    /// The reduced dimension of a sum: stride, then extent.
    sum: usize,
}

impl Kernel<'_> {
    /// The number of elements the kernel runs over.
    pub(crate) fn elements(&self) -> u64 {
        self.extents.iter().product()
    }

    /// Why an element index of an operand would not fit the kernel's `u32`
    /// arithmetic, if one would: its last element lies past 2^32 - 1.
    pub(crate) fn index_overflow(&self) -> Option<String> {
        let last = |op: &Operand, extra: Option<(u64, u64)>| {
            let span = op
                .strides
                .iter()
                .zip(&self.extents)
                .chain(extra.as_ref().map(|(s, e)| (s, e)))
                .try_fold(op.base, |acc, (&s, &e)| {
                    acc.checked_add(s.checked_mul(e.saturating_sub(1))?)
                });
            span.filter(|&l| l <= u64::from(u32::MAX)).is_none()
        };
        let mut operands = vec![(&self.out, None)];
        match &self.body {
            Body::Fill { .. } => {}
            Body::Map { inputs, .. } | Body::Add { inputs, .. } => {
                operands.extend(inputs.iter().map(|i| (i, None)))
            }
            Body::Sum {
                input,
                stride,
                extent,
            } => operands.push((input, Some((*stride, *extent)))),
        }
        operands
            .iter()
            .position(|(op, extra)| last(op, *extra))
            .map(|b| {
                format!("binding {b}: an element index past 2^32 - 1; kernels index in 32 bits")
            })
    }

    /// Number of storage-buffer bindings (output first).
    pub(crate) fn bindings(&self) -> usize {
        1 + self.inputs().len()
    }

    fn inputs(&self) -> &[Operand] {
        match &self.body {
            Body::Fill { .. } => &[],
            Body::Map { inputs, .. } | Body::Add { inputs, .. } => inputs,
            Body::Sum { input, .. } => std::slice::from_ref(input),
        }
    }

    /// Element type of binding `b`.
    fn binding_elem(&self, b: usize) -> ElemType {
        match &self.body {
            Body::Map { elems, .. } if b > 0 => elems[b - 1],
            _ => self.elem,
        }
    }

    /// Coordinates the value uses: `0 .. used`.
    fn used_coords(&self) -> usize {
        let n = self.extents.len();
        match &self.body {
            Body::Fill { value, .. } | Body::Map { value, .. } => {
                value.max_dim().map_or(0, |d| d + 1).min(n)
            }
            _ => 0,
        }
    }

    /// The shape as 32-bit words, and where each part is. Strides of
    /// dimensions of extent 1 are 0 (never walked, and perhaps past `u32`);
    /// [`Kernel::index_overflow`] must have passed, so every other fits.
    fn shape(&self) -> (Vec<u32>, Layout) {
        let n = self.extents.len();
        let mut w: Vec<u32> = vec![self.elements() as u32];
        let extents = w.len();
        w.extend(
            self.extents
                .iter()
                .take(n.saturating_sub(1))
                .map(|&e| e as u32),
        );
        let mins = w.len();
        if let Body::Fill { mins: m, .. } | Body::Map { mins: m, .. } = &self.body {
            w.extend(m.iter().take(self.used_coords()).map(|&m| m as i32 as u32));
        }
        let mut operands = Vec::new();
        for op in std::iter::once(&self.out).chain(self.inputs()) {
            operands.push(w.len());
            w.push(op.base as u32);
            w.extend(
                op.strides
                    .iter()
                    .zip(&self.extents)
                    .map(|(&s, &e)| if e <= 1 { 0 } else { s as u32 }),
            );
        }
        let sum = w.len();
        if let Body::Sum { stride, extent, .. } = &self.body {
            w.push(if *extent <= 1 { 0 } else { *stride as u32 });
            w.push(*extent as u32);
        }
        (
            w,
            Layout {
                extents,
                mins,
                operands,
                sum,
            },
        )
    }

    /// The push-constant words of the kernel's shape: empty when the shape is
    /// too large for them and [`Kernel::source`] holds it.
    pub(crate) fn push_constants(&self) -> Vec<u32> {
        let (w, _) = self.shape();
        if w.len() <= PUSH_WORDS {
            w
        } else {
            Vec::new()
        }
    }

    /// The WGSL source: a pure function of the kernel's form (element types,
    /// body, number of dimensions) when its shape fits the push constants, so
    /// kernels of one form over any crops share a cached pipeline; with the
    /// shape written in otherwise.
    pub(crate) fn source(&self) -> String {
        let elem = self.elem;
        let t = compute_type(elem);
        let n = self.extents.len();
        let (words, at) = self.shape();
        let pushed = words.len() <= PUSH_WORDS;
        // Shape word `i` as a WGSL `u32`.
        let p = |i: usize| {
            if pushed {
                format!("sh.p{i}")
            } else {
                format!("{}u", words[i])
            }
        };
        let mut s = String::new();
        let what = match &self.body {
            Body::Fill { .. } => "fill",
            Body::Map { .. } => "map",
            Body::Add { .. } => "add",
            Body::Sum { .. } => "sum",
        };
        let _ = writeln!(s, "// vkcopy {what} kernel ({elem})");
        if let Body::Fill { .. } | Body::Map { .. } = self.body {
            s.push_str(Expr::wgsl_prelude());
            s.push('\n');
        }
        if pushed {
            s.push_str("struct Shape {\n");
            for i in 0..words.len() {
                let _ = writeln!(s, "    p{i}: u32,");
            }
            s.push_str("}\nvar<immediate> sh: Shape;\n");
        }
        binding(&mut s, elem, 0, true);
        for b in 1..self.bindings() {
            binding(&mut s, self.binding_elem(b), b, false);
        }
        // Word 0 is the number of elements.
        let total = p(0);
        let _ = write!(
            s,
            "\n@compute @workgroup_size({WORKGROUP_SIZE})\n\
             fn main(@builtin(global_invocation_id) gid: vec3<u32>, \
             @builtin(num_workgroups) nwg: vec3<u32>) {{\n\
             \x20   let step = nwg.x * {WORKGROUP_SIZE}u;\n\
             \x20   let total = {total};\n\
             \x20   var i = gid.x;\n\
             \x20   loop {{\n\
             \x20       if i >= total {{ break; }}\n"
        );
        // Split the linear index into counters, first dimension fastest.
        if n > 0 {
            s.push_str("        var r = i;\n");
        }
        for d in 0..n {
            if d + 1 < n {
                let e = p(at.extents + d);
                let _ = writeln!(s, "        let k{d} = r % {e};");
                let _ = writeln!(s, "        r = r / {e};");
            } else {
                let _ = writeln!(s, "        let k{d} = r;");
            }
        }
        // Element index of operand `o` (0 the output).
        let index = |o: usize| {
            let base = at.operands[o];
            let mut e = p(base);
            for d in 0..n {
                let _ = write!(e, " + k{d} * {}", p(base + 1 + d));
            }
            e
        };
        let _ = writeln!(s, "        let o = {};", index(0));
        // The value, as `v`, given the current output value `cur` where needed.
        let mut reads_out = false;
        let value = match &self.body {
            Body::Fill { value: expr, .. } | Body::Map { value: expr, .. } => {
                for d in 0..self.used_coords() {
                    let _ = writeln!(
                        s,
                        "        let c{d} = i32(k{d}) + bitcast<i32>({});",
                        p(at.mins + d)
                    );
                }
                let mut inputs = 0;
                if let Body::Map {
                    inputs: ins, elems, ..
                } = &self.body
                {
                    inputs = ins.len();
                    for (j, &e) in elems.iter().enumerate() {
                        let b = j + 1;
                        if !expr.uses_input(j) {
                            continue;
                        }
                        let _ = writeln!(s, "        let o{b} = {};", index(b));
                        let v = load(e, &format!("b{b}"), &format!("o{b}"));
                        let _ = writeln!(s, "        let a{j} = {};", to_i32(e, &v));
                    }
                    reads_out = expr.uses_input(inputs);
                }
                let e = expr.to_wgsl_with(
                    &|d| {
                        if d < n {
                            format!("c{d}")
                        } else {
                            "0i".to_owned()
                        }
                    },
                    // The output's own value is `cur`, read where it is written.
                    &|j| {
                        if j < inputs {
                            format!("a{j}")
                        } else {
                            to_i32(elem, "cur")
                        }
                    },
                );
                from_i32(elem, &e)
            }
            Body::Add {
                inputs,
                read_out,
                constant,
            } => {
                let mut terms = Vec::new();
                for j in 0..inputs.len() {
                    let b = j + 1;
                    let _ = writeln!(s, "        let o{b} = {};", index(b));
                    terms.push(load(elem, &format!("b{b}"), &format!("o{b}")));
                }
                if *read_out {
                    reads_out = true;
                    terms.insert(0, "cur".to_owned());
                }
                if *constant != 0 || terms.is_empty() {
                    terms.push(literal(elem, *constant));
                }
                terms.join(" + ")
            }
            Body::Sum { .. } => {
                let _ = writeln!(s, "        let o1 = {};", index(1));
                let _ = writeln!(s, "        var acc: {t} = {};", literal(elem, 0));
                let _ = writeln!(
                    s,
                    "        for (var j = 0u; j < {}; j = j + 1u) {{\n\
                     \x20           let oj = o1 + j * {};\n\
                     \x20           acc = acc + {};\n\
                     \x20       }}",
                    p(at.sum + 1),
                    p(at.sum),
                    load(elem, "b1", "oj")
                );
                "acc".to_owned()
            }
        };
        if is_small(elem) {
            let m = mask(elem);
            let (word, shift) = if elem.bytes() == 1 {
                ("o >> 2u", "(o & 3u) * 8u")
            } else {
                ("o >> 1u", "(o & 1u) * 16u")
            };
            let _ = writeln!(s, "        let w = {word};");
            let _ = writeln!(s, "        let sh_ = {shift};");
            if !reads_out {
                let _ = writeln!(s, "        let v: u32 = ({value}) & {m};");
            }
            let _ = writeln!(s, "        var old = atomicLoad(&b0[w]);");
            s.push_str("        loop {\n");
            if reads_out {
                let _ = writeln!(s, "            let cur = (old >> sh_) & {m};");
                let _ = writeln!(s, "            let v: u32 = ({value}) & {m};");
            }
            let _ = writeln!(
                s,
                "            let nw = (old & ~({m} << sh_)) | (v << sh_);\n\
                 \x20           let res = atomicCompareExchangeWeak(&b0[w], old, nw);\n\
                 \x20           if res.exchanged {{ break; }}\n\
                 \x20           old = res.old_value;\n\
                 \x20       }}"
            );
        } else {
            if reads_out {
                s.push_str("        let cur = b0[o];\n");
            }
            let _ = writeln!(s, "        b0[o] = {value};");
        }
        s.push_str("        if total - i <= step { break; }\n        i = i + step;\n    }\n}\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(i32_lit(5), "5i");
        assert_eq!(i32_lit(-5), "(-5i)");
        assert_eq!(i32_lit(i32::MIN as i64), "(-2147483647i - 1i)");
        assert_eq!(i32_lit(1 << 32), "0i");
        assert_eq!(literal(ElemType::F32, 3), "3.0f");
        assert_eq!(literal(ElemType::F32, -3), "(-3.0f)");
        assert_eq!(literal(ElemType::F64, -3), "(-3.0lf)");
        assert_eq!(
            literal(ElemType::I64, i64::MIN),
            "(-9223372036854775807li - 1li)"
        );
        assert_eq!(literal(ElemType::U64, -1), "18446744073709551615lu");
        assert_eq!(literal(ElemType::U8, -1), "4294967295u");
        assert!(literal(ElemType::F32, 1 << 62).ends_with('f'));
    }
}

#[cfg(test)]
mod compile_tests {
    use super::*;
    use crate::compile::compile;

    fn all_caps() -> naga::valid::Capabilities {
        use naga::valid::Capabilities as C;
        C::SHADER_INT64 | C::FLOAT64 | C::IMMEDIATES
    }

    fn op(base: u64, strides: &[u64]) -> Operand {
        Operand {
            base,
            strides: strides.to_vec(),
        }
    }

    /// Every kernel shape compiles for every element type.
    #[test]
    fn every_kernel_compiles() {
        let value = Expr::parse("x + 256*y - (7 if 40 <= x < 56 else 0) + z / 3 + d5").unwrap();
        for elem in ElemType::ALL {
            let kernels = [
                Kernel {
                    elem,
                    extents: vec![4, 5, 6],
                    out: op(33, &[1, 4, 20]),
                    body: Body::Fill {
                        value: &value,
                        mins: vec![-3, 0, i32::MIN as i64],
                    },
                },
                Kernel {
                    elem,
                    extents: vec![],
                    out: op(0, &[]),
                    body: Body::Fill {
                        value: &value,
                        mins: vec![],
                    },
                },
                Kernel {
                    elem,
                    extents: vec![16],
                    out: op(1, &[2]),
                    body: Body::Add {
                        inputs: vec![],
                        read_out: true,
                        constant: -7,
                    },
                },
                Kernel {
                    elem,
                    extents: vec![8, 8],
                    out: op(0, &[1, 8]),
                    body: Body::Add {
                        inputs: vec![op(3, &[1, 9]), op(5, &[0, 1])],
                        read_out: false,
                        constant: i64::MIN,
                    },
                },
                Kernel {
                    elem,
                    extents: vec![3, 4],
                    out: op(0, &[1, 3]),
                    body: Body::Sum {
                        input: op(2, &[1, 15]),
                        stride: 3,
                        extent: 5,
                    },
                },
            ];
            // A map reading an input of every type, and the output in place.
            let names: Vec<String> = (0..ElemType::ALL.len()).map(|j| format!("i{j}")).collect();
            let mut refs: Vec<&str> = names.iter().map(String::as_str).collect();
            refs.push("out");
            let sum = refs.join(" + ");
            let map = Expr::parse_with(&format!("max({sum}, x) - y"), &refs).unwrap();
            let map_kernel = Kernel {
                elem,
                extents: vec![3, 4],
                out: op(0, &[1, 3]),
                body: Body::Map {
                    value: &map,
                    inputs: (0..ElemType::ALL.len())
                        .map(|j| op(j as u64, &[1, 5]))
                        .collect(),
                    elems: ElemType::ALL.to_vec(),
                    mins: vec![-2, 7],
                },
            };
            for k in kernels.iter().chain([&map_kernel]) {
                let src = k.source();
                if let Err(e) = compile(&src, all_caps()) {
                    panic!("{elem}: {e}\n{src}");
                }
            }
        }
    }

    /// Without the capability, a 64-bit kernel fails to validate rather than panicking.
    #[test]
    fn missing_capability_is_an_error() {
        let k = Kernel {
            elem: ElemType::F64,
            extents: vec![4],
            out: op(0, &[1]),
            body: Body::Add {
                inputs: vec![],
                read_out: true,
                constant: 1,
            },
        };
        let e = compile(&k.source(), naga::valid::Capabilities::IMMEDIATES).unwrap_err();
        assert_eq!(e.name(), "kernel_compile_failed");
    }

    /// A dimension of extent 1 may have a stride past `u32` (a view that steps
    /// nowhere in it): it is not written into the shader.
    #[test]
    fn strides_past_u32_of_single_elements_compile() {
        let huge = 1u64 << 33;
        for elem in [ElemType::I32, ElemType::U8] {
            let k = Kernel {
                elem,
                extents: vec![4, 1],
                out: op(7, &[1, huge]),
                body: Body::Sum {
                    input: op(0, &[2, huge + 1]),
                    stride: huge,
                    extent: 1,
                },
            };
            assert_eq!(k.index_overflow(), None);
            let src = k.source();
            assert!(!src.contains(&huge.to_string()), "{src}");
            compile(&src, all_caps()).unwrap();
        }
        // Past 2^32 - 1 in a dimension that is walked: refused, not compiled.
        let k = Kernel {
            elem: ElemType::I32,
            extents: vec![2],
            out: op(0, &[huge]),
            body: Body::Add {
                inputs: vec![],
                read_out: true,
                constant: 1,
            },
        };
        assert_eq!(
            k.index_overflow().as_deref(),
            Some("binding 0: an element index past 2^32 - 1; kernels index in 32 bits")
        );
    }

    /// The deepest and largest expressions that `check_wgsl` lets through
    /// compile in the kernel that nests them deepest (an 8-bit output).
    #[test]
    fn expressions_at_the_limits_compile() {
        let depth = crate::expr::MAX_WGSL_DEPTH;
        let chain = vec!["x"; depth].join(" + ");
        let calls = format!(
            "{}x{}",
            "clamp(".repeat(depth / 2 - 1),
            ", 0, 9)".repeat(depth / 2 - 1)
        );
        let logic = format!(
            "{}x{}",
            "(1 if ".repeat(depth / 2 - 1),
            " else 2)".repeat(depth / 2 - 1)
        );
        // A balanced sum of 2^11 terms: shallow, but large.
        fn wide(level: u32, i: &mut i32) -> String {
            if level == 0 {
                *i += 1;
                return format!("min(x, {i})");
            }
            format!("({} + {})", wide(level - 1, i), wide(level - 1, i))
        }
        let wide = wide(11, &mut 0);
        let mut compiled = 0;
        for src in [chain, calls, logic, wide] {
            let value = Expr::parse(&src).unwrap();
            if let Err(e) = value.check_wgsl() {
                // Only the parenthesis bound may refuse an expression within the depth.
                assert!(e.contains("parentheses"), "{}: {e}", &src[..80]);
                continue;
            }
            for elem in [ElemType::U8, ElemType::F64] {
                let k = Kernel {
                    elem,
                    extents: vec![4, 4],
                    out: op(0, &[1, 4]),
                    body: Body::Fill {
                        value: &value,
                        mins: vec![0, 0],
                    },
                };
                if let Err(e) = compile(&k.source(), all_caps()) {
                    panic!("{elem} {}: {e}", &src[..80]);
                }
            }
            compiled += 1;
        }
        assert_eq!(compiled, 4);
        // One more level is refused with a reason, never handed to naga.
        let chain = Expr::parse(&vec!["x"; 197].join("+")).unwrap();
        assert_eq!(
            chain.check_wgsl().unwrap_err(),
            "nests 197 operations deep (each link of a chain such as x + x + x counts one); \
             a device kernel takes at most 64"
        );
    }

    /// A naga error is one line without the shader's text.
    #[test]
    fn compile_errors_do_not_quote_the_shader() {
        let src = format!(
            "fn main() {{ let a = {}; }}\n// {}",
            "(".repeat(300),
            "z".repeat(5000)
        );
        let e = compile(&src, all_caps()).unwrap_err().to_string();
        assert!(e.len() < 500, "{e}");
        assert!(!e.contains('\n') && !e.contains("zzz"), "{e}");
    }

    /// Fuzzing of expressions, bounded: random expressions from the grammar's
    /// pieces either fail to parse with an offset inside the text, or evaluate
    /// on the host without a panic and, when `check_wgsl` passes, compile with
    /// naga in a fill kernel. Fixed seed; `FUZZ_CASES` inputs (default 20 000).
    #[test]
    fn fuzz_expressions_compile_when_checked() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
        let cases = std::env::var("FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000);
        let config = Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        };
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
        let leaf = prop_oneof![
            prop::sample::select(&["x", "y", "z", "d5", "0", "1", "-7", "0xff", "2147483648"][..])
                .prop_map(str::to_owned),
            any::<i32>().prop_map(|v| v.to_string()),
        ];
        let expr = leaf.prop_recursive(8, 64, 3, |inner| {
            let bin = prop::sample::select(
                &["+", "-", "*", "/", "%", "<", "<=", "==", "!=", "and", "or"][..],
            );
            prop_oneof![
                (inner.clone(), bin, inner.clone()).prop_map(|(a, o, b)| format!("{a} {o} {b}")),
                inner.clone().prop_map(|a| format!("({a})")),
                inner.clone().prop_map(|a| format!("-{a}")),
                inner.clone().prop_map(|a| format!("not {a}")),
                inner.clone().prop_map(|a| format!("abs({a})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("min({a}, {b})")),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(a, b, c)| format!("clamp({a}, {b}, {c})")),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(a, b, c)| format!("{a} if {b} else {c}")),
                (inner.clone(), inner.clone(), inner)
                    .prop_map(|(a, b, c)| format!("{a} < {b} < {c}")),
                Just("x +".to_owned()),
                Just("(x".to_owned()),
            ]
        });
        let compiled = std::cell::Cell::new(0);
        runner
            .run(&expr, |src| {
                let value = match Expr::parse(&src) {
                    Ok(v) => v,
                    Err(e) => {
                        prop_assert!(e.offset <= src.len(), "{src}: {e}");
                        return Ok(());
                    }
                };
                let _ = value.eval(&[3, -5, 7]);
                if value.check_wgsl().is_ok() {
                    let k = Kernel {
                        elem: ElemType::I16,
                        extents: vec![3, 2],
                        out: op(0, &[1, 3]),
                        body: Body::Fill {
                            value: &value,
                            mins: vec![-1, 4],
                        },
                    };
                    let r = compile(&k.source(), all_caps());
                    prop_assert!(r.is_ok(), "{src}: {:?}", r.err());
                    compiled.set(compiled.get() + 1);
                }
                Ok(())
            })
            .unwrap();
        assert!(compiled.get() > 0);
    }
}
