//! From case file to plan: parses the YAML, checks every name, shape and
//! expression (expanding repeats), and reports the first problem as
//! `path:line:column: message`.

use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;

use crate::case::{BufferSpec, CaseFile};
use crate::discover::case_name;
use crate::error::CaseError;
use crate::requires::DeviceReq;
use crate::rt::{
    dense_dims, Dim, ElemType, MappedCopy, MemoryTable, Policy, SmallCopyQueue, MAX_DIMS,
};
use crate::selection::{self, recorded_table, SelectionPlan};
use crate::steps::planner::{check_size, Planner, Slot};
use crate::steps::{self, Op};

/// A buffer of a plan.
#[derive(Clone, Debug)]
pub struct BufferDecl {
    /// The buffer's name in the case.
    pub name: String,
    /// Its element type.
    pub elem: ElemType,
    /// Its shape.
    pub dims: Vec<Dim>,
    /// Whether it has host memory (`host: false` gives none).
    pub host: bool,
    /// Caller host memory this many bytes past a page boundary.
    pub host_offset: Option<u64>,
}

/// A case that runs on a device.
#[derive(Clone, Debug)]
pub struct RuntimePlan {
    /// The policy the case pins, if any.
    pub policy: Option<Policy>,
    /// The recorded table the case presents to the allocator, if any.
    pub simulate_memory: Option<MemoryTable>,
    /// How uploads into host-visible device memory go, if the case says.
    pub mapped_upload: Option<MappedCopy>,
    /// How readbacks from host-visible device memory go, if the case says.
    pub mapped_readback: Option<MappedCopy>,
    /// Which queue takes small copies by the GPU, if the case says.
    pub small_copy_queue: Option<SmallCopyQueue>,
    /// Declared buffers: slots `0..buffers.len()`.
    pub buffers: Vec<BufferDecl>,
    /// The name of every slot: the declared buffers, then the views steps create.
    pub slots: Vec<String>,
    /// The element type of every slot.
    pub slot_elems: Vec<ElemType>,
    /// The shape of every slot.
    pub slot_dims: Vec<Vec<Dim>>,
    /// The checked steps, repeats expanded.
    pub ops: Vec<Op>,
}

/// What a case does.
#[derive(Clone, Debug)]
pub enum PlanKind {
    /// Steps on a device.
    Runtime(RuntimePlan),
    /// Memory-type selection checks on a recorded table, without a device.
    Selection(SelectionPlan),
}

/// The tag of speed cases, which run alone (other cases beside them would
/// slow them); every case with a `measure` step has it.
pub const PERF_TAG: &str = "perf";

/// A checked case, ready to run.
#[derive(Clone, Debug)]
pub struct CasePlan {
    /// Test name: the path below `cases/` without `.yaml`, `/` written `::`.
    pub name: String,
    /// The case file.
    pub path: PathBuf,
    /// The case's `about:`.
    pub about: String,
    /// The Halide test the case mirrors, if any.
    pub mirrors: Option<String>,
    /// The device types the case needs (`requires:`).
    pub requires: Vec<DeviceReq>,
    /// The case's `tags:`.
    pub tags: Vec<String>,
    /// Whether every shard runs the case (`every_shard:`).
    pub every_shard: bool,
    /// The case's own time limit (`timeout:`), if it sets one.
    pub timeout: Option<std::time::Duration>,
    /// What the case does.
    pub kind: PlanKind,
}

impl CasePlan {
    /// Element types that the case's kernels write or read, to check support early.
    pub fn kernel_elem_types(&self) -> Vec<ElemType> {
        let PlanKind::Runtime(r) = &self.kind else {
            return Vec::new();
        };
        let mut types: Vec<ElemType> = r
            .ops
            .iter()
            .flat_map(|op| op.kernel_slots())
            .map(|s| r.slot_elems[s])
            .collect();
        types.sort_by_key(|t| t.name());
        types.dedup();
        types
    }

    /// Whether the case needs a Vulkan device.
    pub fn needs_device(&self) -> bool {
        matches!(self.kind, PlanKind::Runtime(_))
    }

