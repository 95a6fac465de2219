//! The step vocabulary. Each family of steps is one module that owns the
//! steps' YAML form, their check (planning) and their run on a context:
//!
//! | module | steps |
//! |---|---|
//! | [`memory`] | `device_malloc device_free release set_dirty fill_heap release_unused device_release` |
//! | [`copies`] | `copy_to_device copy_to_host buffer_copy` |
//! | [`async_copies`] | `start_copy_to_device start_copy_to_host start_buffer_copy wait expect_order` |
//! | [`views`] | `crop slice view view_no_host` |
//! | [`compute`] | `fill_host fill_device add_host add_device map_device sum_device` |
//! | [`checks`] | `expect expect_flags expect_counters expect_memory` |
//! | [`measure`] | `measure profiling` |
//! | [`control`] | `repeat when expect_error` |
//!
//! A step's name is its serde name in its family's `Step` enum; this module
//! finds the family by name, so adding a step is an edit of its family (and of
//! `cases/README.md`).

pub mod aliased;
pub mod async_copies;
pub mod bind;
pub mod checks;
pub mod compute;
pub mod control;
pub mod copies;
pub mod measure;
pub mod memory;
pub mod planner;
pub mod views;

use std::fmt;
use std::sync::OnceLock;

use serde::de::value::{StrDeserializer, UnitDeserializer};
use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess,
    VariantAccess, Visitor,
};
use serde_saphyr::Spanned;

use crate::error::CaseError;
use crate::names;
use crate::runtime::StepError;
use crate::runtime::{Capability, Runtime};
use planner::Planner;

/// One step as written: its name and its family's fields.
#[derive(Debug)]
pub struct Step {
    pub name: &'static str,
    pub body: Body,
}

/// A step's fields, by family.
#[derive(Debug)]
pub enum Body {
    Memory(memory::Step),
    Copies(copies::Step),
    AsyncCopies(async_copies::Step),
    Views(views::Step),
    Compute(compute::Step),
    Checks(checks::Step),
    Measure(measure::Step),
    Control(control::Step<Step>),
    /// A name that is no step, kept so that planning reports it where it is
    /// written and goes on to the steps after it.
    Unknown(String),
}

/// Runs `$then!(Variant, Type)` for every family.
macro_rules! for_each_family {
    ($then:ident) => {
        $then!(Memory, memory::Step);
        $then!(Copies, copies::Step);
        $then!(AsyncCopies, async_copies::Step);
        $then!(Views, views::Step);
        $then!(Compute, compute::Step);
        $then!(Checks, checks::Step);
        $then!(Measure, measure::Step);
        $then!(Control, control::Step<Step>);
    };
}

/// Every step name, for error messages.
pub fn step_names() -> &'static [&'static str] {
    static ALL: OnceLock<Vec<&'static str>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = Vec::new();
        macro_rules! add {
            ($v:ident, $t:ty) => {
                all.extend(names::variants::<$t>());
            };
        }
        for_each_family!(add);
        all
    })
}

/// The step `name` with fields read from `value`.
fn body_from<'de, D: Deserializer<'de>>(name: &str, value: D) -> Result<Step, D::Error> {
    macro_rules! try_family {
        ($v:ident, $t:ty) => {
            if let Some(n) = names::variants::<$t>().iter().find(|n| **n == name) {
                let body = <$t>::deserialize(Variant { name, value })?;
                return Ok(Step {
                    name: n,
                    body: Body::$v(body),
                });
            }
        };
    }
    for_each_family!(try_family);
    de::IgnoredAny::deserialize(value)?;
    Ok(Step {
        name: "",
        body: Body::Unknown(name.to_owned()),
    })
}

/// Step names of earlier forms of the format, and what took their place.
const OLD_NAMES: &[(&str, &str)] = &[
    (
        "kernel",
        "fill_device, add_device or map_device (`kernel: { fill: b, value: \"...\" }` is now \
         `fill_device: { buffer: b, value: \"...\" }`, `kernel: { add: b, constant: 7 }` is \
         `add_device: { out: b, value: \"7\" }`)",
    ),
    (
        "release_crop",
        "release (it releases crops, slices and views too)",
    ),
];

