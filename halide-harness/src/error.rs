//! Why Halide's runtime could not be loaded, given vkcopy's settings, or
//! opened for a case.

/// Why Halide's runtime could not be loaded or opened; every variant says what
/// it is about. Cloned, as a process keeps the outcome of its one load.
#[derive(Clone, Debug, thiserror::Error)]
pub enum HarnessError {
    /// The library could not be loaded.
    #[error("cannot load Halide's runtime {path}: {why}")]
    Load {
        /// The library.
        path: String,
        /// What the dynamic loader said.
        why: String,
    },
    /// The library lacks an entry point of Halide's ABI.
    #[error("{path}: no {symbol}: {why}")]
    Symbol {
        /// The library.
        path: String,
        /// The entry point.
        symbol: &'static str,
        /// What the dynamic loader said.
        why: String,
    },
    /// The process already runs another runtime: Halide's state is global.
    #[error("this process already runs Halide's runtime from {loaded}; one runtime per process")]
    OtherRuntime {
        /// The library loaded first.
        loaded: String,
    },
    /// A setting of vkcopy's that the library cannot take.
    #[error("{what}")]
    Setting {
        /// The setting and why.
        what: String,
    },
    /// What a case asks of the runtime that Halide's cannot do.
    #[error("{0}")]
    Refused(String),
}
