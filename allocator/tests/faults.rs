//! Fault injection (feature `fault-injection`): every Vulkan entry point the
//! runtime uses fails, at its first, a middle and its last call of a run and from
//! a middle call on, with each error a driver may return. Every failure must be
//! an error naming the call (or `device_lost`), nothing may leak (the runtime's
//! counters and the validation layer's object tracking at teardown), no data may
//! come back wrong, and the context must stay usable or say `device_lost`.

use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

use vkcopy::{fault, Buffer, Context, ContextOptions, DeviceCopy, ElemType, Error, MappedCopy};

mod common;

use common::{noncoherent_only, validation_installed};

/// The errors injected.
const RESULTS: &[&str] = &[
    "ERROR_OUT_OF_HOST_MEMORY",
    "ERROR_OUT_OF_DEVICE_MEMORY",
    "ERROR_MEMORY_MAP_FAILED",
    "ERROR_DEVICE_LOST",
    "ERROR_INITIALIZATION_FAILED",
    "TIMEOUT",
];

fn options() -> ContextOptions {
    ContextOptions {
        validation: validation_installed(),
        // The copy shader, so that pipelines and descriptors are made too.
        device_copy: DeviceCopy::Shader,
        ..ContextOptions::default()
    }
}

/// Host-visible memory only non-coherent (simulated on the real device), so that
/// mapped ranges are flushed and invalidated.
fn noncoherent() -> ContextOptions {
    ContextOptions {
        simulate_memory: Some(noncoherent_only()),
        ..options()
    }
}

fn value(c: &[i64]) -> i64 {
    c[0] * 7 + c.get(1).copied().unwrap_or(0) * 1000 + 3
}

/// Wrong data is never acceptable, whatever failed.
fn check(b: &Buffer, what: &str) {
    let m = b.compare(value, 1).unwrap();
    assert_eq!(m.mismatches, 0, "{what}: wrong data after a fault");
}

/// The runtime's work: uploads through staging and (where the device can)
/// through imported host memory, a crop copied on the device by the copy shader,
/// readbacks, an async readback, frees.
fn work(ctx: &Context) -> vkcopy::Result<()> {
    // GPU timestamps around copies, read back from a query pool.
    ctx.set_profiling(true);
    let mut a = Buffer::new("a", ElemType::U32, &[256, 64])?;
    a.fill(value)?;
    ctx.copy_to_device(&mut a)?;
    let mut big = Buffer::new("big", ElemType::U8, &[4 << 20])?;
    big.fill(value)?;
    ctx.copy_to_device(&mut big)?;
    let (min, extent) = ([16, 8], [64, 32]);
    let crop = a.cropped("crop", &min, &extent)?;
    let mut copy = Buffer::new("copy", ElemType::U32, &[256, 64])?;
    ctx.buffer_copy(&crop, &mut copy, true)?;
    ctx.copy_to_host(&mut copy)?;
    check(
        &copy.cropped("copied", &min, &extent)?,
        "crop copied on the device",
    );
    a.fill(|_| 0)?;
    a.set_host_dirty(false);
    a.set_device_dirty(true);
    ctx.start_copy_to_host(&mut a)?.wait()?;
    check(&a, "async readback");
    big.fill(|_| 0)?;
    big.set_host_dirty(false);
    big.set_device_dirty(true);
    ctx.copy_to_host(&mut big)?;
    check(&big, "readback of imported memory");
    ctx.device_free(&mut big)?;
    Ok(())
}

/// The calls of each entry point in one clean run: create, work, close.
fn clean_run(options: &ContextOptions) -> Vec<(&'static str, u64)> {
    fault::inject("").unwrap();
    let ctx = Context::new(options.clone()).expect("a context");
    work(&ctx).expect("a run without faults");
    let report = ctx.close();
    assert!(report.is_empty(), "{report}");
    let messages = fault::teardown_messages();
    assert!(messages.is_empty(), "{messages:#?}");
    fault::calls()
}

