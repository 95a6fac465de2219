//! Fault injection for tests (feature `fault-injection`): the Nth call, or every
//! call from the Nth on, of a Vulkan entry point the runtime uses returns a chosen
//! `VkResult` instead of reaching the driver.
//!
//! Faults are given as `ENTRY@N=RESULT` (the Nth call fails) or `ENTRY@N+=RESULT`
//! (the Nth and every later call fail), several separated by commas, e.g.
//! `vkQueueSubmit@3+=ERROR_DEVICE_LOST,vkMapMemory@1=ERROR_MEMORY_MAP_FAILED`.
//! `RESULT` is a `VkResult` name without the `VK_` prefix. Calls are counted per
//! context from its creation, teardown included. A context takes its faults from
//! [`inject`] (contexts created on the calling thread) or else from the
//! environment variable `VKCOPY_FAULTS`, read when the context is created.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::error::{Error, Result};

/// Every Vulkan entry point the runtime calls that returns a `VkResult`: the
/// ones a fault can be injected into.
pub const ENTRY_POINTS: &[&str] = &[
    "vkCreateInstance",
    "vkEnumerateInstanceLayerProperties",
    "vkEnumerateInstanceExtensionProperties",
    "vkEnumeratePhysicalDevices",
    "vkEnumerateDeviceExtensionProperties",
    "vkCreateDevice",
    "vkCreateDebugUtilsMessengerEXT",
    "vkDeviceWaitIdle",
    "vkAllocateMemory",
    "vkMapMemory",
    "vkFlushMappedMemoryRanges",
    "vkInvalidateMappedMemoryRanges",
    "vkBindBufferMemory",
    "vkCreateBuffer",
    "vkCreateCommandPool",
    "vkAllocateCommandBuffers",
    "vkResetCommandBuffer",
    "vkBeginCommandBuffer",
    "vkEndCommandBuffer",
    "vkQueueSubmit",
    "vkCreateSemaphore",
    "vkWaitSemaphores",
    "vkGetSemaphoreCounterValue",
    "vkCreateQueryPool",
    "vkGetQueryPoolResults",
    "vkCreateShaderModule",
    "vkCreateDescriptorSetLayout",
    "vkCreatePipelineLayout",
    "vkCreateComputePipelines",
    "vkCreateDescriptorPool",
    "vkAllocateDescriptorSets",
    "vkGetMemoryHostPointerPropertiesEXT",
];

/// `(name, vk::Result::name)` for each name.
macro_rules! named_results {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), vk::Result::$name)),*]
    };
}

/// The results a fault may return, by their `VkResult` names without `VK_`.
pub const RESULTS: &[(&str, vk::Result)] = named_results![
    ERROR_OUT_OF_HOST_MEMORY,
    ERROR_OUT_OF_DEVICE_MEMORY,
    ERROR_MEMORY_MAP_FAILED,
    ERROR_DEVICE_LOST,
    ERROR_INITIALIZATION_FAILED,
    TIMEOUT,
    ERROR_TOO_MANY_OBJECTS,
    ERROR_OUT_OF_POOL_MEMORY,
    ERROR_FRAGMENTED_POOL,
    ERROR_INVALID_EXTERNAL_HANDLE,
    ERROR_LAYER_NOT_PRESENT,
    ERROR_EXTENSION_NOT_PRESENT,
    ERROR_FEATURE_NOT_PRESENT,
    ERROR_INCOMPATIBLE_DRIVER,
    ERROR_UNKNOWN,
];

