//! A test hook that makes a worker misbehave on chosen cases, so that the
//! runner's `crash`, `timeout` and `flake` handling can be tested through the
//! real binary. Built into debug builds (what `cargo test` builds) and into any
//! build with the feature `test-hook`; other builds ignore the variable
//! ([`BUILT`] says which).
//!
//! `VKCOPY_SUITE_TEST_HOOK=ACTION:GLOB[,ACTION:GLOB...]`, ACTION one of `panic`,
//! `abort`, `hang` (sleeps for a day), `flake` (the first attempt in the worker
//! fails, later ones run the case), `lose_device` (with the feature
//! `fault-injection`: every `vkQueueSubmit` of the case returns
//! `VK_ERROR_DEVICE_LOST`, through the runtime's fault hook).

use crate::outcome::Outcome;

/// The variable's name.
pub const VAR: &str = "VKCOPY_SUITE_TEST_HOOK";

/// Whether this build reads [`VAR`].
pub const BUILT: bool = cfg!(any(debug_assertions, feature = "test-hook"));

/// What the hook does for the case `name` before it runs: nothing (`None`), a
/// failed outcome, or it panics, aborts or hangs.
pub fn before(name: &str) -> Option<Outcome> {
    if !BUILT {
        return None;
    }
    let spec = std::env::var(VAR).ok()?;
    let action = spec.split(',').find_map(|rule| {
        let (action, glob) = rule.split_once(':')?;
        vkcopy_engine::discover::name_matches(glob.trim(), name).then(|| action.trim().to_owned())
    })?;
    match action.as_str() {
        "panic" => panic!("{VAR}: a panic in {name}"),
        "abort" => {
            eprintln!("{VAR}: aborting in {name}");
            std::process::abort()
        }
        "hang" => {
            eprintln!("{VAR}: hanging in {name}");
            std::thread::sleep(std::time::Duration::from_secs(86400));
            None
        }
        "flake" => {
            static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
            let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
            if seen.iter().any(|n| n == name) {
                return None;
            }
            seen.push(name.to_owned());
            Some(Outcome::failed(format!(
                "{VAR}: the first attempt of {name} fails"
            )))
        }
        #[cfg(feature = "fault-injection")]
        "lose_device" => match vkcopy::fault::inject("vkQueueSubmit@1+=ERROR_DEVICE_LOST") {
            Ok(()) => None,
            Err(e) => Some(Outcome::failed(format!("{VAR}: {e}"))),
        },
        other => Some(Outcome::failed(format!(
            "{VAR}: unknown action '{other}' (panic, abort, hang, flake; lose_device with the feature fault-injection)"
        ))),
    }
}

/// Undoes what [`before`] set up for the case that just ran.
pub fn after() {
    #[cfg(feature = "fault-injection")]
    vkcopy::fault::clear();
}
