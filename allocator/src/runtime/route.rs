//! Routes: how one copy moves its bytes, chosen once before it starts. Uploads
//! and readbacks share one table ([`HostRoutes`]); device-to-device copies take
//! the copy kernel's measured choice (`copy_choice.rs`). Every route has a
//! counter pair, `copies_<path>_<route>` and `bytes_<path>_<route>`, so the
//! counters follow the table. Host-to-host copies have one way only, and no
//! route of their own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::types::CopyPath;

/// Host copies smaller than this go through staging: importing costs an
/// allocation and a buffer, which only pays off for larger copies. A small
/// readback takes an import that exists, and imports host memory under this
/// size that it met before (`Context::imported`).
pub(crate) const IMPORT_MIN_BYTES: u64 = 1 << 20;

/// How the bytes of one copy move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Via {
    /// The GPU copies straight to or from the caller's host memory, imported
    /// (`VK_EXT_external_memory_host`).
    Imported,
    /// Through the reused staging ring, window by window.
    Ring,
    /// Through a staging buffer made for this copy, as Halide does.
    Staged,
    /// The CPU writes straight into host-visible device memory, or reads
    /// straight out of it with streaming loads: no staging, no submission.
    Mapped,
    /// `vkCmdCopyBuffer` between device regions.
    Transfer,
    /// The copy kernel between device regions.
    Shader,
}

impl Via {
    fn name(self) -> &'static str {
        match self {
            Via::Imported => "imported",
            Via::Ring => "ring",
            Via::Staged => "staged",
            Via::Mapped => "mapped",
            Via::Transfer => "transfer",
            Via::Shader => "shader",
        }
    }
}

/// A copy path and how it went: what a copy counts under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Route {
    pub(crate) path: CopyPath,
    pub(crate) via: Via,
}

/// Every route, in counter order.
pub(crate) const ROUTES: [Route; 10] = {
    use CopyPath::*;
    use Via::*;
    const fn r(path: CopyPath, via: Via) -> Route {
        Route { path, via }
    }
    [
        r(HostToDevice, Imported),
        r(HostToDevice, Ring),
        r(HostToDevice, Staged),
        r(HostToDevice, Mapped),
        r(DeviceToHost, Imported),
        r(DeviceToHost, Ring),
        r(DeviceToHost, Staged),
        r(DeviceToHost, Mapped),
        r(DeviceToDevice, Transfer),
        r(DeviceToDevice, Shader),
    ]
};

impl Route {
    fn index(self) -> usize {
        ROUTES
            .iter()
            .position(|r| *r == self)
            .expect("every route made is in ROUTES")
    }

    /// `<path>_<via>`, as in the counters.
    pub(crate) fn name(self) -> String {
        format!("{}_{}", self.path.name(), self.via.name())
    }
}

/// The counter names of the routes: `copies_<route>`, `bytes_<route>` each.
pub(crate) fn counter_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        ROUTES
            .iter()
            .flat_map(|r| {
                [
                    format!("copies_{}", r.name()),
                    format!("bytes_{}", r.name()),
                ]
            })
            .map(|s| &*Box::leak(s.into_boxed_str()))
            .collect()
    })
}

/// Copies and bytes per route.
#[derive(Debug, Default)]
pub(crate) struct RouteCounts {
    copies: [AtomicU64; ROUTES.len()],
    bytes: [AtomicU64; ROUTES.len()],
}

impl RouteCounts {
    pub(crate) fn count(&self, route: Route, bytes: u64) {
        let i = route.index();
        self.copies[i].fetch_add(1, Ordering::Relaxed);
        self.bytes[i].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Copies and bytes of each route of [`ROUTES`], in the order of
    /// [`counter_names`].
    pub(crate) fn values(&self) -> impl Iterator<Item = u64> + '_ {
        (0..ROUTES.len()).flat_map(|i| {
            [
                self.copies[i].load(Ordering::Relaxed),
                self.bytes[i].load(Ordering::Relaxed),
            ]
        })
    }
}

/// What a context offers uploads and readbacks, fixed when it opens; the route
/// of each copy follows from it and the copy's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostRoutes {
    /// Host memory may be imported.
    pub(crate) import: bool,
    /// Staging goes through the ring; else a staging buffer per copy, as Halide
    /// stages (cases about staging placement on recorded tables, and Halide's
    /// staging layout bug, need one staging buffer per copy).
    pub(crate) ring: bool,
    /// Small buffers get host-visible device memory, and uploads into it and
    /// readbacks from it may be made by the CPU ([`Via::Mapped`],
    /// `mapped.rs`).
    pub(crate) mapped: bool,
}

impl HostRoutes {
    /// The route of a copy of `bytes`, in order of preference; an import that
    /// fails falls back to [`HostRoutes::staging`].
    pub(crate) fn choose(&self, bytes: u64) -> Via {
        if self.import && bytes >= IMPORT_MIN_BYTES {
            Via::Imported
        } else {
            self.staging()
        }
    }

    /// How a copy stages.
    pub(crate) fn staging(&self) -> Via {
        if self.ring {
            Via::Ring
        } else {
            Via::Staged
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_copies_import_and_small_ones_stage() {
        let t = HostRoutes {
            import: true,
            ring: true,
            mapped: false,
        };
        assert_eq!(t.choose(IMPORT_MIN_BYTES - 1), Via::Ring);
        assert_eq!(t.choose(IMPORT_MIN_BYTES), Via::Imported);
        let halide = HostRoutes {
            import: false,
            ring: false,
            mapped: false,
        };
        assert_eq!(halide.choose(1 << 30), Via::Staged);
        let no_import = HostRoutes {
            import: false,
            ring: true,
            mapped: false,
        };
        assert_eq!(no_import.choose(1 << 30), Via::Ring);
    }

    #[test]
    fn counter_names_follow_the_routes() {
        let names = counter_names();
        assert_eq!(names.len(), 2 * ROUTES.len());
        assert_eq!(names[0], "copies_to_device_imported");
        assert_eq!(names[1], "bytes_to_device_imported");
        let shader = ROUTES
            .iter()
            .position(|r| r.via == Via::Shader)
            .expect("a shader route");
        assert_eq!(names[2 * shader], "copies_device_to_device_shader");
    }

    #[test]
    fn counts_land_on_their_route() {
        let c = RouteCounts::default();
        let ring = Route {
            path: CopyPath::DeviceToHost,
            via: Via::Ring,
        };
        c.count(ring, 100);
        c.count(ring, 28);
        let values: Vec<u64> = c.values().collect();
        let i = ROUTES.iter().position(|r| *r == ring).expect("ring route");
        assert_eq!((values[2 * i], values[2 * i + 1]), (2, 128));
        assert_eq!(values.iter().sum::<u64>(), 130);
    }
}