/// `unknown step 'fill_devcie'; did you mean fill_device?`
pub fn unknown_step(name: &str) -> String {
    if let Some((_, now)) = OLD_NAMES.iter().find(|(old, _)| *old == name) {
        return format!("unknown step '{name}', an old spelling; did you mean {now}?");
    }
    let near = names::suggest(name, step_names());
    match near.as_slice() {
        [] => format!("unknown step '{name}'; cases/README.md lists the steps"),
        [one] => format!("unknown step '{name}'; did you mean {one}?"),
        many => format!(
            "unknown step '{name}'; did you mean one of {}?",
            many.join(", ")
        ),
    }
}

/// A step is one of any family's steps: the families' schemas side by side.
impl schemars::JsonSchema for Step {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Step".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut families = Vec::new();
        macro_rules! add {
            ($v:ident, $t:ty) => {
                families.push(generator.subschema_for::<$t>());
            };
        }
        for_each_family!(add);
        schemars::json_schema!({
            "description": "One step: `name: fields`, or a name alone for a step without fields.",
            "anyOf": families,
        })
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StepVisitor)
    }
}

struct StepVisitor;

impl<'de> Visitor<'de> for StepVisitor {
    type Value = Step;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a step: `name: fields`, or a name alone for a step without fields")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Step, E> {
        body_from(name, UnitDeserializer::<E>::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Step, A::Error> {
        let name: String = map
            .next_key()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let step = map.next_value_seed(Named(&name))?;
        if let Some(second) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "a step has one name; `{second}` follows `{name}` (start a new step with `-`)"
            )));
        }
        Ok(step)
    }
}

/// The fields of the step named `.0`.
struct Named<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for Named<'_> {
    type Value = Step;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Step, D::Error> {
        body_from(self.0, d)
    }
}

/// Presents a name and its fields to a family's derived `Deserialize` as one
/// externally tagged enum value.
struct Variant<'n, D> {
    name: &'n str,
    value: D,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Variant<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        v.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de, 'n, D: Deserializer<'de>> EnumAccess<'de> for Variant<'n, D> {
    type Error = D::Error;
    type Variant = Fields<D>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Fields<D>), D::Error> {
        let name: StrDeserializer<'n, D::Error> = self.name.into_deserializer();
        Ok((seed.deserialize(name)?, Fields(self.value)))
    }
}

struct Fields<D>(D);

impl<'de, D: Deserializer<'de>> VariantAccess<'de> for Fields<D> {
    type Error = D::Error;

    fn unit_variant(self) -> Result<(), D::Error> {
        <()>::deserialize(self.0)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, D::Error> {
        seed.deserialize(self.0)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, v)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct("step", fields, v)
    }
}

/// One checked step, with where it was written.
#[derive(Clone, Debug)]
pub struct Op {
    /// The case file, for runtime errors.
    pub path: std::sync::Arc<std::path::Path>,
    /// The step's name.
    pub step: &'static str,
    pub line: u64,
    pub column: u64,
    /// The loop variables' values (`t = 3`), for messages; empty outside loops.
    pub iteration: String,
    pub kind: OpKind,
}

/// What a checked step does, by family.
#[derive(Clone, Debug)]
pub enum OpKind {
    Memory(memory::Op),
    Copies(copies::Op),
    AsyncCopies(async_copies::Op),
    Views(views::Op),
    Compute(compute::Op),
    Checks(checks::Op),
    Measure(measure::Op),
    /// The step must fail with the runtime error of that name.
    ExpectError {
        error: String,
        op: Box<Op>,
    },
    /// `ops` run `times` times in a row (a `repeat` without a variable); run by
    /// the case executor.
    Repeat {
        times: u64,
        ops: Vec<Op>,
    },
    /// `ops` on `count` threads at once, each with buffers of its own; run by
    /// the case executor, which holds the declarations. One list for every
    /// thread, or one per thread.
    Threads {
        count: usize,
        ops: Vec<Vec<Op>>,
    },
    /// `halide` where Halide's generic device layer decides, `vkcopy` on
    /// vkcopy's own runtime; run by the case executor.
    OnRuntime {
        halide: Vec<Op>,
        vkcopy: Vec<Op>,
    },
}

