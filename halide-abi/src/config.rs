//! The settings Halide's Vulkan runtime takes before its context is made:
//! `halide_vulkan_set_*` / `get_*`, each falling back to its environment
//! variable (`HL_VK_LAYERS`, `HL_VK_EXTENSIONS`, `HL_VK_DEVICE_TYPE`,
//! `HL_VK_BUILD_OPTIONS`, `HL_VK_ALLOC_CONFIG`), as Halide's do; and vkcopy's
//! own (`VKCOPY_*`), which a host may set in place of the environment.

use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::sync::Mutex;

/// One setting: the value set, or the environment's, as a C string that stays
/// valid until the next set (Halide's getters return such pointers).
pub(crate) struct Setting {
    env: &'static str,
    value: Mutex<Option<CString>>,
}

impl Setting {
    const fn new(env: &'static str) -> Self {
        Setting {
            env,
            value: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<CString>> {
        self.value.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `set_*`: a null pointer goes back to the environment.
    ///
    /// # Safety
    /// `value` is null or a NUL-terminated string.
    pub(crate) unsafe fn set(&self, value: *const c_char) {
        *self.lock() = (!value.is_null())
            // SAFETY: the caller's promise.
            .then(|| unsafe { CStr::from_ptr(value) }.to_owned());
    }

    /// `get_*`: the value set, else the environment's, else null. The pointer
    /// stays valid until the setting is set again.
    pub(crate) fn get_ptr(&self) -> *const c_char {
        let mut v = self.lock();
        if v.is_none() {
            *v = std::env::var(self.env)
                .ok()
                .and_then(|s| CString::new(s).ok());
        }
        v.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())
    }

    /// The value as text, if any.
    pub(crate) fn get(&self) -> Option<String> {
        let p = self.get_ptr();
        // SAFETY: `get_ptr` returns null or a string this setting owns; it is
        // copied before another set could free it (sets and gets of one
        // setting are not expected to race, as in Halide).
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

pub(crate) static LAYERS: Setting = Setting::new("HL_VK_LAYERS");
pub(crate) static EXTENSIONS: Setting = Setting::new("HL_VK_EXTENSIONS");
pub(crate) static DEVICE_TYPE: Setting = Setting::new("HL_VK_DEVICE_TYPE");
pub(crate) static BUILD_OPTIONS: Setting = Setting::new("HL_VK_BUILD_OPTIONS");
pub(crate) static ALLOC_CONFIG: Setting = Setting::new("HL_VK_ALLOC_CONFIG");

/// Names in a list Halide separates with `:` or `;`.
pub(crate) fn names(list: &str) -> impl Iterator<Item = &str> {
    list.split([':', ';', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// vkcopy's variables a host cannot set here, and why.
pub(crate) const NOT_SET_HERE: [(&str, &str); 2] = [
    (
        "VKCOPY_VALIDATION",
        "the library puts the validation layer on as Halide's runtime does, by HL_VK_LAYERS (halide_vulkan_set_layer_names)",
    ),
    (
        "VKCOPY_FAULTS",
        "read from the process's environment when a context is made",
    ),
];

/// vkcopy's settings a host gave (`vkcopy_halide_set_setting`), over the
/// environment's, read when a context is made.
static VKCOPY: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

/// Sets `name`, one of vkcopy's variables, to `value` for contexts made from
/// now on; `None` goes back to the environment's.
pub(crate) fn set_vkcopy(name: &str, value: Option<&str>) -> Result<(), String> {
    if !vkcopy::ENVIRONMENT.iter().any(|(n, _)| *n == name) {
        return Err(format!("{name}: not one of vkcopy's settings"));
    }
    if let Some(why) = NOT_SET_HERE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, w)| w)
    {
        return Err(format!("{name}: {why}"));
    }
    let mut all = VKCOPY.lock().unwrap_or_else(|p| p.into_inner());
    let all = all.get_or_insert_with(HashMap::new);
    match value {
        Some(v) => all.insert(name.to_owned(), v.to_owned()),
        None => all.remove(name),
    };
    Ok(())
}

/// vkcopy's variable `name`: the value a host set, else the environment's.
pub(crate) fn vkcopy_setting(name: &str) -> Option<String> {
    let all = VKCOPY.lock().unwrap_or_else(|p| p.into_inner());
    match all.as_ref().and_then(|a| a.get(name)) {
        Some(v) => Some(v.clone()),
        None => std::env::var(name).ok(),
    }
}
