//! From case file to plan: parses the YAML, checks every name, shape and
//! expression, and reports the first problem as `path:line:column: message`.

use std::path::{Path, PathBuf};

use serde_saphyr::{Location, Spanned};
use vkcopy::memory::policy::MemoryRequest;
use vkcopy::memory::table::{parse_property_flag, DeviceType};
use vkcopy::types::{dense_dims, Dim, MAX_DIMS};
use vkcopy::COUNTER_NAMES;
use vkcopy::{ElemType, MemoryTable, Policy, Role};

use crate::case::{CaseFile, Selection, Step};
use crate::expr::Expr;

/// A problem in a case file, located.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {message}", path.display())]
pub struct CaseError {
    pub path: PathBuf,
    /// 1-based; 0 when the problem has no place in the file (it cannot be read).
    pub line: u64,
    pub column: u64,
    pub message: String,
}

/// Errors `expect_error` may name: the runtime's error names that a case can provoke.
pub const EXPECTABLE_ERRORS: &[&str] = &[
    "host_is_null",
    "both_dirty",
    "no_device_allocation",
    "device_malloc_failed",
    "incompatible_buffers",
    "bad_dimensions",
    "device_crop_failed",
    "unsupported_type",
];

/// Most bytes a case's buffer may span: a guard against typos that would ask the
/// host for terabytes (the runtime itself has no such limit).
pub const MAX_BUFFER_BYTES: u64 = 4 << 30;
/// Most elements of a buffer or view a case may walk: expect and fill visit each.
pub const MAX_ELEMENTS: u64 = 1 << 31;
/// Longest expression a case may write: kernels compile it to WGSL, whose parser
/// has a recursion limit.
pub const MAX_EXPR_LEN: usize = 4096;
/// Most repeats of a `measure` step.
pub const MAX_REPEAT: u32 = 100_000;

/// Checks a buffer's or view's shape against the case limits.
fn check_size(elem: ElemType, dims: &[Dim], what: &str) -> Result<(), String> {
    let elements = dims
        .iter()
        .try_fold(1u64, |n, d| n.checked_mul(d.extent.max(0) as u64))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| format!("{what}: more than {MAX_ELEMENTS} elements"))?;
    let _ = elements;
    let bytes = vkcopy::types::span_bytes(elem, dims)
        .filter(|&b| b <= MAX_BUFFER_BYTES)
        .ok_or_else(|| {
            format!("{what}: spans more than {MAX_BUFFER_BYTES} bytes (the case limit)")
        })?;
    let _ = bytes;
    Ok(())
}

/// A device type a case may require.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceReq {
    Any,
    Gpu,
    Type(DeviceType),
}

impl DeviceReq {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "any" => DeviceReq::Any,
            "gpu" => DeviceReq::Gpu,
            "cpu" => DeviceReq::Type(DeviceType::Cpu),
            "integrated_gpu" => DeviceReq::Type(DeviceType::IntegratedGpu),
            "discrete_gpu" => DeviceReq::Type(DeviceType::DiscreteGpu),
            "virtual_gpu" => DeviceReq::Type(DeviceType::VirtualGpu),
            "other" => DeviceReq::Type(DeviceType::Other),
            _ => return None,
        })
    }

    /// The name as cases write it.
    pub fn name(self) -> &'static str {
        match self {
            DeviceReq::Any => "any",
            DeviceReq::Gpu => "gpu",
            DeviceReq::Type(DeviceType::Cpu) => "cpu",
            DeviceReq::Type(DeviceType::IntegratedGpu) => "integrated_gpu",
            DeviceReq::Type(DeviceType::DiscreteGpu) => "discrete_gpu",
            DeviceReq::Type(DeviceType::VirtualGpu) => "virtual_gpu",
            DeviceReq::Type(DeviceType::Other) => "other",
        }
    }

    /// Whether a device of type `t` meets this requirement.
    pub fn accepts(self, t: DeviceType) -> bool {
        match self {
            DeviceReq::Any => true,
            DeviceReq::Gpu => matches!(t, DeviceType::IntegratedGpu | DeviceType::DiscreteGpu),
            DeviceReq::Type(want) => want == t,
        }
    }
}

/// A buffer of a plan.
#[derive(Clone, Debug)]
pub struct BufferDecl {
    pub name: String,
    pub elem: ElemType,
    pub dims: Vec<Dim>,
    pub host: bool,
}

/// One step of a plan, with where it was written.
#[derive(Clone, Debug)]
pub struct Op {
    pub line: u64,
    pub column: u64,
    pub kind: OpKind,
}