/// The position of `name` in [`ENTRY_POINTS`]; fails to compile in const context
/// for a name that is not there.
pub(crate) const fn position(name: &str) -> usize {
    let mut i = 0;
    while i < ENTRY_POINTS.len() {
        let (a, b) = (ENTRY_POINTS[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("not an entry point of fault::ENTRY_POINTS")
}

/// One injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The entry point, one of [`ENTRY_POINTS`].
    pub entry: &'static str,
    /// The call that fails, from 1.
    pub nth: u64,
    /// Every call from the `nth` on fails, not only the `nth`.
    pub onward: bool,
    /// What the failing calls return.
    pub result: vk::Result,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let result = RESULTS
            .iter()
            .find(|(_, r)| *r == self.result)
            .map_or("?", |(n, _)| n);
        let plus = if self.onward { "+" } else { "" };
        write!(f, "{}@{}{plus}={result}", self.entry, self.nth)
    }
}

/// Reads `ENTRY@N=RESULT` / `ENTRY@N+=RESULT` items separated by commas; an
/// empty spec injects nothing.
pub fn parse(spec: &str) -> Result<Vec<Fault>> {
    let bad = |reason: String| Error::BadSetting {
        name: "VKCOPY_FAULTS",
        value: spec.to_owned(),
        reason,
    };
    let mut faults = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (call, result) = item
            .split_once('=')
            .ok_or_else(|| bad(format!("{item}: expected ENTRY@N=RESULT")))?;
        let (entry, nth) = call
            .split_once('@')
            .ok_or_else(|| bad(format!("{item}: expected ENTRY@N=RESULT")))?;
        let entry = ENTRY_POINTS
            .iter()
            .find(|e| **e == entry.trim())
            .ok_or_else(|| {
                bad(format!(
                    "{item}: {entry} is not an entry point the runtime uses; one of {}",
                    ENTRY_POINTS.join(", ")
                ))
            })?;
        let (nth, onward) = match nth.trim().strip_suffix('+') {
            Some(n) => (n, true),
            None => (nth.trim(), false),
        };
        let nth = nth
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad(format!("{item}: the call number must be 1 or more")))?;
        let result = RESULTS
            .iter()
            .find(|(n, _)| *n == result.trim())
            .map(|(_, r)| *r)
            .ok_or_else(|| {
                let names: Vec<_> = RESULTS.iter().map(|(n, _)| *n).collect();
                bad(format!(
                    "{item}: unknown result; one of {}",
                    names.join(", ")
                ))
            })?;
        faults.push(Fault {
            entry,
            nth,
            onward,
            result,
        });
    }
    Ok(faults)
}

/// The faults of one context and its call counts.
pub(crate) struct Plan {
    faults: Vec<(usize, Fault)>,
    calls: Vec<AtomicU64>,
    injected: AtomicU64,
    /// Validation messages given while the context's instance was torn down.
    teardown: Mutex<Vec<String>>,
}

impl Plan {
    fn new(faults: Vec<Fault>) -> Self {
        Plan {
            faults: faults.into_iter().map(|f| (position(f.entry), f)).collect(),
            calls: ENTRY_POINTS.iter().map(|_| AtomicU64::new(0)).collect(),
            injected: AtomicU64::new(0),
            teardown: Mutex::new(Vec::new()),
        }
    }

    /// Keeps the messages left when the context's instance is destroyed.
    pub(crate) fn torn_down(&self, messages: Vec<String>) {
        self.teardown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(messages);
    }

    /// Counts a call of entry point `entry`; the result to return instead of
    /// calling the driver when it is to fail.
    pub(crate) fn call(&self, entry: usize) -> Option<vk::Result> {
        let n = self.calls[entry].fetch_add(1, Ordering::Relaxed) + 1;
        let hit = self
            .faults
            .iter()
            .find(|(e, f)| *e == entry && (n == f.nth || (f.onward && n > f.nth)))?;
        self.injected.fetch_add(1, Ordering::Relaxed);
        Some(hit.1.result)
    }
}

#[derive(Default)]
struct ThreadState {
    /// Faults for contexts created on this thread, from `inject`.
    injected: Option<Vec<Fault>>,
    /// The plan of the last context created on this thread.
    last: Option<Arc<Plan>>,
}

thread_local! {
    static STATE: RefCell<ThreadState> = RefCell::default();
}

/// Contexts created on this thread from now on fail as `spec` says (the syntax
/// of `VKCOPY_FAULTS`, which they then ignore); an empty spec injects nothing
/// but still counts calls.
pub fn inject(spec: &str) -> Result<()> {
    let faults = parse(spec)?;
    STATE.with(|s| s.borrow_mut().injected = Some(faults));
    Ok(())
}

/// Undoes [`inject`]: contexts created on this thread read `VKCOPY_FAULTS` again.
pub fn clear() {
    STATE.with(|s| s.borrow_mut().injected = None);
}

