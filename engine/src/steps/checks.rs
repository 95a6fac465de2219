//! Check steps: host contents, dirty bits, context counters and where memory
//! landed.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::rt::{
    counter_names, parse_property_flag, property_flags_name, Buffer, Expr, MemoryPropertyFlags,
    Role,
};
use crate::runtime::capability::SHARED_COUNTERS;
use crate::runtime::StepError;
use crate::runtime::{role_answers, Capability, Runtime};
use crate::steps::bind::Int;
use crate::steps::planner::Planner;
use crate::vocab::{CounterName, FlagName, RoleName};

/// The check steps as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "ChecksStep")]
pub enum Step {
    /// Host elements equal `value`: every element, or those in the box
    /// `min`..`min + extent` (clipped to the buffer).
    Expect {
        /// The buffer or view checked.
        buffer: String,
        /// An expression of the coordinates, converted to the element type.
        value: String,
        /// The box's first coordinate per dimension (with `extent`).
        #[serde(default)]
        min: Option<Vec<Int>>,
        /// The box's extent per dimension (with `min`).
        #[serde(default)]
        extent: Option<Vec<Int>>,
    },
    /// The dirty bits given, and whether a device allocation exists.
    ExpectFlags {
        /// The buffer or view checked.
        buffer: String,
        /// The expected `host_dirty` bit; not checked when left out.
        #[serde(default)]
        host_dirty: Option<bool>,
        /// The expected `device_dirty` bit; not checked when left out.
        #[serde(default)]
        device_dirty: Option<bool>,
        /// Whether the buffer has device memory; not checked when left out.
        #[serde(default)]
        has_device: Option<bool>,
    },
    /// Counters of the context (`cases/README.md` names them).
    #[schemars(with = "Counters")]
    ExpectCounters(BTreeMap<String, CounterWant>),
    /// At least this much work was in flight at once since the case began: each
    /// thread's blocking work while the device has it, each async stream from
    /// the start of a copy that is ready to run on it until its ready copies have
    /// run (staging included; copies of one stream count once), and a step of
    /// the case (a copy, kernel, host stage or check) that ran while an async
    /// copy ran (seen when the copy is waited for). 2 or more shows work that
    /// was in flight concurrently.
    ExpectConcurrent(u32),
    /// The latest allocation of a role landed in that memory type (or one of
    /// those), with those flags (or with some set and some not), after that
    /// many candidate types had no room. `has` and `lacks` state a rule over
    /// every table at once: readback staging `lacks: [DEVICE_LOCAL]`.
    ExpectMemory {
        /// The role of the allocation.
        #[schemars(with = "RoleName")]
        role: String,
        /// The memory type index in the allocator's table, or a list of the
        /// indices that are right.
        #[serde(default, rename = "type")]
        memory_type: Option<TypeWant>,
        /// The memory type's property flags, exactly.
        #[serde(default)]
        #[schemars(with = "Option<Vec<FlagName>>")]
        flags: Option<Vec<String>>,
        /// Property flags the memory type must have (others may be set too).
        #[serde(default)]
        #[schemars(with = "Option<Vec<FlagName>>")]
        has: Option<Vec<String>>,
        /// Property flags the memory type must not have.
        #[serde(default)]
        #[schemars(with = "Option<Vec<FlagName>>")]
        lacks: Option<Vec<String>>,
        /// How many candidate types had no room before it.
        #[serde(default)]
        fallbacks: Option<u32>,
    },
}

/// A checked check step; buffers are slots.
#[derive(Clone, Debug)]
pub enum Op {
    Expect {
        buffer: usize,
        value: Expr,
        /// (min, extent) of the box to check; None checks every element.
        region: Option<(Vec<i64>, Vec<i64>)>,
    },
    ExpectFlags {
        buffer: usize,
        host_dirty: Option<bool>,
        device_dirty: Option<bool>,
        has_device: Option<bool>,
    },
    ExpectCounters(Vec<(String, CounterWant)>),
    ExpectConcurrent(u32),
    ExpectMemory {
        role: Role,
        memory_type: Option<Vec<u32>>,
        flags: Option<(MemoryPropertyFlags, String)>,
        has: Option<(MemoryPropertyFlags, String)>,
        lacks: Option<(MemoryPropertyFlags, String)>,
        fallbacks: Option<u32>,
    },
}

/// `expect_memory`'s `type`: one index, or the list of those that are right.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "a memory type index (a whole number), or a list of them"
)]
pub enum TypeWant {
    /// This type.
    One(u32),
    /// Any of these.
    Any(Vec<u32>),
}