/// What a step does; buffers are slot indices (see [`RuntimePlan::slots`]).
#[derive(Clone, Debug)]
pub enum OpKind {
    FillHost {
        buffer: usize,
        value: Expr,
    },
    DeviceMalloc(usize),
    DeviceFree(usize),
    CopyToDevice(usize),
    CopyToHost(usize),
    SetDirty {
        buffer: usize,
        host: Option<bool>,
        device: Option<bool>,
    },
    Expect {
        buffer: usize,
        value: Expr,
        /// (min, extent) of the box to check; None checks every element.
        region: Option<(Vec<i64>, Vec<i64>)>,
    },
    Crop {
        from: usize,
        to: usize,
        min: Vec<i64>,
        extent: Vec<i64>,
    },
    Slice {
        from: usize,
        to: usize,
        dim: usize,
        pos: i64,
    },
    ViewNoHost {
        from: usize,
        to: usize,
    },
    View {
        from: usize,
        to: usize,
        at: Vec<i64>,
        dims: Vec<Dim>,
    },
    /// Drops a buffer or view.
    Release(usize),
    BufferCopy {
        from: usize,
        to: usize,
        to_device: bool,
    },
    ExpectFlags {
        buffer: usize,
        host_dirty: Option<bool>,
        device_dirty: Option<bool>,
        has_device: Option<bool>,
    },
    ExpectError {
        error: String,
        op: Box<Op>,
    },
    ExpectCounters(Vec<(String, u64)>),
    Profiling(bool),
    KernelFill {
        out: usize,
        value: Expr,
    },
    KernelAdd {
        out: usize,
        inputs: Vec<usize>,
        constant: i64,
    },
    KernelSum {
        out: usize,
        input: usize,
        dim: usize,
    },
    FillHeap {
        heap: u32,
        leave: u64,
    },
    Measure(Measure),
    HostAdd {
        out: usize,
        inputs: Vec<usize>,
        value: Option<Expr>,
    },
    ReleaseUnused,
    DeviceRelease,
    ExpectMemory {
        role: Role,
        memory_type: Option<u32>,
        flags: Option<Vec<String>>,
        fallbacks: Option<u32>,
    },
}

/// What a `measure` step times.
#[derive(Clone, Debug)]
pub enum MeasureOp {
    CopyToHost(usize),
    CopyToDevice(usize),
    DeviceToDevice { from: usize, to: usize },
}

/// A checked `measure` step.
#[derive(Clone, Debug)]
pub struct Measure {
    pub op: MeasureOp,
    pub repeat: u32,
    pub min_gbps: Vec<(DeviceReq, f64)>,
    pub max_us: Vec<(DeviceReq, f64)>,
}

/// A case that runs on a device.
#[derive(Clone, Debug)]
pub struct RuntimePlan {
    /// The policy the case pins, if any.
    pub policy: Option<Policy>,
    pub simulate_memory: Option<MemoryTable>,
    /// Declared buffers: slots `0..buffers.len()`.
    pub buffers: Vec<BufferDecl>,
    /// The name of every slot: the declared buffers, then the views steps create.
    pub slots: Vec<String>,
    /// The element type of every slot.
    pub slot_elems: Vec<ElemType>,
    pub ops: Vec<Op>,
}

/// One selection check.
#[derive(Clone, Debug)]
pub struct SelectionCheck {
    pub line: u64,
    /// As written: `readback` or `device_to_host/cached_coherent`.
    pub request: String,
    pub role: Option<Role>,
    pub raw: Option<MemoryRequest>,
    pub expect: Vec<(Policy, u32)>,
}

/// A selection case: pure logic over a recorded table.
#[derive(Clone, Debug)]
pub struct SelectionPlan {
    pub table_name: String,
    pub table: MemoryTable,
    pub checks: Vec<SelectionCheck>,
}

/// What a case does.
#[derive(Clone, Debug)]
pub enum PlanKind {
    Runtime(RuntimePlan),
    Selection(SelectionPlan),
}

/// A checked case, ready to run.
#[derive(Clone, Debug)]
pub struct CasePlan {
    /// Test name: the path below `cases/` without `.yaml`, `/` written `::`.
    pub name: String,
    pub path: PathBuf,
    pub about: String,
    pub mirrors: Option<String>,
    pub requires: Vec<DeviceReq>,
    pub kind: PlanKind,
}

impl CasePlan {
    /// Element types that the case's kernels write or read, to check support early.
    pub fn kernel_elem_types(&self) -> Vec<ElemType> {
        let PlanKind::Runtime(r) = &self.kind else {
            return Vec::new();
        };
        let mut slots: Vec<usize> = Vec::new();
        for op in &r.ops {
            let mut k = &op.kind;
            while let OpKind::ExpectError { op, .. } = k {
                k = &op.kind;
            }
            match k {
                OpKind::KernelFill { out, .. } => slots.push(*out),
                OpKind::KernelAdd { out, inputs, .. } => {
                    slots.push(*out);
                    slots.extend(inputs);
                }
                OpKind::KernelSum { out, input, .. } => slots.extend([*out, *input]),
                _ => {}
            }
        }
        let mut types: Vec<ElemType> = slots.iter().map(|&s| r.slot_elems[s]).collect();
        types.sort_by_key(|t| t.name());
        types.dedup();
        types
    }

    /// Whether the case needs a Vulkan device.
    pub fn needs_device(&self) -> bool {
        matches!(self.kind, PlanKind::Runtime(_))
    }

    /// Why a device of type `t` cannot run this case, if it cannot.
    pub fn unmet(&self, t: DeviceType) -> Option<String> {
        if self.requires.is_empty() || self.requires.iter().any(|r| r.accepts(t)) {
            return None;
        }
        let wanted: Vec<&str> = self.requires.iter().map(|r| r.name()).collect();
        Some(format!(
            "needs a {} device; this one is {}",
            wanted.join(" or "),
            DeviceReq::Type(t).name()
        ))
    }
}