impl Op {
    /// Whether the step measures speed, or holds a step that does.
    pub fn measures(&self) -> bool {
        match &self.kind {
            OpKind::Measure(_) => true,
            OpKind::ExpectError { op, .. } => op.measures(),
            OpKind::Repeat { ops, .. } => ops.iter().any(Op::measures),
            OpKind::Threads { ops, .. } => ops.iter().flatten().any(Op::measures),
            OpKind::OnRuntime { halide, vkcopy } => halide.iter().chain(vkcopy).any(Op::measures),
            _ => false,
        }
    }

    /// Where the step was written, for messages: `line 12` or `line 12 (t = 3)`.
    pub fn place(&self) -> String {
        if self.iteration.is_empty() {
            format!("line {}", self.line)
        } else {
            format!("line {} ({})", self.line, self.iteration)
        }
    }

    /// Where the step was written, for runtime errors:
    /// `cases/a.yaml:12:5: crop` or `cases/a.yaml:12:5: crop (t = 3)`.
    pub fn located(&self) -> String {
        let at = format!(
            "{}:{}:{}: {}",
            self.path.display(),
            self.line,
            self.column,
            self.step
        );
        if self.iteration.is_empty() {
            at
        } else {
            format!("{at} ({})", self.iteration)
        }
    }

    /// The slots a device kernel of this step reads or writes.
    pub fn kernel_slots(&self) -> Vec<usize> {
        match &self.kind {
            OpKind::Compute(c) => c.kernel_slots(),
            OpKind::ExpectError { op, .. } => op.kernel_slots(),
            OpKind::Threads { ops, .. } => {
                ops.iter().flatten().flat_map(Op::kernel_slots).collect()
            }
            OpKind::Repeat { ops, .. } => ops.iter().flat_map(Op::kernel_slots).collect(),
            _ => Vec::new(),
        }
    }
}

/// Plans `steps` in order, expanding repeats, and appends them to `out`. A
/// step that fails is recorded in the planner and planning goes on with the
/// next, so that one pass finds every error; the error is returned only when
/// planning cannot go on.
pub fn plan(steps: &[Spanned<Step>], p: &mut Planner, out: &mut Vec<Op>) -> Result<(), CaseError> {
    for step in steps {
        if let Err(e) = plan_one(step, p, out) {
            p.record(e, views_made(&step.value))?;
        }
    }
    Ok(())
}

/// The name a view step would make (`to`), so that later uses of it are not
/// reported again when the step fails.
fn views_made(step: &Step) -> Option<&str> {
    match &step.body {
        Body::Views(v) => Some(v.made()),
        _ => None,
    }
}

fn plan_one(step: &Spanned<Step>, p: &mut Planner, out: &mut Vec<Op>) -> Result<(), CaseError> {
    p.enter(&step.referenced, step.value.name)?;
    let kind = match &step.value.body {
        Body::Unknown(name) => return Err(p.err_at(&step.referenced, unknown_step(name))),
        Body::Memory(s) => OpKind::Memory(memory::plan(s, p)?),
        Body::Copies(s) => OpKind::Copies(copies::plan(s, p)?),
        Body::AsyncCopies(s) => OpKind::AsyncCopies(async_copies::plan(s, p)?),
        Body::Views(s) => OpKind::Views(views::plan(s, p)?),
        Body::Compute(s) => OpKind::Compute(compute::plan(s, p)?),
        Body::Checks(s) => OpKind::Checks(checks::plan(s, p)?),
        Body::Measure(s) => OpKind::Measure(measure::plan(s, p)?),
        Body::Control(c) => return plan_control(c, p, out),
    };
    out.push(op_here(p, kind));
    Ok(())
}

fn op_here(p: &Planner, kind: OpKind) -> Op {
    let (line, column) = p.at();
    Op {
        path: p.path_arc(),
        step: p.step(),
        line,
        column,
        iteration: p.loops.describe(),
        kind,
    }
}