pub fn plan(step: &Step, p: &mut Planner) -> Result<Op, CaseError> {
    Ok(match step {
        Step::Expect {
            buffer,
            value,
            min,
            extent,
        } => {
            let b = p.buf(buffer)?;
            let n = p.slots[b].dims.len();
            let region = match (min, extent) {
                (None, None) => None,
                (Some(m), Some(e)) => {
                    let (m, e) = (p.ints("min", m, n)?, p.ints("extent", e, n)?);
                    if let Some(x) = e.iter().find(|&&x| x < 0) {
                        return Err(p.err(format!("field extent: {x} is negative")));
                    }
                    // The run refuses a box that misses the buffer; say so at load.
                    for (d, (&lo, &ext)) in p.slots[b].dims.iter().zip(m.iter().zip(&e)) {
                        let hi = lo.saturating_add(ext);
                        let (blo, bhi) = (d.min, d.min.saturating_add(d.extent));
                        if hi.min(bhi) <= lo.max(blo) {
                            return Err(p.err(format!(
                                "the box [{lo}, {hi}) does not meet {}'s [{blo}, {bhi}) in a dimension",
                                p.slots[b].name
                            )));
                        }
                    }
                    Some((m, e))
                }
                _ => return Err(p.err("give both `min` and `extent`, or neither")),
            };
            Op::Expect {
                buffer: b,
                value: p.value("value", b, value)?,
                region,
            }
        }
        Step::ExpectFlags {
            buffer,
            host_dirty,
            device_dirty,
            has_device,
        } => Op::ExpectFlags {
            buffer: p.buf(buffer)?,
            host_dirty: *host_dirty,
            device_dirty: *device_dirty,
            has_device: *has_device,
        },
        Step::ExpectCounters(map) => {
            let names = counter_names();
            if let Some(bad) = map.keys().find(|k| !names.contains(&k.as_str())) {
                let hint = match crate::names::suggest(bad, names)[..] {
                    [one] => format!("did you mean {one}?"),
                    ref some if (2..=4).contains(&some.len()) => {
                        format!("did you mean one of {}?", some.join(", "))
                    }
                    _ => "cases/REFERENCE.md lists the counters (CounterName)".into(),
                };
                return Err(p.err(format!("unknown counter '{bad}'; {hint}")));
            }
            if let Some((name, w)) = map.iter().find(|(_, w)| !w.can_hold()) {
                return Err(p.err(format!(
                    "counter {name}: {w} holds for no value; give at_least, at_most or both, with at_least <= at_most"
                )));
            }
            Op::ExpectCounters(map.iter().map(|(k, v)| (k.clone(), *v)).collect())
        }
        Step::ExpectConcurrent(n) => {
            if *n < 1 {
                return Err(p.err("0 submissions at once always holds; give 1 or more"));
            }
            Op::ExpectConcurrent(*n)
        }
        Step::ExpectMemory {
            role,
            memory_type,
            flags,
            has,
            lacks,
            fallbacks,
        } => {
            let role: Role = role.parse().map_err(|_| {
                p.err(format!(
                    "field role: '{role}' is not readback, upload or device"
                ))
            })?;
            let parse = |field: &str, names: &Option<Vec<String>>| match names {
                None => Ok(None),
                Some(names) if names.is_empty() && field != "flags" => Err(p.err(format!(
                    "field {field}: an empty list holds always; name a flag"
                ))),
                Some(names) => {
                    let mut all = MemoryPropertyFlags::empty();
                    for f in names {
                        all |= parse_property_flag(f).ok_or_else(|| {
                            p.err(format!("field {field}: unknown memory property flag '{f}'"))
                        })?;
                    }
                    Ok(Some((all, names.join("|"))))
                }
            };
            let (flags, has, lacks) = (
                parse("flags", flags)?,
                parse("has", has)?,
                parse("lacks", lacks)?,
            );
            if let (Some((h, _)), Some((l, _))) = (&has, &lacks) {
                if h.intersects(*l) {
                    return Err(p.err(format!(
                        "field lacks: {} is also in has; no memory type can hold both",
                        property_flags_name(*h & *l)
                    )));
                }
            }
            let memory_type = match memory_type {
                None => None,
                Some(TypeWant::One(t)) => Some(vec![*t]),
                Some(TypeWant::Any(list)) if list.is_empty() => {
                    return Err(
                        p.err("field type: an empty list holds for no type; give one or more")
                    )
                }
                Some(TypeWant::Any(list)) => Some(list.clone()),
            };
            if memory_type.is_none()
                && flags.is_none()
                && has.is_none()
                && lacks.is_none()
                && fallbacks.is_none()
            {
                return Err(p.err("give `type`, `flags`, `has`, `lacks` or `fallbacks`"));
            }
            Op::ExpectMemory {
                role,
                memory_type,
                flags,
                has,
                lacks,
                fallbacks: *fallbacks,
            }
        }
    })
}

