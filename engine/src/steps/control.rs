//! Steps that hold steps: `repeat` (a loop with a variable), `when` (steps that
//! run only for some values of the loop variables), `expect_error`,
//! `threads` (steps run by several threads at once on the case's context), and
//! `on_runtime` (what a case expects where Halide's generic device layer
//! decides, and where vkcopy does).
//! `repeat` and `when` are expanded while planning, so a running case only sees
//! the steps they hold.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::error::CaseError;
use crate::steps::bind::Int;
use crate::steps::planner::{Planner, MAX_STEPS};
use crate::vocab::{self, ErrorName};

/// The control steps as written; `S` is a step of any family.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "ControlStep")]
pub enum Step<S> {
    /// Plans `steps` once for each value of `var` from `from` up to `to`, `to`
    /// excluded. Without `var` the steps are planned once and run `to - from`
    /// times; they must plan the same way every time (what they make, they
    /// release), which suits long loops.
    Repeat(Repeat<S>),
    /// Plans `steps` when `cond`, an expression of loop variables, is not 0.
    When(When<S>),
    /// Runs `steps` on `count` threads at once, all on the case's one context;
    /// each thread has buffers of its own, made from the case's declarations as
    /// at the start of the case. The step ends when every thread has; the first
    /// failure fails it, naming its thread.
    Threads(Threads<S>),
    /// Runs `halide`'s steps on a runtime reached through Halide's ABI, whose
    /// generic device layer (`device_interface.cpp`) decides what reaches the
    /// runtime (Halide's runtimes and vkcopy's library of the ABI), and
    /// `vkcopy`'s on vkcopy's own: where the two mean different things, the
    /// case states both, and `why`.
    OnRuntime(OnRuntime<S>),
    /// Runs `step`, which must fail with the named error.
    ExpectError {
        /// The error the step must fail with.
        #[schemars(with = "ErrorName")]
        error: String,
        /// The one step that must fail.
        #[schemars(with = "S")]
        step: Box<Spanned<S>>,
    },
}

/// `repeat: { var: t, from: 0, to: 256, steps: [...] }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Repeat")]
pub struct Repeat<S> {
    /// The loop variable: a name that is not a coordinate (x y z w d4..) nor a
    /// word of the expression language. Left out, the steps are planned once
    /// and run once per value.
    #[serde(default)]
    pub var: Option<String>,
    /// The first value.
    pub from: Int,
    /// The value after the last (excluded).
    pub to: Int,
    /// The steps planned once per value; they may use the variable.
    #[schemars(with = "Vec<S>")]
    pub steps: Vec<Spanned<S>>,
}

/// `threads: { count: 6, var: t, steps: [...] }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Threads")]
pub struct Threads<S> {
    /// Threads, 1 to 64.
    pub count: Int,
    /// The thread's index, 0 to `count - 1`, as a loop variable of its steps
    /// (`when` gives threads different work); without it, every thread plans
    /// the same steps.
    #[serde(default)]
    pub var: Option<String>,
    /// The steps of each thread; they may not hold another `threads`.
    #[schemars(with = "Vec<S>")]
    pub steps: Vec<Spanned<S>>,
}

/// Most runs of a `repeat` without a variable.
pub const MAX_RUNS: i64 = 1_000_000;

/// Most threads of a `threads` step.
pub const MAX_THREADS: i64 = 64;

/// The thread count of a `threads` step.
pub fn thread_count<S>(t: &Threads<S>, p: &Planner) -> Result<usize, CaseError> {
    let n = p.int("count", &t.count)?;
    if !(1..=MAX_THREADS).contains(&n) {
        return Err(p.err(format!("field count: {n}; 1 to {MAX_THREADS} threads")));
    }
    Ok(n as usize)
}

/// `when: { cond: "t >= 3", steps: [...] }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "When")]
pub struct When<S> {
    /// An expression of loop variables; the steps apply where it is not 0.
    pub cond: Int,
    /// The steps planned where `cond` holds.
    #[schemars(with = "Vec<S>")]
    pub steps: Vec<Spanned<S>>,
}

/// `on_runtime: { halide: [...], vkcopy: [...], why: "..." }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "OnRuntime")]
pub struct OnRuntime<S> {
    /// The steps where Halide's generic device layer decides; default none.
    #[serde(default = "none::<S>")]
    #[schemars(with = "Vec<S>")]
    pub halide: Vec<Spanned<S>>,
    /// The steps on vkcopy's own runtime; default none.
    #[serde(default = "none::<S>")]
    #[schemars(with = "Vec<S>")]
    pub vkcopy: Vec<Spanned<S>>,
    /// Why the two differ: the behaviour of each, and whose design it is.
    pub why: String,
}

/// No steps: `on_runtime`'s default for a side left out.
fn none<S>() -> Vec<Spanned<S>> {
    Vec::new()
}

/// The values a repeat's variable takes.
pub fn range<S>(r: &Repeat<S>, p: &Planner) -> Result<std::ops::Range<i64>, CaseError> {
    if let Some(var) = &r.var {
        p.loops
            .check_new(var)
            .map_err(|e| p.err(format!("field var: {e}")))?;
    }
    let (from, to) = (p.int("from", &r.from)?, p.int("to", &r.to)?);
    if r.var.is_none() && to.saturating_sub(from) > MAX_RUNS {
        return Err(p.err(format!(
            "{} runs; at most {MAX_RUNS}",
            to.saturating_sub(from)
        )));
    }
    if r.var.is_some() && to.saturating_sub(from) > MAX_STEPS as i64 {
        return Err(p.err(format!(
            "{} iterations; at most {MAX_STEPS}",
            to.saturating_sub(from)
        )));
    }
    Ok(from..to)
}

/// Whether a `when`'s steps apply.
pub fn holds<S>(w: &When<S>, p: &Planner) -> Result<bool, CaseError> {
    Ok(p.int("cond", &w.cond)? != 0)
}

/// Checks the error name of `expect_error`.
pub fn check_error(error: &str, p: &Planner) -> Result<(), CaseError> {
    if vocab::is_expectable(error) {
        return Ok(());
    }
    Err(p.err(format!(
        "field error: unknown error '{error}'; expected one of {:?}",
        vocab::expectable_names()
    )))
}