/// Calls of each entry point by the last context created on this thread, from
/// its creation until now (its teardown included once it is gone), in the order
/// of [`ENTRY_POINTS`].
pub fn calls() -> Vec<(&'static str, u64)> {
    STATE.with(|s| match &s.borrow().last {
        Some(p) => ENTRY_POINTS
            .iter()
            .zip(&p.calls)
            .map(|(e, c)| (*e, c.load(Ordering::Relaxed)))
            .collect(),
        None => ENTRY_POINTS.iter().map(|e| (*e, 0)).collect(),
    })
}

/// Calls failed on purpose in the last context created on this thread.
pub fn injected() -> u64 {
    STATE.with(|s| {
        s.borrow()
            .last
            .as_ref()
            .map_or(0, |p| p.injected.load(Ordering::Relaxed))
    })
}

/// Validation messages of the last context created on this thread that were
/// left when its instance was destroyed (leaked objects, among others); empty
/// while it is open. A failed creation counts as a context here.
pub fn teardown_messages() -> Vec<String> {
    STATE.with(|s| {
        s.borrow().last.as_ref().map_or_else(Vec::new, |p| {
            p.teardown.lock().unwrap_or_else(|p| p.into_inner()).clone()
        })
    })
}

/// The plan of a context being created on this thread: `inject`'s faults, else
/// `VKCOPY_FAULTS`'s.
pub(crate) fn plan_for_new_context() -> Result<Arc<Plan>> {
    let injected = STATE.with(|s| s.borrow().injected.clone());
    let faults = match injected {
        Some(f) => f,
        None => parse(&std::env::var("VKCOPY_FAULTS").unwrap_or_default())?,
    };
    let plan = Arc::new(Plan::new(faults));
    STATE.with(|s| s.borrow_mut().last = Some(plan.clone()));
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_onward_faults() {
        let f = parse("vkQueueSubmit@3+=ERROR_DEVICE_LOST, vkMapMemory@1=ERROR_MEMORY_MAP_FAILED")
            .unwrap();
        assert_eq!(
            f,
            vec![
                Fault {
                    entry: "vkQueueSubmit",
                    nth: 3,
                    onward: true,
                    result: vk::Result::ERROR_DEVICE_LOST
                },
                Fault {
                    entry: "vkMapMemory",
                    nth: 1,
                    onward: false,
                    result: vk::Result::ERROR_MEMORY_MAP_FAILED
                },
            ]
        );
        assert_eq!(f[0].to_string(), "vkQueueSubmit@3+=ERROR_DEVICE_LOST");
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn refuses_bad_items_naming_them() {
        for (spec, what) in [
            ("vkFoo@1=TIMEOUT", "vkFoo is not an entry point"),
            ("vkQueueSubmit@0=TIMEOUT", "1 or more"),
            ("vkQueueSubmit@x=TIMEOUT", "1 or more"),
            ("vkQueueSubmit@1=VK_TIMEOUT", "unknown result"),
            ("vkQueueSubmit=TIMEOUT", "expected ENTRY@N=RESULT"),
        ] {
            let e = parse(spec).unwrap_err().to_string();
            assert!(e.contains(what) && e.contains(spec), "{spec}: {e}");
        }
    }

    #[test]
    fn a_plan_fails_the_nth_call_or_every_call_from_it() {
        let p =
            Plan::new(parse("vkQueueSubmit@2=TIMEOUT,vkMapMemory@2+=ERROR_DEVICE_LOST").unwrap());
        let (submit, map) = (position("vkQueueSubmit"), position("vkMapMemory"));
        let submits: Vec<_> = (0..4).map(|_| p.call(submit)).collect();
        assert_eq!(submits, [None, Some(vk::Result::TIMEOUT), None, None]);
        let maps: Vec<_> = (0..4).map(|_| p.call(map)).collect();
        let lost = Some(vk::Result::ERROR_DEVICE_LOST);
        assert_eq!(maps, [None, lost, lost, lost]);
        assert_eq!(p.injected.load(Ordering::Relaxed), 4);
        assert_eq!(p.calls[submit].load(Ordering::Relaxed), 4);
    }
}