/// An error is acceptable when it names the failed call or says the device is lost.
fn names_the_call(e: &Error, entry: &str) -> bool {
    matches!(e, Error::DeviceLost(_)) || e.to_string().contains(entry)
}

/// One run with `spec` injected; a description of what went wrong, if anything.
fn faulty_run(
    options: &ContextOptions,
    spec: &str,
    entry: &str,
    onward: bool,
) -> Result<(), String> {
    fault::inject(spec).unwrap();
    let ctx = match Context::new(options.clone()) {
        Ok(c) => c,
        Err(e) => {
            if !names_the_call(&e, entry) {
                return Err(format!("creation failed with an error not naming it: {e}"));
            }
            let left = fault::teardown_messages();
            return match left.is_empty() {
                true => Ok(()),
                false => Err(format!("failed creation left: {left:#?}")),
            };
        }
    };
    // Usable afterwards: once a single fault is behind us the work succeeds again
    // (or the device is known lost); faults from then on fail it with a clear error.
    for round in 0..3 {
        let behind = fault::injected() > 0 && !onward;
        match work(&ctx) {
            Ok(()) | Err(Error::DeviceLost(_)) => {}
            Err(e) if behind => return Err(format!("round {round} after the fault failed: {e}")),
            Err(e) if !names_the_call(&e, entry) => {
                return Err(format!(
                    "round {round} failed with an error not naming it: {e}"
                ));
            }
            Err(_) => {}
        }
    }
    let messages = ctx.take_validation_messages();
    if !messages.is_empty() {
        return Err(format!("validation messages: {messages:#?}"));
    }
    let report = ctx.close();
    if !report.is_empty() {
        return Err(format!("leaked: {report}"));
    }
    let left = fault::teardown_messages();
    if !left.is_empty() {
        return Err(format!("teardown left: {left:#?}"));
    }
    Ok(())
}