/// The test name of a case file below `root`.
pub fn case_name(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path).with_extension("");
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("::")
}

struct Ctx<'a> {
    path: &'a Path,
    root: &'a Path,
}

impl Ctx<'_> {
    fn err(&self, at: &Location, message: impl Into<String>) -> CaseError {
        CaseError {
            path: self.path.to_owned(),
            line: at.line(),
            column: at.column(),
            message: message.into(),
        }
    }

    fn err_at(&self, line: u64, column: u64, message: impl Into<String>) -> CaseError {
        CaseError {
            path: self.path.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }

    fn table(&self, name: &str, at: &Location, field: &str) -> Result<MemoryTable, CaseError> {
        let file = self.root.join("devices").join(format!("{name}.yaml"));
        if !file.is_file() {
            return Err(self.err(
                at,
                format!(
                    "{field}: no recorded table '{name}' ({} does not exist)",
                    file.display()
                ),
            ));
        }
        MemoryTable::from_yaml_file(&file).map_err(|e| self.err(at, format!("{field}: {e}")))
    }
}

/// The name of the field of `line` that starts before `column`: the last
/// `name:` before it. Gives serde's "invalid value" errors a field name.
fn field_at(src: &str, line: u64, column: u64) -> Option<String> {
    let text = src.lines().nth(line.checked_sub(1)? as usize)?;
    let before: String = text
        .chars()
        .take(column.saturating_sub(1) as usize)
        .collect();
    let key_end = before.rfind(':')?;
    let key: String = before[..key_end]
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    (!key.is_empty()).then_some(key)
}

/// Reads and checks the case at `path`; `root` is the `cases/` folder.
pub fn load(root: &Path, path: &Path) -> Result<CasePlan, CaseError> {
    let src = std::fs::read_to_string(path).map_err(|e| CaseError {
        path: path.to_owned(),
        line: 0,
        column: 0,
        message: format!("cannot read: {e}"),
    })?;
    parse(root, path, &src)
}

/// Checks the case text `src` as if read from `path`.
pub fn parse(root: &Path, path: &Path, src: &str) -> Result<CasePlan, CaseError> {
    let file: CaseFile = serde_saphyr::from_str(src).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        // The first line of serde-saphyr's message, without its own location prefix.
        let text = e.to_string();
        let first = text.lines().next().unwrap_or("").to_owned();
        let message = first
            .split_once(": ")
            .filter(|(pre, _)| pre.starts_with("error"))
            .map_or(first.clone(), |(_, rest)| rest.to_owned());
        let message = message
            .strip_prefix(&format!("line {line} column {column}: "))
            .map(str::to_owned)
            .unwrap_or(message);
        // serde names unknown fields and variants itself; for a bad value, name the
        // key written before it on that line.
        let names_itself = message.contains("unknown field") || message.contains("unknown variant");
        let message = match field_at(src, line, column) {
            Some(f) if !names_itself && !message.contains(&format!("`{f}`")) => {
                format!("field `{f}`: {message}")
            }
            _ => message,
        };
        CaseError {
            path: path.to_owned(),
            line,
            column,
            message,
        }
    })?;
    let cx = Ctx { path, root };
    let top = Location::UNKNOWN;

    let mut requires = Vec::new();
    for t in &file.requires.device_types {
        requires.push(DeviceReq::parse(t).ok_or_else(|| {
            cx.err_at(
                1,
                1,
                format!("requires.device_types: unknown device type '{t}'; expected any, gpu, cpu, integrated_gpu, discrete_gpu, virtual_gpu or other"),
            )
        })?);
    }

    let kind = match (&file.selection, file.steps.is_empty()) {
        (Some(sel), true) => {
            if !file.buffers.is_empty() || file.simulate_memory.is_some() || file.policy.is_some() {
                return Err(cx.err(
                    &sel.referenced,
                    "a selection case has no buffers, simulate_memory or policy",
                ));
            }
            PlanKind::Selection(selection(&cx, &sel.value, &sel.referenced)?)
        }
        (Some(sel), false) => {
            return Err(cx.err(
                &sel.referenced,
                "a case has either `steps` or `selection`, not both",
            ))
        }
        (None, true) => {
            return Err(cx.err_at(1, 1, "the case has no `steps` (or `selection`)"));
        }
        (None, false) => PlanKind::Runtime(runtime(&cx, &file)?),
    };
    let _ = top;
    Ok(CasePlan {
        name: case_name(root, path),
        path: path.to_owned(),
        about: file.about,
        mirrors: file.mirrors,
        requires,
        kind,
    })
}

