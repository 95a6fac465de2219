//! The driver's floor (`vkcopy::floor`) on the real default device: a bare
//! copy timed on every queue family, on a device of its own beside the
//! context's, under the validation layer where the tests run with it.

use vkcopy::floor::{fastest, Floor};
use vkcopy::{ContextOptions, CopyPath};

mod common;

use common::{assert_clean, context};

#[test]
fn a_floor_times_every_family_that_copies_on_every_path() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let floor = Floor::new(&ctx).unwrap();
    let families = floor.families().to_vec();
    assert!(!families.is_empty());
    for path in [
        CopyPath::HostToDevice,
        CopyPath::DeviceToHost,
        CopyPath::DeviceToDevice,
    ] {
        for bytes in [4096, 1 << 20] {
            let times = floor.measure(path, bytes, 5).unwrap();
            let seen: Vec<u32> = times.iter().map(|t| t.family).collect();
            let asked: Vec<u32> = families.iter().map(|f| f.0).collect();
            assert_eq!(seen, asked, "{path:?} {bytes}");
            for t in &times {
                assert!(t.best > std::time::Duration::ZERO, "{t:?}");
                assert!(t.best <= t.median, "{t:?}");
            }
            let best = fastest(&times).unwrap();
            assert!(times.iter().all(|t| best.best <= t.best));
        }
    }
    drop(floor);
    // Its device is its own: nothing of the context's was used or left.
    assert_clean(&ctx);
}

#[test]
fn a_floor_refuses_what_is_no_copy_of_the_device() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let floor = Floor::new(&ctx).unwrap();
    for (path, bytes, runs) in [
        (CopyPath::HostToHost, 4096, 5),
        (CopyPath::DeviceToDevice, 0, 5),
        (CopyPath::DeviceToDevice, 4096, 0),
    ] {
        let e = floor.measure(path, bytes, runs).unwrap_err();
        assert_eq!(e.name(), "bad_dimensions", "{e}");
    }
    drop(floor);
    assert_clean(&ctx);
}