    /// Why a device of type `t` cannot run this case, if it cannot.
    pub fn unmet(&self, t: crate::rt::DeviceType) -> Option<String> {
        if self.requires.is_empty() || self.requires.iter().any(|r| r.accepts(t)) {
            return None;
        }
        let wanted: Vec<&str> = self.requires.iter().map(|r| r.name()).collect();
        Some(format!(
            "needs a {} device; this one is {}",
            wanted.join(" or "),
            DeviceReq::of(t).name()
        ))
    }
}

/// A YAML error inside a step, with the step's name first.
fn with_step(src: &str, mut err: CaseError) -> CaseError {
    if let Some(step) = step_of(src, err.line) {
        let own = format!("field `{step}`: ");
        let rest = err.message.strip_prefix(&own).unwrap_or(&err.message);
        if !rest.starts_with(step) {
            err.message = format!("{step}: {rest}");
        }
    }
    err
}

/// The step written at or above `line` of `src` (`- crop: ...`), for YAML
/// errors inside a step; none above the first top-level key.
fn step_of(src: &str, line: u64) -> Option<&'static str> {
    let lines: Vec<&str> = src.lines().take(line as usize).collect();
    for text in lines.iter().rev() {
        let trimmed = text.trim_start();
        if let Some(item) = trimmed.strip_prefix("- ") {
            let name = item
                .trim_start_matches(['{', ' '])
                .split([':', ' ', '}'])
                .next()
                .unwrap_or("");
            if let Some(step) = steps::step_names().iter().find(|s| **s == name) {
                return Some(step);
            }
        }
        if !text.starts_with([' ', '-', '#']) && !text.is_empty() {
            return None;
        }
    }
    None
}

/// Largest case file read: a guard against reading a stray large file.
pub const MAX_CASE_BYTES: u64 = crate::files::MAX_FILE_BYTES;

/// Reads and checks the case at `path`; `root` is the `cases/` folder.
pub fn load(root: &Path, path: &Path) -> Result<CasePlan, CaseError> {
    load_all(root, path).map_err(first)
}

/// [`load`] that gives every error of the file, in file order: each step that
/// parses is planned, whatever the steps before it did.
pub fn load_all(root: &Path, path: &Path) -> Result<CasePlan, Vec<CaseError>> {
    let src = crate::files::read_text(path).map_err(|m| vec![CaseError::new(path, 0, 0, m)])?;
    parse_all(root, path, &src)
}

/// Checks the case text `src` as if read from `path`.
pub fn parse(root: &Path, path: &Path, src: &str) -> Result<CasePlan, CaseError> {
    parse_all(root, path, src).map_err(first)
}

/// The first of a file's errors (there is at least one).
fn first(mut errors: Vec<CaseError>) -> CaseError {
    if errors.is_empty() {
        return CaseError::new(Path::new(""), 0, 0, "an error without a message");
    }
    errors.swap_remove(0)
}

/// [`parse`] with every error of the file.
pub fn parse_all(root: &Path, path: &Path, src: &str) -> Result<CasePlan, Vec<CaseError>> {
    parse_one(root, path, src).map_err(|e| vec![e])?
}

