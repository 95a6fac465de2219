//! The runtime under test as a value: resolved once (by the command line, or
//! from `VKCOPY_RUNTIME` under `cargo test`) and handed to every case. It says
//! which runtime it is, what it can do, and how a case opens it. vkcopy's own
//! API is opened by the engine; any other runtime brings its own opener (the
//! Halide harness does for a library of Halide's ABI).

use std::fmt;
use std::sync::Arc;

use super::{Capability, Choice, Runtime};
use crate::rt::ContextOptions;

/// Opens a case's runtime under the case's options, with its slots named.
pub type Open = Arc<
    dyn Fn(&ContextOptions, Vec<String>) -> Result<Box<dyn Runtime<'static>>, String> + Send + Sync,
>;

/// The runtime under test.
#[derive(Clone)]
pub struct Target {
    choice: Choice,
    capabilities: &'static [Capability],
    open: Option<Open>,
}

impl Target {
    /// vkcopy's own API: every capability, a fresh context per case.
    pub fn vkcopy() -> Target {
        Target {
            choice: Choice::Vkcopy,
            capabilities: &Capability::ALL,
            open: None,
        }
    }

    /// Another runtime, named by `choice` (how workers are told it), with
    /// what it can do beyond the primitives and how a case opens it.
    pub fn new(choice: Choice, capabilities: &'static [Capability], open: Open) -> Target {
        Target {
            choice,
            capabilities,
            open: Some(open),
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

impl PartialEq for Target {
    fn eq(&self, other: &Target) -> bool {
        self.choice == other.choice && self.capabilities == other.capabilities
    }
}
