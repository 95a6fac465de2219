//! The settings Halide's Vulkan runtime takes before its context is made:
//! `halide_vulkan_set_*` / `get_*`, each falling back to its environment
//! variable (`HL_VK_LAYERS`, `HL_VK_EXTENSIONS`, `HL_VK_DEVICE_TYPE`,
//! `HL_VK_BUILD_OPTIONS`, `HL_VK_ALLOC_CONFIG`), as Halide's do.

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