/// The case, or its steps' errors; `Err` for an error that stops the check.
fn parse_one(
    root: &Path,
    path: &Path,
    src: &str,
) -> Result<Result<CasePlan, Vec<CaseError>>, CaseError> {
    crate::error::refuse_tags(path, src).map_err(|e| with_step(src, e))?;
    if src
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Err(CaseError::new(
            path,
            src.lines().count() as u64 + 1,
            1,
            "the file is empty; a case has at least `about` and `steps`",
        ));
    }
    let file: CaseFile = serde_saphyr::from_str(src)
        .map_err(|e| with_step(src, CaseError::from_yaml(path, src, &e)))?;
    // Checked here rather than by serde, so that the steps' errors are found too.
    let no_about = file
        .about
        .is_none()
        .then(|| CaseError::new(path, 1, 1, "field about: missing; it is required here"));
    let mut requires = Vec::new();
    for spanned in &file.requires.device_types {
        let (t, at) = (&spanned.value, &spanned.referenced);
        requires.push(DeviceReq::parse(t).ok_or_else(|| {
            CaseError::new(
                path,
                at.line(),
                at.column(),
                format!(
                    "requires.device_types: unknown device type '{t}'; expected one of {:?}",
                    DeviceReq::names()
                ),
            )
        })?);
    }
    let mut tags = Vec::new();
    for t in &file.tags {
        let ok = !t.value.is_empty()
            && t.value
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !ok {
            let at = &t.referenced;
            return Err(CaseError::new(
                path,
                at.line(),
                at.column(),
                format!(
                    "tags: '{}': a tag is lower case letters, digits, '-' and '_'",
                    t.value
                ),
            ));
        }
        tags.push(t.value.clone());
    }
    let timeout = match &file.timeout {
        Some(t) if !(t.value.is_finite() && t.value >= 0.001 && t.value <= 86400.0) => {
            let at = &t.referenced;
            return Err(CaseError::new(
                path,
                at.line(),
                at.column(),
                format!("timeout: {}: seconds from 0.001 to 86400", t.value),
            ));
        }
        Some(t) => Some(std::time::Duration::from_secs_f64(t.value)),
        None => None,
    };
    let kind = match (&file.selection, file.steps.is_empty()) {
        (Some(sel), true) => {
            let at = &sel.referenced;
            if !file.buffers.is_empty()
                || file.simulate_memory.is_some()
                || file.policy.is_some()
                || file.mapped_upload.is_some()
                || file.mapped_readback.is_some()
                || file.small_copy_queue.is_some()
            {
                return Err(CaseError::new(
                    path,
                    at.line(),
                    at.column(),
                    "a selection case has no buffers, simulate_memory, policy, mapped_upload, mapped_readback or small_copy_queue",
                ));
            }
            if let Some(e) = no_about {
                return Err(e);
            }
            PlanKind::Selection(selection::plan(root, path, &sel.value, at)?)
        }
        (Some(sel), false) => {
            let at = &sel.referenced;
            return Err(CaseError::new(
                path,
                at.line(),
                at.column(),
                "a case has either `steps` or `selection`, not both",
            ));
        }
        (None, true) => {
            return Err(CaseError::new(
                path,
                1,
                1,
                "the case has no `steps` (or `selection`)",
            ))
        }
        (None, false) => match (runtime(root, path, &file)?, no_about) {
            (Ok(r), None) => PlanKind::Runtime(r),
            (Ok(_), Some(e)) => return Ok(Err(vec![e])),
            (Err(mut errors), no_about) => {
                errors.splice(0..0, no_about);
                return Ok(Err(errors));
            }
        },
    };
    // A case that measures speed is a perf case, tagged or not: it runs alone,
    // and `--tags perf` selects it.
    let measures = match &kind {
        PlanKind::Runtime(r) => r.ops.iter().any(Op::measures),
        PlanKind::Selection(_) => false,
    };
    if measures && !tags.iter().any(|t| t == PERF_TAG) {
        tags.push(PERF_TAG.to_owned());
    }
    Ok(Ok(CasePlan {
        name: case_name(root, path),
        path: path.to_owned(),
        about: file.about.unwrap_or_default(),
        mirrors: file.mirrors,
        requires,
        tags,
        every_shard: file.every_shard,
        timeout,
        kind,
    }))
}