/// A `repeat` without a variable: its steps planned once, run once per value.
/// They are planned a second time after the first and must plan the same steps,
/// so that every run starts where the one before left the buffers' names.
fn plan_runs(
    r: &control::Repeat<Step>,
    range: std::ops::Range<i64>,
    p: &mut Planner,
    out: &mut Vec<Op>,
) -> Result<(), CaseError> {
    let times = range.end.saturating_sub(range.start).max(0) as u64;
    if times == 0 {
        return Ok(());
    }
    let here = p.here();
    let op = op_here(
        p,
        OpKind::Repeat {
            times,
            ops: Vec::new(),
        },
    );
    let (mut first, mut again) = (Vec::new(), Vec::new());
    let before = p.errors.len();
    plan(&r.steps, p, &mut first)?;
    let after_first = p.errors.len();
    let second_run = |mut e: CaseError| {
        e.message.push_str(&format!(
            " (on the second run of the repeat at line {}, which has no `var`: its steps \
             must release what they make)",
            here.0
        ));
        e
    };
    plan(&r.steps, p, &mut again).map_err(&second_run)?;
    for e in &mut p.errors[after_first..] {
        *e = second_run(e.clone());
    }
    p.back_to(here);
    if p.errors.len() > before {
        // The steps' own errors say what is wrong; their shapes differ because of them.
        return Ok(());
    }
    let shape = |ops: &[Op]| -> Vec<(u64, u64, &str)> {
        ops.iter().map(|o| (o.line, o.column, o.step)).collect()
    };
    if shape(&first) != shape(&again) {
        return Err(p.err(
            "a repeat without `var` must plan the same way each run (release what it makes); \
             give it a `var`",
        ));
    }
    if first
        .iter()
        .any(|o| matches!(o.kind, OpKind::Threads { .. }))
    {
        return Err(p.err("threads inside a repeat without `var`; give it a `var`"));
    }
    out.push(Op {
        kind: OpKind::Repeat { times, ops: first },
        ..op
    });
    Ok(())
}

fn plan_control(
    c: &control::Step<Step>,
    p: &mut Planner,
    out: &mut Vec<Op>,
) -> Result<(), CaseError> {
    match c {
        control::Step::Repeat(r) => {
            let range = control::range(r, p)?;
            let Some(var) = &r.var else {
                return plan_runs(r, range, p, out);
            };
            p.loops.push(var, range.start);
            for i in range {
                p.loops.set_last(i);
                plan(&r.steps, p, out)?;
            }
            p.loops.pop();
        }
        control::Step::When(w) => {
            if control::holds(w, p)? {
                plan(&w.steps, p, out)?;
            }
        }
        control::Step::Threads(t) => {
            let count = control::thread_count(t, p)?;
            if p.in_threads {
                return Err(p.err("threads inside threads; one level only"));
            }
            let here = op_here(
                p,
                OpKind::Threads {
                    count,
                    ops: Vec::new(),
                },
            );
            if let Some(var) = &t.var {
                p.loops
                    .check_new(var)
                    .map_err(|e| p.err(format!("field var: {e}")))?;
            }
            let mut ops = Vec::new();
            p.in_threads = true;
            // One list for all threads, or one per thread when they know their index.
            let planned = match &t.var {
                None => {
                    let mut list = Vec::new();
                    let planned = plan(&t.steps, p, &mut list);
                    ops.push(list);
                    planned
                }
                Some(var) => {
                    p.loops.push(var, 0);
                    let each = (0..count).try_for_each(|i| {
                        p.loops.set_last(i as i64);
                        let mut list = Vec::new();
                        plan(&t.steps, p, &mut list)?;
                        ops.push(list);
                        Ok(())
                    });
                    p.loops.pop();
                    each
                }
            };
            p.in_threads = false;
            planned?;
            out.push(Op {
                kind: OpKind::Threads { count, ops },
                ..here
            });
        }
        control::Step::OnRuntime(o) => {
            let here = op_here(
                p,
                OpKind::OnRuntime {
                    halide: Vec::new(),
                    vkcopy: Vec::new(),
                },
            );
            if o.why.trim().is_empty() {
                return Err(p.err("field why: say how the runtimes differ, and why"));
            }
            let (mut halide, mut vkcopy) = (Vec::new(), Vec::new());
            plan(&o.halide, p, &mut halide)?;
            plan(&o.vkcopy, p, &mut vkcopy)?;
            if halide
                .iter()
                .chain(&vkcopy)
                .any(|o| matches!(o.kind, OpKind::Threads { .. }))
            {
                return Err(p.err("threads inside on_runtime; put on_runtime inside threads"));
            }
            out.push(Op {
                kind: OpKind::OnRuntime { halide, vkcopy },
                ..here
            });
        }
        control::Step::ExpectError { error, step } => {
            control::check_error(error, p)?;
            let (line, column) = p.at();
            let (path, name) = (p.path_arc(), p.step());
            let mut inner = Vec::new();
            let outer = std::mem::replace(&mut p.expecting_error, true);
            let planned = plan_one(step, p, &mut inner);
            p.expecting_error = outer;
            planned?;
            let [op] = <[Op; 1]>::try_from(inner)
                .map_err(|_| p.err("expect_error holds one step, not a repeat or when"))?;
            out.push(Op {
                path,
                step: name,
                line,
                column,
                iteration: p.loops.describe(),
                kind: OpKind::ExpectError {
                    error: error.clone(),
                    op: Box::new(op),
                },
            });
        }
    }
    Ok(())
}

