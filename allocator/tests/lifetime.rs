//! Contexts open and close cleanly, many times in one process (the suite makes one
//! per case). Alone in its binary so the count of live contexts is this test's.

use vkcopy::{Buffer, Context, ContextOptions, ElemType, Error};

#[test]
fn contexts_close_when_their_last_user_is_gone() {
    match Context::new(ContextOptions::default()) {
        Err(e @ (Error::LoaderMissing(_) | Error::NoDevice))
            if std::env::var_os("CI").is_none() =>
        {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
        Ok(_) => {}
    }
    assert_eq!(Context::live_contexts(), 0);
    let mut survivor = None;
    for i in 0..60 {
        let ctx = Context::new(ContextOptions::default()).expect("context number {i}");
        let mut b = Buffer::new("b", ElemType::I32, &[4096]).unwrap();
        b.fill(|c| c[0] + i).unwrap();
        ctx.copy_to_device(&mut b).unwrap();
        b.set_device_dirty(true);
        b.set_host_dirty(false);
        ctx.copy_to_host(&mut b).unwrap();
        assert_eq!(b.compare(|c| c[0] + i, 1).unwrap().mismatches, 0);
        if i == 0 {
            // A buffer keeps its context's device open after the context is dropped.
            survivor = Some(b);
        }
    }
    assert_eq!(Context::live_contexts(), 1);
    drop(survivor);
    assert_eq!(Context::live_contexts(), 0);
}