/// Every entry point (of `only`, if given) x (first, middle, last, from the
/// middle on) x `results`.
fn sweep(options: ContextOptions, results: &[&str], only: Option<&[&str]>) {
    // One sweep at a time: each makes hundreds of contexts, which on two cores go
    // no faster side by side, and a crash names its fault only when alone.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let trace = std::env::var_os("FAULTS_TRACE").is_some() || std::env::var_os("CI").is_some();
    let counts: Vec<_> = clean_run(&options)
        .into_iter()
        .filter(|(e, _)| only.is_none_or(|o| o.contains(e)))
        .collect();
    let unused: Vec<_> = counts
        .iter()
        .filter(|(_, n)| *n == 0)
        .map(|(e, _)| *e)
        .collect();
    let started = Instant::now();
    let (mut runs, mut failures) = (0, Vec::new());
    for &(entry, n) in counts.iter().filter(|(_, n)| *n > 0) {
        let mut points = vec![
            (1, false),
            (n.div_ceil(2), false),
            (n, false),
            (n.div_ceil(2), true),
        ];
        points.dedup();
        for (nth, onward) in points {
            for result in results {
                let plus = if onward { "+" } else { "" };
                let spec = format!("{entry}@{nth}{plus}={result}");
                runs += 1;
                if trace {
                    // Straight to the process's stderr, past the test harness's
                    // capture, so that the last line names the fault if the process dies.
                    let _ = writeln!(std::io::stderr(), "fault {spec}");
                }
                if let Err(why) = faulty_run(&options, &spec, entry, onward) {
                    failures.push(format!("{spec}: {why}"));
                }
            }
        }
    }
    fault::clear();
    eprintln!(
        "{runs} faults injected over {} entry points in {:.1?}, {} failed; not called: {unused:?}",
        counts.iter().filter(|(_, n)| *n > 0).count(),
        started.elapsed(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn faults_out_of_memory() {
    sweep(options(), &RESULTS[..2], None);
}

#[test]
fn faults_map_failed_and_device_lost() {
    sweep(options(), &RESULTS[2..4], None);
}

#[test]
fn faults_initialization_failed_and_timeout() {
    sweep(options(), &RESULTS[4..], None);
}

#[test]
fn faults_of_mapped_memory_on_noncoherent_memory() {
    let only = [
        "vkAllocateMemory",
        "vkMapMemory",
        "vkFlushMappedMemoryRanges",
        "vkInvalidateMappedMemoryRanges",
    ];
    sweep(noncoherent(), RESULTS, Some(&only));
}

/// Submissions of a context that uploads one buffer `uploads` times, and what
/// the uploads returned.
fn submits_of_uploads(spec: &str, uploads: usize) -> (u64, Vec<vkcopy::Result<()>>) {
    fault::inject(spec).unwrap();
    let ctx = Context::new(options()).expect("a context");
    let mut b = Buffer::new("b", ElemType::U8, &[64]).unwrap();
    b.fill(|c| c[0]).unwrap();
    let results = (0..uploads).map(|_| ctx.copy_to_device(&mut b)).collect();
    drop(b);
    let report = ctx.close();
    assert!(report.is_empty(), "{report}");
    let calls = fault::calls();
    fault::clear();
    let submits = calls.iter().find(|(e, _)| *e == "vkQueueSubmit").unwrap().1;
    (submits, results)
}

#[test]
fn an_injected_failure_names_the_call() {
    let (clean, _) = submits_of_uploads("", 1);
    let (submits, results) = submits_of_uploads("vkQueueSubmit@1=ERROR_OUT_OF_DEVICE_MEMORY", 2);
    assert_eq!(fault::injected(), 1);
    match &results[0] {
        Err(Error::Vulkan { call, result }) => {
            assert_eq!(
                (*call, *result),
                (
                    "vkQueueSubmit",
                    vkcopy::ash::vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
                )
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(results[1].is_ok(), "{:?}", results[1]);
    // The failed submission counts as a call, and the retry submits again.
    assert_eq!(submits, clean + 1);
}

#[test]
fn a_bad_fault_spec_is_refused_naming_it() {
    let e = fault::inject("vkQueueSubmit@1=NOPE").unwrap_err();
    assert_eq!(e.name(), "bad_setting");
    assert!(e.to_string().contains("NOPE"), "{e}");
}

#[test]
fn a_small_import_that_failed_is_not_tried_again() {
    let entry = "vkGetMemoryHostPointerPropertiesEXT";
    fault::inject(&format!("{entry}@1+=ERROR_OUT_OF_HOST_MEMORY")).unwrap();
    // Readbacks by the GPU: the CPU's reads of device memory import nothing.
    let opts = ContextOptions {
        mapped_readback: MappedCopy::Never,
        ..options()
    };
    let ctx = Context::new(opts).expect("a context");
    if !ctx.info().has("VK_EXT_external_memory_host") {
        fault::clear();
        return;
    }
    // 64 KiB read back four times: the second readback tries to import the
    // memory and fails; every readback stages, and none tries again.
    let mut b = Buffer::new("b", ElemType::I32, &[16 << 10]).unwrap();
    for round in 0..4 {
        b.fill(|c| value(c) + round).unwrap();
        ctx.copy_to_device(&mut b).unwrap();
        b.fill(|_| -1).unwrap();
        b.set_host_dirty(false);
        b.set_device_dirty(true);
        ctx.copy_to_host(&mut b).unwrap();
        assert_eq!(b.compare(|c| value(c) + round, 1).unwrap().mismatches, 0);
    }
    drop(b);
    let report = ctx.close();
    assert!(report.is_empty(), "{report}");
    let calls = fault::calls();
    fault::clear();
    assert_eq!(calls.iter().find(|(e, _)| *e == entry).unwrap().1, 1);
}