/// What the step needs beyond the primitives of every runtime.
pub fn needs(op: &Op) -> Option<Capability> {
    match op {
        Op::Expect { .. } | Op::ExpectFlags { .. } | Op::ExpectMemory { .. } => None,
        Op::ExpectCounters(want) => want
            .iter()
            .all(|(n, _)| !SHARED_COUNTERS.contains(&n.as_str()))
            .then_some(Capability::OwnCounters),
        Op::ExpectConcurrent(_) => Some(Capability::WorkInFlight),
    }
}

pub fn run<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    match op {
        Op::Expect {
            buffer,
            value,
            region,
        } => expect_in(rt.host(*buffer)?, value, region.as_ref()),
        Op::ExpectFlags {
            buffer,
            host_dirty,
            device_dirty,
            has_device,
        } => {
            let f = rt.flags(*buffer)?;
            let got = [f.host_dirty, f.device_dirty, f.has_device];
            flags_as_expected(
                &rt.slot_name(*buffer),
                [*host_dirty, *device_dirty, *has_device],
                got,
            )
            .map_err(StepError::Check)
        }
        Op::ExpectCounters(want) => {
            // A counter without a meaning on this runtime is left out.
            counters_as_expected(want, |name| rt.counter(name)).map_err(StepError::Check)
        }
        Op::ExpectConcurrent(want) => {
            let work = rt
                .work_in_flight()
                .ok_or_else(|| crate::runtime::lacks(Capability::WorkInFlight))?;
            // An async copy that ran while a step of this case worked is two at once.
            let got = work.peak.max(if work.overlapped > 0 { 2 } else { 1 });
            if got >= u64::from(*want) {
                return Ok(());
            }
            Err(StepError::Check(format!(
                "at most {got} piece(s) of work in flight at once \
                 (of {} so far; no async copy ran while a step worked), expected {want}",
                work.created
            )))
        }
        Op::ExpectMemory {
            role,
            memory_type,
            flags,
            has,
            lacks,
            fallbacks,
        } => expect_memory(
            rt,
            *role,
            MemoryWant {
                types: memory_type.as_deref(),
                flags: flags.as_ref(),
                has: has.as_ref(),
                lacks: lacks.as_ref(),
                fallbacks: *fallbacks,
            },
        ),
    }
}

/// What `expect_counters` wants of one counter: a value, or bounds, so that
/// "does not grow" is written without a figure read off one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(
    untagged,
    expecting = "a counter's value (a whole number), or bounds { at_least: N, at_most: M }"
)]
pub enum CounterWant {
    /// Exactly this value.
    Exactly(u64),
    /// Within these bounds (either may be left out).
    Within(Bounds),
}

/// `{ at_least: N, at_most: M }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bounds {
    /// The least value allowed.
    #[serde(default)]
    pub at_least: Option<u64>,
    /// The largest value allowed.
    #[serde(default)]
    pub at_most: Option<u64>,
}

impl CounterWant {
    /// Whether `got` is wanted.
    pub fn holds(self, got: u64) -> bool {
        match self {
            CounterWant::Exactly(v) => got == v,
            CounterWant::Within(b) => {
                b.at_least.is_none_or(|l| got >= l) && b.at_most.is_none_or(|m| got <= m)
            }
        }
    }

    /// Whether some value is wanted, and a bound is given.
    fn can_hold(self) -> bool {
        match self {
            CounterWant::Exactly(_) => true,
            CounterWant::Within(Bounds { at_least, at_most }) => {
                (at_least.is_some() || at_most.is_some())
                    && at_least.unwrap_or(0) <= at_most.unwrap_or(u64::MAX)
            }
        }
    }
}

impl std::fmt::Display for CounterWant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CounterWant::Exactly(v) => write!(f, "{v}"),
            CounterWant::Within(Bounds { at_least, at_most }) => match (at_least, at_most) {
                (Some(l), Some(m)) => write!(f, "from {l} to {m}"),
                (Some(l), None) => write!(f, "at least {l}"),
                (None, Some(m)) => write!(f, "at most {m}"),
                (None, None) => write!(f, "an empty bound"),
            },
        }
    }
}

