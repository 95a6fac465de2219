//! The runtime under test as a value: resolved once (by the command line, or
//! from `VKCOPY_RUNTIME` under `cargo test`) and handed to every case. It says
//! which runtime it is, what it can do, and how a case opens it. vkcopy's own
//! API is opened by the engine; any other runtime brings its own opener (the
//! Halide harness does for a library of Halide's ABI).

use std::fmt;
use std::sync::Arc;

use super::{Capability, Choice, Runtime};
use crate::rt::ContextOptions;

/// Why a runtime could not be opened for a case: the runtime's own error.
pub type OpenError = Box<dyn std::error::Error + Send + Sync>;

/// Opens a case's runtime under the case's options, with its slots named.
pub type Open = Arc<
    dyn Fn(&ContextOptions, Vec<String>) -> Result<Box<dyn Runtime<'static>>, OpenError>
        + Send
        + Sync,
>;

/// The runtime under test.
#[derive(Clone)]
pub struct Target {
    choice: Choice,
    capabilities: &'static [Capability],
    open: Option<Open>,
    one_case_per_process: bool,
    lacking: &'static str,
}

impl Target {
    /// vkcopy's own API: every capability, a fresh context per case.
    pub fn vkcopy() -> Target {
        Target {
            choice: Choice::Vkcopy,
            capabilities: &Capability::ALL,
            open: None,
            one_case_per_process: false,
            lacking: "vkcopy lacks it",
        }
    }

    /// Another runtime, named by `choice` (how workers are told it), with
    /// what it can do beyond the primitives, why it lacks the rest (a skipped
    /// case says it), and how a case opens it.
    pub fn new(
        choice: Choice,
        capabilities: &'static [Capability],
        lacking: &'static str,
        open: Open,
    ) -> Target {
        Target {
            choice,
            capabilities,
            open: Some(open),
            one_case_per_process: false,
            lacking,
        }
    }

    /// The same runtime, run one case per worker process: for one that keeps
    /// its state in process globals, which a case may leave behind.
    pub fn one_case_per_process(self) -> Target {
        Target {
            one_case_per_process: true,
            ..self
        }
    }

    /// Which runtime: its command-line form, label and kind.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// What it can do beyond the primitives every runtime has.
    pub fn capabilities(&self) -> &'static [Capability] {
        self.capabilities
    }

    /// Why it lacks a capability it does not have, as a skipped case says.
    pub fn lacking(&self) -> &'static str {
        self.lacking
    }

    /// Whether each case gets a worker process of its own.
    pub fn fresh_worker_per_case(&self) -> bool {
        self.one_case_per_process
    }

    /// The short name reports, run folders and expectation files use:
    /// `vkcopy`, or `halide-` and the library's release or file stem.
    pub fn label(&self) -> String {
        self.choice.label()
    }

    /// Whether the run's policy (`--policy`) places its memory and picks its
    /// expectation layers: vkcopy's own API. Any other runtime is judged by
    /// its own expectations, also a library that takes vkcopy's settings
    /// (whose cases set their own `policy:`).
    pub fn takes_policy(&self) -> bool {
        self.open.is_none()
    }

    /// A runtime other than vkcopy's own API has its own known failures, in
    /// this file of `reports/expectations/`, read alone.
    pub fn own_expectations(&self) -> Option<String> {
        (!self.takes_policy()).then(|| format!("runtime-{}.yaml", self.label()))
    }

    /// What a report's `policy` field says: `policy` on vkcopy's own API, else
    /// `halide-runtime-` and the library's name.
    pub fn report_policy(&self, policy: impl std::fmt::Display) -> String {
        match self.choice.halide_name() {
            Some(name) => format!("halide-runtime-{name}"),
            None => policy.to_string(),
        }
    }

    /// How a case opens it; `None` for vkcopy's own API.
    pub(crate) fn opener(&self) -> Option<&Open> {
        self.open.as_ref()
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("choice", &self.choice)
            .field("capabilities", &self.capabilities)
            .finish()
    }
}

impl Default for Target {
    fn default() -> Target {
        Target::vkcopy()
    }
}
