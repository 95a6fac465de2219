//! Fault injection (feature `fault-injection`): chosen Vulkan calls fail, and the
//! runtime reports them by name, leaks nothing, and stays usable.

use vkcopy::{fault, Buffer, ContextOptions, ElemType, Error};

mod common;

use common::context;

#[test]
fn an_injected_failure_names_the_call() {
    fault::inject("vkQueueSubmit@1=ERROR_OUT_OF_DEVICE_MEMORY").unwrap();
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut b = Buffer::new("b", ElemType::U8, &[64]).unwrap();
    b.fill(|c| c[0]).unwrap();
    let e = ctx.copy_to_device(&mut b).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Vulkan {
                call: "vkQueueSubmit",
                ..
            }
        ),
        "{e}"
    );
    ctx.copy_to_device(&mut b).unwrap();
    drop(b);
    let report = ctx.close();
    assert!(report.is_empty(), "{report}");
    assert_eq!(fault::injected(), 1);
    let calls = fault::calls();
    let submits = calls.iter().find(|(e, _)| *e == "vkQueueSubmit").unwrap().1;
    assert!(submits >= 2, "{calls:?}");
    fault::clear();
}