/// What `op` needs beyond the primitives every runtime has (`None`: nothing).
/// Every family answers for every one of its steps, with no catch-all arm, so
/// a new step must say.
pub fn needs(op: &Op) -> Option<Capability> {
    match &op.kind {
        OpKind::Memory(o) => memory::needs(o),
        OpKind::Copies(o) => copies::needs(o),
        OpKind::AsyncCopies(_) => Some(Capability::AsyncCopies),
        OpKind::Views(o) => views::needs(o),
        OpKind::Compute(o) => compute::needs(o),
        OpKind::Checks(o) => checks::needs(o),
        OpKind::Measure(_) => Some(Capability::TimedCopies),
        OpKind::ExpectError { op, .. } => needs(op),
        OpKind::Repeat { ops, .. } => ops.iter().find_map(needs),
        OpKind::Threads { .. } => Some(Capability::Threads),
        OpKind::OnRuntime { halide, vkcopy } => halide.iter().chain(vkcopy).find_map(needs),
    }
}

/// Runs one checked step on `rt`.
pub fn run<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    let work = matches!(
        op.kind,
        OpKind::Copies(_) | OpKind::Compute(_) | OpKind::Checks(_)
    );
    if work && rt.async_copies().is_some_and(|a| a.copying()) {
        let from = std::time::Instant::now();
        let ran = run_kind(op, rt);
        if let Some(a) = rt.async_copies() {
            a.worked_since(from);
        }
        return ran;
    }
    run_kind(op, rt)
}

fn run_kind<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    match &op.kind {
        OpKind::Memory(o) => memory::run(o, rt),
        OpKind::Copies(o) => copies::run(o, rt),
        OpKind::AsyncCopies(o) => async_copies::run(o, rt),
        OpKind::Views(o) => views::run(o, rt),
        OpKind::Compute(o) => compute::run(o, rt),
        OpKind::Checks(o) => checks::run(o, rt),
        OpKind::Measure(o) => measure::run(o, rt),
        OpKind::ExpectError { error, op: inner } => match run(inner, rt) {
            Ok(()) => Err(StepError::Check(format!(
                "expect_error: the step succeeded; expected error {error}"
            ))),
            Err(e) if e.error_name() == Some(error.as_str()) => Ok(()),
            Err(e) => Err(StepError::Check(format!(
                "expect_error: expected {error}, got: {e}"
            ))),
        },
        // The executor runs these: the threads' buffers come from the declarations.
        OpKind::Threads { .. } | OpKind::Repeat { .. } | OpKind::OnRuntime { .. } => Err(
            StepError::Check("threads, repeat and on_runtime: run by the case executor".into()),
        ),
    }
}