impl JsonSchema for CounterWant {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CounterWant".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let bounds = g.subschema_for::<Bounds>();
        schemars::json_schema!({
            "description": "A counter's value, or bounds on it: `{ at_most: 2 }`, `{ at_least: 1, at_most: 4 }`.",
            "anyOf": [
                { "type": "integer", "minimum": 0, "description": "Exactly this value." },
                bounds
            ],
        })
    }
}

/// Counters of `expect_counters` and what each must be.
pub struct Counters;

impl JsonSchema for Counters {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Counters".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let keys = g.subschema_for::<CounterName>();
        let values = g.subschema_for::<CounterWant>();
        schemars::json_schema!({
            "type": "object",
            "description": "Context counters and the values they must have, or bounds on them.",
            "propertyNames": keys,
            "additionalProperties": values,
        })
    }
}

/// `expect_counters`: each wanted counter against `got(name)`; a counter for
/// which `got` has no value (None) is left out, on a runtime where it has no meaning.
pub fn counters_as_expected(
    want: &[(String, CounterWant)],
    got: impl Fn(&str) -> Option<u64>,
) -> Result<(), String> {
    let wrong: Vec<String> = want
        .iter()
        .filter_map(|(name, w)| {
            let g = got(name)?;
            (!w.holds(g)).then(|| format!("{name} is {g}, expected {w}"))
        })
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    Err(wrong.join(", "))
}

/// `expect_flags`: `got` (host_dirty, device_dirty, has_device) against what
/// the step asks for, on any runtime.
pub fn flags_as_expected(
    name: &str,
    want: [Option<bool>; 3],
    got: [bool; 3],
) -> Result<(), String> {
    let wrong: Vec<String> = ["host_dirty", "device_dirty", "has_device"]
        .iter()
        .zip(want.iter().zip(got))
        .filter(|(_, (w, g))| w.is_some_and(|w| w != *g))
        .map(|(what, (_, g))| format!("{what} is {g}, expected {}", !g))
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    Err(format!("{name}: {}", wrong.join(", ")))
}

/// Checks the host values of `whole` (within `region`, clipped to it) against `value`.
pub fn expect_in(
    whole: &Buffer,
    value: &Expr,
    region: Option<&(Vec<i64>, Vec<i64>)>,
) -> Result<(), StepError> {
    let part;
    let b = match region {
        None => whole,
        Some((min, extent)) => {
            // The box clipped to the buffer, as a host view.
            let (mut lo, mut ext) = (Vec::new(), Vec::new());
            for (d, (&m, &e)) in whole.dims().iter().zip(min.iter().zip(extent)) {
                let a = m.max(d.min);
                let b = m.saturating_add(e).min(d.min + d.extent);
                if b <= a {
                    return Err(StepError::Check(format!(
                        "{}: the box [{m}, {}) does not meet the buffer's [{}, {}) in a dimension",
                        whole.name(),
                        m.saturating_add(e),
                        d.min,
                        d.min + d.extent
                    )));
                }
                lo.push(a);
                ext.push(b - a);
            }
            part = whole.cropped(whole.name(), &lo, &ext)?;
            &part
        }
    };
    let f = value.compile();
    let distinct = super::aliased::distinct_part(b, value)?;
    let (cmp, repeats) = match &distinct {
        Some((part, repeats)) => (part.compare(|c| f.eval(c), 5)?, *repeats),
        None => (b.compare(|c| f.eval(c), 5)?, 1),
    };
    if cmp.mismatches == 0 {
        return Ok(());
    }
    let shown: Vec<String> = cmp
        .first
        .iter()
        .map(|m| format!("{:?}: expected {}, got {}", m.coords, m.expected, m.actual))
        .collect();
    let checked = distinct.as_ref().map_or(b, |(part, _)| part);
    let (mut min, mut extent) = mismatch_box(checked, |c| f.eval(c));
    // A dimension cut to one coordinate stands for all of them: a wrong
    // element there is wrong at every coordinate of the dimension.
    for (d, (whole, cut)) in b.dims().iter().zip(checked.dims()).enumerate() {
        if whole.extent != cut.extent {
            (min[d], extent[d]) = (whole.min, whole.extent);
        }
    }
    Err(StepError::Check(format!(
        "{}: {} of {} elements differ from '{value}', all within the box min {min:?} extent {extent:?}; first: {}",
        b.name(),
        cmp.mismatches.saturating_mul(repeats),
        b.len(),
        shown.join("; ")
    )))
}