/// The runtime plan of `file`, or its steps' errors; `Err` for an error outside
/// the steps.
fn runtime(
    root: &Path,
    path: &Path,
    file: &CaseFile,
) -> Result<Result<RuntimePlan, Vec<CaseError>>, CaseError> {
    let located =
        |at: &serde_saphyr::Location, m: String| CaseError::new(path, at.line(), at.column(), m);
    let simulate_memory = match &file.simulate_memory {
        Some(s) => Some(
            recorded_table(root, &s.value)
                .map_err(|e| located(&s.referenced, format!("simulate_memory: {e}")))?,
        ),
        None => None,
    };
    let mut buffers = Vec::new();
    for (name, spec) in &file.buffers {
        let decl = buffer(name, &spec.value)
            .map_err(|m| located(&spec.referenced, format!("buffer {name}: {m}")))?;
        buffers.push(decl);
    }
    let slots = buffers
        .iter()
        .map(|b| Slot {
            name: b.name.clone(),
            elem: b.elem,
            dims: b.dims.clone(),
            host: b.host,
            released: false,
        })
        .collect();
    let mut planner = Planner::new(path, slots);
    planner.heaps = simulate_memory.as_ref().map(|t| t.heaps.len());
    let mut ops = Vec::new();
    let stopped = steps::plan(&file.steps, &mut planner, &mut ops).err();
    if stopped.is_some() || !planner.errors.is_empty() {
        let mut errors = std::mem::take(&mut planner.errors);
        errors.extend(stopped);
        errors.sort_by_key(|e| (e.line, e.column));
        errors.dedup_by_key(|e| (e.line, e.column));
        return Ok(Err(errors));
    }
    Ok(Ok(RuntimePlan {
        policy: named(path, "policy", &file.policy)?,
        simulate_memory,
        mapped_upload: named(path, "mapped_upload", &file.mapped_upload)?,
        mapped_readback: named(path, "mapped_readback", &file.mapped_readback)?,
        small_copy_queue: named(path, "small_copy_queue", &file.small_copy_queue)?,
        buffers,
        slots: planner.slots.iter().map(|s| s.name.clone()).collect(),
        slot_elems: planner.slots.iter().map(|s| s.elem).collect(),
        slot_dims: planner.slots.iter().map(|s| s.dims.clone()).collect(),
        ops,
    }))
}

/// Checks a buffer declaration.
/// The value of the optional top-level field `field`, one of a set of names.
fn named<T: std::str::FromStr>(
    path: &Path,
    field: &str,
    value: &Option<Spanned<String>>,
) -> Result<Option<T>, CaseError>
where
    T::Err: std::fmt::Display,
{
    let Some(v) = value else { return Ok(None) };
    v.value.parse::<T>().map(Some).map_err(|e| {
        let at = &v.referenced;
        CaseError::new(path, at.line(), at.column(), format!("{field}: {e}"))
    })
}

fn buffer(name: &str, s: &BufferSpec) -> Result<BufferDecl, String> {
    let elem: ElemType = s.elem.parse().map_err(|e| format!("field type: {e}"))?;
    let n = s.extent.len();
    if n == 0 || n > MAX_DIMS {
        return Err(format!(
            "field extent: {n} dimensions; 1 to {MAX_DIMS} allowed"
        ));
    }
    if let Some(e) = s.extent.iter().find(|&&e| e < 0) {
        return Err(format!("field extent: {e} is negative"));
    }
    let mut dims = dense_dims(&s.extent);
    if let Some(min) = &s.min {
        for (d, (&m, &e)) in min.iter().zip(&s.extent).enumerate() {
            if m.checked_add(e).is_none() {
                return Err(format!(
                    "field min: min {m} + extent {e} of dimension {d} overflows 64 bits"
                ));
            }
        }
    }
    for (field, v) in [("min", &s.min), ("stride", &s.stride)] {
        if let Some(v) = v.as_ref().filter(|v| v.len() != n) {
            return Err(format!(
                "field {field}: {} values for {n} dimensions",
                v.len()
            ));
        }
    }
    for (d, &m) in dims.iter_mut().zip(s.min.iter().flatten()) {
        d.min = m;
    }
    for (d, &st) in dims.iter_mut().zip(s.stride.iter().flatten()) {
        if st < 0 {
            return Err(format!(
                "field stride: {st} is negative; negative strides are not supported"
            ));
        }
        d.stride = st;
    }
    check_size(elem, &dims)?;
    match s.host_offset {
        Some(o) if o >= 4096 => {
            return Err(format!(
                "field host_offset: {o}; an offset from a page boundary is 0 to 4095"
            ))
        }
        Some(_) if !s.host => {
            return Err("field host_offset: the buffer has no host memory (host: false)".into())
        }
        _ => {}
    }
    Ok(BufferDecl {
        name: name.to_owned(),
        elem,
        dims,
        host: s.host,
        host_offset: s.host_offset,
    })
}

#[cfg(test)]
mod tests;
