//! Steps that hold steps: `repeat` (a loop with a variable), `when` (steps that
//! run only for some values of the loop variables) and `expect_error`. They are
//! expanded while planning, so a running case only sees the steps they hold.

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::error::CaseError;
use crate::steps::bind::Int;
use crate::steps::planner::{Planner, MAX_STEPS};

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

/// The control steps as written; `S` is a step of any family.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step<S> {
    /// Plans `steps` once for each value of `var` from `from` up to `to`, `to`
    /// excluded.
    Repeat(Repeat<S>),
    /// Plans `steps` when `cond`, an expression of loop variables, is not 0.
    When(When<S>),
    /// Runs `step`, which must fail with the named error.
    ExpectError {
        error: String,
        step: Box<Spanned<S>>,
    },
}

/// `repeat: { var: t, from: 0, to: 256, steps: [...] }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat<S> {
    pub var: String,
    pub from: Int,
    pub to: Int,
    pub steps: Vec<Spanned<S>>,
}

/// `when: { cond: "t >= 3", steps: [...] }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When<S> {
    pub cond: Int,
    pub steps: Vec<Spanned<S>>,
}

/// The values a repeat's variable takes.
pub fn range<S>(r: &Repeat<S>, p: &Planner) -> Result<std::ops::Range<i64>, CaseError> {
    p.loops
        .check_new(&r.var)
        .map_err(|e| p.err(format!("field var: {e}")))?;
    let (from, to) = (p.int("from", &r.from)?, p.int("to", &r.to)?);
    if to.saturating_sub(from) > MAX_STEPS as i64 {
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
    if EXPECTABLE_ERRORS.contains(&error) {
        return Ok(());
    }
    Err(p.err(format!(
        "field error: unknown error '{error}'; expected one of {EXPECTABLE_ERRORS:?}"
    )))
}
