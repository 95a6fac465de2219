//! Known bugs of Halide's Vulkan runtime (`src/runtime/vulkan*.h`,
//! `device_buffer_utils.h`), each of which vkcopy fixes. With the Cargo feature
//! `emulate`, a context can bring one back so that a test suite can prove it
//! catches it; without the feature every check below is a constant `false`.

macro_rules! bugs {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Which Halide bugs a context brings back. All off by default.
        #[cfg(feature = "emulate")]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Emulate {
            $($(#[$doc])* pub $name: bool,)*
        }

        /// No bug can be brought back without the `emulate` feature.
        #[cfg(not(feature = "emulate"))]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub(crate) struct Emulate;

        impl Emulate {
            /// The bug names, as [`Emulate::parse`] takes them.
            #[cfg(feature = "emulate")]
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            $(
                #[allow(dead_code)]
                pub(crate) fn $name(self) -> bool {
                    #[cfg(feature = "emulate")]
                    { self.$name }
                    #[cfg(not(feature = "emulate"))]
                    { false }
                }
            )*

            /// Whether any bug is on.
            pub(crate) fn any(self) -> bool {
                false $(|| self.$name())*
            }

            /// Parses a comma-separated list of bug names (`VKCOPY_EMULATE`).
            #[cfg(feature = "emulate")]
            pub fn parse(s: &str) -> std::result::Result<Emulate, String> {
                let mut e = Emulate::default();
                for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    match name {
                        $(stringify!($name) => e.$name = true,)*
                        _ => return Err(format!(
                            "unknown bug '{name}'; expected one of {}",
                            Self::NAMES.join(", ")
                        )),
                    }
                }
                Ok(e)
            }
        }
    };
}

bugs! {
    /// A crop of a crop is offset from the owner, not from its parent crop
    /// (`create_crop` in `vulkan_memory.h`).
    crop_offset_from_owner,
    /// Staging is written in the destination's layout and read in the source's
    /// (`halide_vulkan_buffer_copy`).
    staging_layout_mismatch,
    /// A copy covers `min(extent)` from the later min instead of the intersection
    /// of the boxes (`make_buffer_copy` in `device_buffer_utils.h`).
    min_extent_copy,
    /// A region's use count starts at 0, so releasing the owner frees memory that a
    /// crop still uses (Halide #9237).
    use_count_zero,
    /// Never flush or invalidate non-coherent mappings (Halide relies on coherence).
    no_flush_invalidate,
}