fn selection(cx: &Ctx, sel: &Selection, at: &Location) -> Result<SelectionPlan, CaseError> {
    let table = cx.table(&sel.table, at, "selection.table")?;
    let mut checks = Vec::new();
    for e in &sel.expect {
        let (role, raw) = match e.value.request.parse::<Role>() {
            Ok(r) => (Some(r), None),
            Err(_) => match e.value.request.parse::<MemoryRequest>() {
                Ok(r) => (None, Some(r)),
                Err(err) => {
                    return Err(cx.err(
                        &e.referenced,
                        format!(
                            "request '{}': not readback, upload, device or a visibility/caching pair: {err}",
                            e.value.request
                        ),
                    ))
                }
            },
        };
        let mut expect = Vec::new();
        for (p, v) in [
            (Policy::HalideLegacy, e.value.halide_legacy),
            (Policy::Halide, e.value.halide),
            (Policy::Vkcopy, e.value.vkcopy),
        ] {
            if let Some(t) = v {
                if t as usize >= table.types.len() {
                    return Err(cx.err(
                        &e.referenced,
                        format!(
                            "{p}: type {t} does not exist; {} has {} types",
                            sel.table,
                            table.types.len()
                        ),
                    ));
                }
                expect.push((p, t));
            }
        }
        if expect.is_empty() {
            return Err(cx.err(
                &e.referenced,
                "names no policy (halide-legacy, halide, vkcopy)",
            ));
        }
        checks.push(SelectionCheck {
            line: e.referenced.line(),
            request: e.value.request.clone(),
            role,
            raw,
            expect,
        });
    }
    if checks.is_empty() {
        return Err(cx.err(at, "selection.expect is empty"));
    }
    Ok(SelectionPlan {
        table_name: sel.table.clone(),
        table,
        checks,
    })
}

fn runtime(cx: &Ctx, file: &CaseFile) -> Result<RuntimePlan, CaseError> {
    let simulate_memory = match &file.simulate_memory {
        Some(s) => Some(cx.table(&s.value, &s.referenced, "simulate_memory")?),
        None => None,
    };
    let mut buffers = Vec::new();
    for (name, spec) in &file.buffers {
        let at = &spec.referenced;
        let s = &spec.value;
        let elem: ElemType = s
            .elem
            .parse()
            .map_err(|e| cx.err(at, format!("buffer {name}: field type: {e}")))?;
        let n = s.extent.len();
        if n == 0 || n > MAX_DIMS {
            return Err(cx.err(
                at,
                format!("buffer {name}: field extent: {n} dimensions; 1 to {MAX_DIMS} allowed"),
            ));
        }
        if let Some(e) = s.extent.iter().find(|&&e| e < 0) {
            return Err(cx.err(at, format!("buffer {name}: field extent: {e} is negative")));
        }
        let mut dims = dense_dims(&s.extent);
        for (field, v) in [("min", &s.min), ("stride", &s.stride)] {
            if let Some(v) = v {
                if v.len() != n {
                    return Err(cx.err(
                        at,
                        format!(
                            "buffer {name}: field {field}: {} values for {n} dimensions",
                            v.len()
                        ),
                    ));
                }
            }
        }
        if let Some(m) = &s.min {
            for (d, &m) in dims.iter_mut().zip(m) {
                d.min = m;
            }
        }
        if let Some(st) = &s.stride {
            for (d, &st) in dims.iter_mut().zip(st) {
                if st < 0 {
                    return Err(cx.err(at, format!("buffer {name}: field stride: {st} is negative; negative strides are not supported")));
                }
                d.stride = st;
            }
        }
        check_size(elem, &dims, &format!("buffer {name}")).map_err(|m| cx.err(at, m))?;
        buffers.push(BufferDecl {
            name: name.clone(),
            elem,
            dims,
            host: s.host,
        });
    }
    let mut syms = Symbols {
        slots: buffers
            .iter()
            .map(|b| Slot {
                name: b.name.clone(),
                elem: b.elem,
                dims: b.dims.clone(),
                host: b.host,
                view: false,
            })
            .collect(),
    };
    let mut ops = Vec::new();
    for step in &file.steps {
        ops.push(op(cx, &mut syms, step)?);
    }
    let policy = match &file.policy {
        None => None,
        Some(p) => Some(
            p.value
                .parse::<Policy>()
                .map_err(|e| cx.err(&p.referenced, format!("policy: {e}")))?,
        ),
    };
    Ok(RuntimePlan {
        policy,
        simulate_memory,
        buffers,
        slots: syms.slots.iter().map(|s| s.name.clone()).collect(),
        slot_elems: syms.slots.iter().map(|s| s.elem).collect(),
        ops,
    })
}

/// A buffer or view as the planner knows it: what later steps may do with it.
struct Slot {
    name: String,
    elem: ElemType,
    dims: Vec<Dim>,
    host: bool,
    view: bool,
}

/// Buffers and the views steps create; a name refers to its latest slot.
struct Symbols {
    slots: Vec<Slot>,
}

impl Symbols {
    fn find(&self, name: &str) -> Option<usize> {
        self.slots.iter().rposition(|s| s.name == name)
    }

    /// Adds `name`, a view of slot `parent` with `dims`; returns its slot. A view
    /// has host memory when its parent has (`view_no_host` clears that after).
    fn push_view(&mut self, name: &str, parent: usize, dims: Vec<Dim>) -> usize {
        let p = &self.slots[parent];
        let slot = Slot {
            name: name.to_owned(),
            elem: p.elem,
            dims,
            host: p.host,
            view: true,
        };
        self.slots.push(slot);
        self.slots.len() - 1
    }
}