/// The smallest box (min and extent per dimension) holding every element of
/// `b` whose host value is not `want(coords)`; extents 0 when none differs.
fn mismatch_box(b: &Buffer, mut want: impl FnMut(&[i64]) -> i64) -> (Vec<i64>, Vec<i64>) {
    let elem = b.elem();
    let mut lo: Vec<i64> = Vec::new();
    let mut hi: Vec<i64> = Vec::new();
    // Only after a failed check, so a second pass over the elements costs
    // nothing on the passing path.
    b.for_each_element(|c, _| {
        let differs = b.get(c).is_ok_and(|got| !elem.equals(got, want(c)));
        if !differs {
            return;
        }
        if lo.is_empty() {
            (lo, hi) = (c.to_vec(), c.to_vec());
        }
        for (d, &x) in c.iter().enumerate() {
            lo[d] = lo[d].min(x);
            hi[d] = hi[d].max(x);
        }
    });
    if lo.is_empty() {
        let mins = b.dims().iter().map(|d| d.min).collect();
        return (mins, vec![0; b.dims().len()]);
    }
    let extent = lo.iter().zip(&hi).map(|(l, h)| h - l + 1).collect();
    (lo, extent)
}

/// The last placement answering `role` ([`role_answers`]) against what the
/// step asks, on any runtime.
/// What `expect_memory` holds the latest placement of a role to.
struct MemoryWant<'w> {
    types: Option<&'w [u32]>,
    flags: Option<&'w (MemoryPropertyFlags, String)>,
    has: Option<&'w (MemoryPropertyFlags, String)>,
    lacks: Option<&'w (MemoryPropertyFlags, String)>,
    fallbacks: Option<u32>,
}

fn expect_memory<'a>(
    rt: &dyn Runtime<'a>,
    role: Role,
    want: MemoryWant<'_>,
) -> Result<(), StepError> {
    let placements = rt.placements();
    let p = placements
        .iter()
        .rev()
        .find(|p| role_answers(role, &p.role))
        .ok_or_else(|| format!("no {role} allocation was made"))?;
    let landed = rt.describe_type(p.memory_type);
    if let Some(types) = want.types.filter(|t| !t.contains(&p.memory_type)) {
        let expected: Vec<String> = types.iter().map(|t| rt.describe_type(*t)).collect();
        return Err(StepError::Check(format!(
            "{role} landed in {landed}, expected {} ({})",
            expected.join(" or "),
            rt.chooser()
        )));
    }
    if let Some(f) = want.fallbacks.filter(|f| *f != p.fallbacks) {
        return Err(StepError::Check(format!(
            "{role} landed in {landed} after {} fallback(s), expected {f}",
            p.fallbacks
        )));
    }
    if let Some((flags, names)) = want.flags {
        if property_flags_name(*flags) != p.flags {
            return Err(StepError::Check(format!(
                "{role} landed in {landed}, expected flags {names}"
            )));
        }
    }
    let got = p
        .flags
        .split('|')
        .filter_map(parse_property_flag)
        .fold(MemoryPropertyFlags::empty(), |a, f| a | f);
    if let Some((has, names)) = want.has {
        if !got.contains(*has) {
            return Err(StepError::Check(format!(
                "{role} landed in {landed}, which lacks {} (the case asks for has: {names})",
                property_flags_name(*has & !got)
            )));
        }
    }
    if let Some((lacks, names)) = want.lacks {
        if got.intersects(*lacks) {
            return Err(StepError::Check(format!(
                "{role} landed in {landed}, which has {} (the case asks for lacks: {names})",
                property_flags_name(*lacks & got)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Bounds, CounterWant};

    #[test]
    fn a_counter_is_held_to_a_value_or_to_bounds() {
        let within = |at_least, at_most| CounterWant::Within(Bounds { at_least, at_most });
        assert!(CounterWant::Exactly(3).holds(3));
        assert!(!CounterWant::Exactly(3).holds(4));
        assert!(within(None, Some(2)).holds(2));
        assert!(!within(None, Some(2)).holds(3));
        assert!(within(Some(1), Some(4)).holds(1));
        assert!(!within(Some(1), Some(4)).holds(0));
        assert!(within(Some(1), None).holds(u64::MAX));
        assert_eq!(within(Some(1), Some(4)).to_string(), "from 1 to 4");
        assert_eq!(within(None, Some(2)).to_string(), "at most 2");
        assert!(!within(None, None).can_hold());
        assert!(!within(Some(3), Some(2)).can_hold());
        assert!(within(Some(2), Some(2)).can_hold());
    }
}
