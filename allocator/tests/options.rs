//! Options and the environment: `ContextOptions::default()` reads nothing; only
//! `from_env` does. One test, as it sets process-wide variables.

use vkcopy::{AllocConfig, ContextOptions, DeviceCopy, Error, SmallCopyQueue, ENVIRONMENT};

#[test]
fn only_from_env_reads_the_environment() {
    std::env::set_var("VKCOPY_ALLOC_CONFIG", "not a config");
    std::env::set_var("VKCOPY_DEVICE_COPY", "shader");
    std::env::set_var("VKCOPY_IMPORT_HOST", "0");
    let d = ContextOptions::default();
    assert_eq!(d.alloc_config, AllocConfig::default());
    assert_eq!(d.device_copy, DeviceCopy::Auto);
    assert!(d.import_host);
    match ContextOptions::from_env() {
        Err(Error::BadSetting { name, value, .. }) => {
            assert_eq!(name, "VKCOPY_ALLOC_CONFIG");
            assert_eq!(value, "not a config");
        }
        other => panic!("expected a bad VKCOPY_ALLOC_CONFIG, got {other:?}"),
    }
    std::env::set_var("VKCOPY_SPIN_US", "ten");
    match ContextOptions::from_env() {
        Err(Error::BadSetting { name, .. }) => assert_eq!(name, "VKCOPY_SPIN_US"),
        other => panic!("expected a bad VKCOPY_SPIN_US, got {other:?}"),
    }
    std::env::set_var("VKCOPY_SPIN_US", "1500");
    std::env::set_var("VKCOPY_SMALL_COPY_QUEUE", "transfer");
    match ContextOptions::from_env() {
        Err(Error::BadSetting { name, reason, .. }) => {
            assert_eq!(name, "VKCOPY_SMALL_COPY_QUEUE");
            assert!(
                reason.contains("expected auto, compute or other"),
                "{reason}"
            );
        }
        other => panic!("expected a bad VKCOPY_SMALL_COPY_QUEUE, got {other:?}"),
    }
    std::env::set_var("VKCOPY_SMALL_COPY_QUEUE", " Other");
    std::env::set_var("VKCOPY_ALLOC_CONFIG", "0:1");
    let e = ContextOptions::from_env().unwrap();
    assert_eq!(e.spin, std::time::Duration::from_micros(1500));
    assert_eq!(e.alloc_config.minimum_block_size, 1 << 20);
    assert_eq!(e.device_copy, DeviceCopy::Shader);
    assert!(!e.import_host);
    assert_eq!(e.small_copy_queue, SmallCopyQueue::Other);
    assert_eq!(d.small_copy_queue, SmallCopyQueue::Auto);
    for v in [
        "VKCOPY_ALLOC_CONFIG",
        "VKCOPY_DEVICE_COPY",
        "VKCOPY_IMPORT_HOST",
        "VKCOPY_SPIN_US",
        "VKCOPY_SMALL_COPY_QUEUE",
    ] {
        assert!(ENVIRONMENT.iter().any(|(n, _)| *n == v), "{v} undocumented");
        std::env::remove_var(v);
    }
}
