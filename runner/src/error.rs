//! Why a run could not start or go on: each error says what to fix.

/// Why a run could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// vkcopy refused the run's settings (`VKCOPY_DEVICE`,
    /// `VKCOPY_ALLOC_CONFIG`, ...).
    #[error(transparent)]
    Settings(#[from] vkcopy_engine::rt::Error),
    /// A file the run reads is wrong: a case, a table, an expectation file,
    /// each error located (`file:line:col: what`).
    #[error("{0}")]
    Input(String),
    /// The selection holds no case.
    #[error("{0}")]
    NoCase(String),
    /// The runtime named cannot be used.
    #[error("{0}")]
    Runtime(String),
    /// The device opened is not the one the run expects.
    #[error("expected device '{want}', but {found}")]
    WrongDevice {
        /// The device asked for (`--expect-device`).
        want: String,
        /// What was opened instead, or why none was.
        found: String,
    },
    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: std::path::PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A case file that `new` would overwrite.
    #[error("{} exists; not overwriting it", path.display())]
    Exists {
        /// The case file.
        path: std::path::PathBuf,
    },
    /// A worker process could not be started, or its pipes failed.
    #[error("{what}: {source}")]
    Worker {
        /// What was being done.
        what: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}