fn op(cx: &Ctx, syms: &mut Symbols, step: &Spanned<Step>) -> Result<Op, CaseError> {
    let at = &step.referenced;
    let name = step.value.name();
    let buf = |syms: &Symbols, b: &str| -> Result<usize, CaseError> {
        syms.find(b).ok_or_else(|| {
            let known: Vec<&str> = syms.slots.iter().map(|d| d.name.as_str()).collect();
            cx.err(
                at,
                format!("{name}: unknown buffer '{b}'; buffers are {known:?}"),
            )
        })
    };
    let new_slot = |syms: &Symbols, to: &str| -> Result<(), CaseError> {
        if syms.find(to).is_some() {
            return Err(cx.err(
                at,
                format!("{name}: field to: '{to}' already names a buffer"),
            ));
        }
        Ok(())
    };
    let expr = |syms: &Symbols, b: usize, field: &str, src: &str| -> Result<Expr, CaseError> {
        // Long expressions are quoted by their start only.
        let shown: String = src.chars().take(60).collect();
        let shown = if shown.len() < src.len() {
            format!("{shown}...")
        } else {
            shown
        };
        if src.len() > MAX_EXPR_LEN {
            return Err(cx.err(
                at,
                format!(
                    "{name}: field {field}: '{shown}': {} characters; at most {MAX_EXPR_LEN}",
                    src.len()
                ),
            ));
        }
        let e = Expr::parse(src)
            .map_err(|e| cx.err(at, format!("{name}: field {field}: '{shown}': {e}")))?;
        let dims = syms.slots[b].dims.len();
        if let Some(d) = e.max_dim() {
            if d >= dims {
                return Err(cx.err(
                    at,
                    format!(
                        "{name}: field {field}: '{src}' uses dimension {d} but buffer {} has {dims}",
                        syms.slots[b].name
                    ),
                ));
            }
        }
        Ok(e)
    };
    let same_len = |field: &str, v: &[i64], n: usize| -> Result<(), CaseError> {
        if v.len() != n {
            return Err(cx.err(
                at,
                format!(
                    "{name}: field {field}: {} values for {n} dimensions",
                    v.len()
                ),
            ));
        }
        Ok(())
    };
    let kind = match &step.value {
        Step::FillHost { buffer, value } => {
            let b = buf(syms, buffer)?;
            if !syms.slots[b].host {
                return Err(cx.err(at, format!("fill_host: buffer {buffer} has no host memory")));
            }
            OpKind::FillHost {
                buffer: b,
                value: expr(syms, b, "value", value)?,
            }
        }
        Step::DeviceMalloc(b) => OpKind::DeviceMalloc(buf(syms, b)?),
        Step::DeviceFree(b) => OpKind::DeviceFree(buf(syms, b)?),
        Step::CopyToDevice(b) => OpKind::CopyToDevice(buf(syms, b)?),
        Step::CopyToHost(b) => OpKind::CopyToHost(buf(syms, b)?),
        Step::SetDirty {
            buffer,
            host,
            device,
        } if host.is_none() && device.is_none() => {
            return Err(cx.err(
                at,
                format!("set_dirty: give `host`, `device` or both for {buffer}"),
            ));
        }
        Step::SetDirty {
            buffer,
            host,
            device,
        } => OpKind::SetDirty {
            buffer: buf(syms, buffer)?,
            host: *host,
            device: *device,
        },
        Step::Expect {
            buffer,
            value,
            min,
            extent,
        } => {
            let b = buf(syms, buffer)?;
            let n = syms.slots[b].dims.len();
            let region = match (min, extent) {
                (None, None) => None,
                (Some(m), Some(e)) => {
                    same_len("min", m, n)?;
                    same_len("extent", e, n)?;
                    if let Some(x) = e.iter().find(|&&x| x < 0) {
                        return Err(cx.err(at, format!("expect: field extent: {x} is negative")));
                    }
                    Some((m.clone(), e.clone()))
                }
                _ => return Err(cx.err(at, "expect: give both `min` and `extent`, or neither")),
            };
            OpKind::Expect {
                buffer: b,
                value: expr(syms, b, "value", value)?,
                region,
            }
        }
        Step::Crop {
            from,
            to,
            min,
            extent,
        } => {
            let f = buf(syms, from)?;
            new_slot(syms, to)?;
            let n = syms.slots[f].dims.len();
            same_len("min", min, n)?;
            same_len("extent", extent, n)?;
            let parent = &syms.slots[f];
            let dims = parent
                .dims
                .iter()
                .zip(min.iter().zip(extent))
                .map(|(d, (&min, &extent))| Dim {
                    min,
                    extent,
                    stride: d.stride,
                })
                .collect();
            let to = syms.push_view(to, f, dims);
            OpKind::Crop {
                from: f,
                to,
                min: min.clone(),
                extent: extent.clone(),
            }
        }
        Step::Slice { from, to, dim, pos } => {
            let f = buf(syms, from)?;
            new_slot(syms, to)?;
            let parent = &syms.slots[f];
            if *dim >= parent.dims.len() || parent.dims.len() == 1 {
                return Err(cx.err(
                    at,
                    format!(
                        "slice: field dim: {dim}, but {from} has {} dimensions (a slice keeps at least one)",
                        parent.dims.len()
                    ),
                ));
            }
            let mut dims = parent.dims.clone();
            dims.remove(*dim);
            let to = syms.push_view(to, f, dims);
            OpKind::Slice {
                from: f,
                to,
                dim: *dim,
                pos: *pos,
            }
        }
        Step::View {
            from,
            to,
            at,
            extent,
            stride,
            min,
        } => {
            let f = buf(syms, from)?;
            new_slot(syms, to)?;
            same_len("at", at, syms.slots[f].dims.len())?;
            let n = extent.len();
            if n == 0 || n > MAX_DIMS {
                return Err(cx.err(
                    &step.referenced,
                    format!("view: field extent: {n} dimensions; 1 to {MAX_DIMS} allowed"),
                ));
            }
            same_len("stride", stride, n)?;
            let mins = match min {
                Some(m) => {
                    same_len("min", m, n)?;
                    m.clone()
                }
                None => vec![0; n],
            };
            let dims: Vec<Dim> = (0..n)
                .map(|d| Dim {
                    min: mins[d],
                    extent: extent[d],
                    stride: stride[d],
                })
                .collect();
            let parent = &syms.slots[f];
            check_size(parent.elem, &dims, &format!("view {to}"))
                .map_err(|m| cx.err(&step.referenced, m))?;
            let to = syms.push_view(to, f, dims.clone());
            OpKind::View {
                from: f,
                to,
                at: at.clone(),
                dims,
            }
        }
        Step::ViewNoHost { from, to } => {
            let f = buf(syms, from)?;
            new_slot(syms, to)?;
            let parent = &syms.slots[f];
            let dims = parent.dims.clone();
            let to = syms.push_view(to, f, dims);
            syms.slots[to].host = false;
            OpKind::ViewNoHost { from: f, to }
        }
        Step::ReleaseCrop(b) => {
            let i = buf(syms, b)?;
            if !syms.slots[i].view {
                return Err(cx.err(
                    at,
                    format!(
                        "release_crop: {b} is a buffer, not a crop, slice or view; use release"
                    ),
                ));
            }
            syms.slots[i].name = format!("{b} (released)");
            OpKind::Release(i)
        }
        Step::Release(b) => {
            let i = buf(syms, b)?;
            syms.slots[i].name = format!("{b} (released)");
            OpKind::Release(i)
        }
        Step::BufferCopy {
            from,
            to,
            to_device,
        } => {
            let f = buf(syms, from)?;
            let t = buf(syms, to)?;
            if f == t {
                return Err(cx.err(at, "buffer_copy: `from` and `to` are the same buffer"));
            }
            OpKind::BufferCopy {
                from: f,
                to: t,
                to_device: *to_device,
            }
        }
        Step::ExpectFlags {
            buffer,
            host_dirty,
            device_dirty,
            has_device,
        } => OpKind::ExpectFlags {
            buffer: buf(syms, buffer)?,
            host_dirty: *host_dirty,
            device_dirty: *device_dirty,
            has_device: *has_device,
        },
        Step::ExpectError { error, step } => {
            if !EXPECTABLE_ERRORS.contains(&error.as_str()) {
                return Err(cx.err(at, format!("expect_error: field error: unknown error '{error}'; expected one of {EXPECTABLE_ERRORS:?}")));
            }
            OpKind::ExpectError {
                error: error.clone(),
                op: Box::new(op(cx, syms, step)?),
            }
        }
        Step::ExpectCounters(map) => {
            if let Some(bad) = map.keys().find(|k| !COUNTER_NAMES.contains(&k.as_str())) {
                return Err(cx.err(
                    at,
                    format!(
                        "expect_counters: unknown counter '{bad}'; counters are {COUNTER_NAMES:?}"
                    ),
                ));
            }
            OpKind::ExpectCounters(map.iter().map(|(k, v)| (k.clone(), *v)).collect())
        }
        Step::Profiling(on) => OpKind::Profiling(*on),
        Step::FillHeap { heap, leave } => OpKind::FillHeap {
            heap: *heap,
            leave: *leave,
        },
        Step::ReleaseUnused => OpKind::ReleaseUnused,
        Step::HostAdd { out, inputs, value } => {
            let o = buf(syms, out)?;
            if !syms.slots[o].host {
                return Err(cx.err(at, format!("host_add: buffer {out} has no host memory")));
            }
            let mut ins = Vec::new();
            for i in inputs {
                let b = buf(syms, i)?;
                if !syms.slots[b].host {
                    return Err(cx.err(at, format!("host_add: input {i} has no host memory")));
                }
                if syms.slots[b].dims.len() != syms.slots[o].dims.len() {
                    return Err(cx.err(
                        at,
                        format!(
                            "host_add: input {i} has {} dimensions, {out} has {}",
                            syms.slots[b].dims.len(),
                            syms.slots[o].dims.len()
                        ),
                    ));
                }
                ins.push(b);
            }
            if ins.is_empty() && value.is_none() {
                return Err(cx.err(at, "host_add: give `inputs`, `value` or both"));
            }
            let value = match value {
                Some(v) => Some(expr(syms, o, "value", v)?),
                None => None,
            };
            OpKind::HostAdd {
                out: o,
                inputs: ins,
                value,
            }
        }
        Step::Measure(m) => {
            let op = match (&m.copy_to_host, &m.copy_to_device, &m.from, &m.to) {
                (Some(b), None, None, None) => MeasureOp::CopyToHost(buf(syms, b)?),
                (None, Some(b), None, None) => MeasureOp::CopyToDevice(buf(syms, b)?),
                (None, None, Some(f), Some(t)) => {
                    let (f, t) = (buf(syms, f)?, buf(syms, t)?);
                    if f == t {
                        return Err(cx.err(at, "measure: `from` and `to` are the same buffer"));
                    }
                    MeasureOp::DeviceToDevice { from: f, to: t }
                }
                _ => {
                    return Err(cx.err(
                        at,
                        "measure: give one of `copy_to_host: B`, `copy_to_device: B`, or `from: A, to: B`",
                    ))
                }
            };
            let limits = |field: &str, m: &std::collections::BTreeMap<String, f64>| {
                m.iter()
                    .map(|(k, v)| {
                        DeviceReq::parse(k).map(|r| (r, *v)).ok_or_else(|| {
                            cx.err(
                                at,
                                format!("measure: field {field}: unknown device type '{k}'"),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
            let repeat = m.repeat.unwrap_or(3);
            if repeat == 0 || repeat > MAX_REPEAT {
                return Err(cx.err(at, format!("measure: field repeat: 1 to {MAX_REPEAT}")));
            }
            for (field, map) in [("min_gbps", &m.min_gbps), ("max_us", &m.max_us)] {
                if let Some((k, v)) = map.iter().find(|(_, v)| !v.is_finite() || **v < 0.0) {
                    return Err(cx.err(
                        at,
                        format!("measure: field {field}: {k}: {v} is not a non-negative number"),
                    ));
                }
            }
            OpKind::Measure(Measure {
                op,
                repeat,
                min_gbps: limits("min_gbps", &m.min_gbps)?,
                max_us: limits("max_us", &m.max_us)?,
            })
        }
        Step::DeviceRelease => OpKind::DeviceRelease,
        Step::Kernel(k) => {
            let named = [("fill", &k.fill), ("add", &k.add), ("sum", &k.sum)];
            let given: Vec<&str> = named
                .iter()
                .filter(|(_, v)| v.is_some())
                .map(|(n, _)| *n)
                .collect();
            if given.len() != 1 {
                return Err(cx.err(
                    at,
                    format!("kernel: give exactly one of fill, add, sum (given: {given:?})"),
                ));
            }
            let unused = |field: &str, present: bool| -> Result<(), CaseError> {
                if present {
                    return Err(cx.err(
                        at,
                        format!("kernel {}: field {field} does not apply", given[0]),
                    ));
                }
                Ok(())
            };
            if let Some(out) = &k.fill {
                unused("inputs", !k.inputs.is_empty())?;
                unused("input", k.input.is_some())?;
                unused("dim", k.dim.is_some())?;
                unused("constant", k.constant != 0)?;
                let o = buf(syms, out)?;
                let value = k
                    .value
                    .as_deref()
                    .ok_or_else(|| cx.err(at, "kernel fill: field value is missing"))?;
                OpKind::KernelFill {
                    out: o,
                    value: expr(syms, o, "value", value)?,
                }
            } else if let Some(out) = &k.add {
                unused("value", k.value.is_some())?;
                unused("input", k.input.is_some())?;
                unused("dim", k.dim.is_some())?;
                let o = buf(syms, out)?;
                let mut inputs = Vec::new();
                for i in &k.inputs {
                    let b = buf(syms, i)?;
                    if b == o || inputs.contains(&b) {
                        return Err(cx.err(at, format!("kernel add: input {i} is named twice or is the output; write an in-place add as `add: {out}, constant: C`")));
                    }
                    inputs.push(b);
                }
                OpKind::KernelAdd {
                    out: o,
                    inputs,
                    constant: k.constant,
                }
            } else {
                let out = k.sum.as_deref().unwrap_or_default();
                unused("value", k.value.is_some())?;
                unused("inputs", !k.inputs.is_empty())?;
                unused("constant", k.constant != 0)?;
                let o = buf(syms, out)?;
                let input = k
                    .input
                    .as_deref()
                    .ok_or_else(|| cx.err(at, "kernel sum: field input is missing"))?;
                let i = buf(syms, input)?;
                if i == o {
                    return Err(cx.err(at, "kernel sum: input and output are the same buffer"));
                }
                let dim = k
                    .dim
                    .ok_or_else(|| cx.err(at, "kernel sum: field dim is missing"))?;
                OpKind::KernelSum {
                    out: o,
                    input: i,
                    dim,
                }
            }
        }
        Step::ExpectMemory {
            role,
            memory_type,
            flags,
            fallbacks,
        } => {
            let role: Role = role.parse().map_err(|_| {
                cx.err(
                    at,
                    format!(
                        "expect_memory: field role: '{role}' is not readback, upload or device"
                    ),
                )
            })?;
            if let Some(fl) = flags {
                if let Some(bad) = fl.iter().find(|f| parse_property_flag(f).is_none()) {
                    return Err(cx.err(
                        at,
                        format!("expect_memory: field flags: unknown memory property flag '{bad}'"),
                    ));
                }
            }
            if memory_type.is_none() && flags.is_none() && fallbacks.is_none() {
                return Err(cx.err(at, "expect_memory: give `type`, `flags` or `fallbacks`"));
            }
            OpKind::ExpectMemory {
                role,
                memory_type: *memory_type,
                flags: flags.clone(),
                fallbacks: *fallbacks,
            }
        }
    };
    Ok(Op {
        line: at.line(),
        column: at.column(),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases")
    }

    fn parse_err(src: &str) -> String {
        let root = root();
        parse(&root, &root.join("basic/bad.yaml"), src)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn case_names_follow_the_folder() {
        let r = Path::new("/x/cases");
        assert_eq!(
            case_name(r, Path::new("/x/cases/halide/device_crop.yaml")),
            "halide::device_crop"
        );
    }

    #[test]
    fn unknown_field_is_located() {
        let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - fill_host: { buffer: g, valu: x }\n");
        assert!(e.contains("basic/bad.yaml:5:29: "), "{e}");
        assert!(e.contains("unknown field `valu`"), "{e}");
    }

    #[test]
    fn unknown_step_is_located() {
        let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - fill_hots: { buffer: g, value: x }\n");
        assert!(e.contains("bad.yaml:5:5: "), "{e}");
        assert!(e.contains("fill_hots"), "{e}");
    }

    #[test]
    fn wrong_value_type_names_the_field() {
        let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4], host: maybe }\nsteps:\n  - copy_to_host: g\n");
        assert!(e.contains("bad.yaml:3:"), "{e}");
        assert!(e.contains("host"), "{e}");
    }

    #[test]
    fn bad_expression_names_step_and_field() {
        let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - copy_to_host: g\n  - expect: { buffer: g, value: x + q }\n");
        assert!(
            e.contains("bad.yaml:6:5: expect: field value: 'x + q'"),
            "{e}"
        );
    }

    #[test]
    fn expression_beyond_dimensions_is_an_error() {
        let e = parse_err("about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - fill_host: { buffer: g, value: y }\n");
        assert!(e.contains("uses dimension 1 but buffer g has 1"), "{e}");
    }

    #[test]
    fn unknown_buffer_is_an_error() {
        let e = parse_err(
            "about: a\nbuffers:\n  g: { type: i32, extent: [4] }\nsteps:\n  - copy_to_host: h\n",
        );
        assert!(
            e.contains("bad.yaml:5:5: copy_to_host: unknown buffer 'h'"),
            "{e}"
        );
    }

    #[test]
    fn unknown_element_type_is_an_error() {
        let e = parse_err(
            "about: a\nbuffers:\n  g: { type: i33, extent: [4] }\nsteps:\n  - copy_to_host: g\n",
        );
        assert!(
            e.contains("bad.yaml:3:6: buffer g: field type: unknown element type 'i33'"),
            "{e}"
        );
    }

    #[test]
    fn missing_table_is_an_error() {
        let e = parse_err("about: a\nselection:\n  table: no-such-gpu\n  expect:\n    - { request: readback, vkcopy: 0 }\n");
        assert!(e.contains("no recorded table 'no-such-gpu'"), "{e}");
    }

    #[test]
    fn bad_request_is_an_error() {
        let e = parse_err("about: a\nselection:\n  table: lavapipe\n  expect:\n    - { request: sideways, vkcopy: 0 }\n");
        assert!(e.contains("bad.yaml:5:7: request 'sideways'"), "{e}");
    }

    #[test]
    fn huge_buffers_are_refused_where_written() {
        for extent in [
            "[100000000000]",
            "[4294967296, 4294967296]",
            "[9223372036854775807]",
        ] {
            let e = parse_err(&format!(
                "about: a\nbuffers:\n  g: {{ type: u8, extent: {extent} }}\nsteps:\n  - copy_to_host: g\n"
            ));
            assert!(e.contains("bad.yaml:3:6: buffer g: "), "{e}");
        }
        let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [2, 2], stride: [1, 1000000000000] }\nsteps:\n  - copy_to_host: g\n");
        assert!(e.contains("spans more than"), "{e}");
        let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [2] }\nsteps:\n  - view: { from: g, to: v, at: [0], extent: [1000000, 1000000], stride: [0, 0] }\n");
        assert!(e.contains("bad.yaml:5:5: view v: more than"), "{e}");
        let e = parse_err("about: a\nbuffers:\n  g: { type: u8, extent: [2] }\nsteps:\n  - measure: { copy_to_host: g, repeat: 4000000000 }\n");
        assert!(e.contains("field repeat"), "{e}");
    }

    #[test]
    fn long_expressions_are_quoted_by_their_start() {
        let long = "x+".repeat(3000) + "x";
        let e = parse_err(&format!("about: a\nbuffers:\n  g: {{ type: u8, extent: [2] }}\nsteps:\n  - fill_host: {{ buffer: g, value: \"{long}\" }}\n"));
        assert!(e.len() < 300, "{e}");
        assert!(e.contains("at most 4096"), "{e}");
    }

    #[test]
    fn good_case_plans() {
        let root = root();
        let p = parse(
            &root,
            &root.join("basic/ok.yaml"),
            "about: a\nbuffers:\n  g: { type: u16, extent: [4, 2], min: [1, 1] }\nsteps:\n  - fill_host: { buffer: g, value: x + 10*y }\n  - copy_to_device: g\n",
        )
        .unwrap();
        assert_eq!(p.name, "basic::ok");
        let PlanKind::Runtime(r) = p.kind else {
            panic!("runtime case expected")
        };
        assert_eq!(
            r.buffers[0].dims[1],
            Dim {
                min: 1,
                extent: 2,
                stride: 4
            }
        );
        assert_eq!(r.ops.len(), 2);
        assert_eq!(r.ops[1].line, 6);
    }
}
