//! Expressions agree between the host and the device: random expressions from
//! the grammar (and the committed corpus, `tests/corpus/expressions.txt`, first)
//! are evaluated on the host and computed by the fill kernel on the default
//! device (lavapipe in CI, under the validation layer when installed), and every
//! element must match. Time-bounded: `FUZZ_SECS` seconds of random inputs
//! (default 60 with `CI` set, else 10), from a fixed seed sequence so that a
//! failure replays.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use vkcopy::{Buffer, Context, ContextOptions, ElemType};
use vkcopy_kernels::expr::Expr;
use vkcopy_kernels::Kernels;

#[path = "../../allocator/tests/common/mod.rs"]
mod common;

fn seconds() -> u64 {
    let default = match std::env::var_os("CI") {
        Some(_) => 60,
        None => 10,
    };
    std::env::var("FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(
            &[
                "x",
                "y",
                "z",
                "0",
                "1",
                "-7",
                "3",
                "0xff",
                "65536",
                "2147483647",
                "-2147483648"
            ][..]
        )
        .prop_map(str::to_owned),
        any::<i32>().prop_map(|v| v.to_string()),
        (-20i32..20).prop_map(|v| v.to_string()),
    ];
    leaf.prop_recursive(5, 24, 3, |inner| {
        let bin = prop::sample::select(
            &["+", "-", "*", "/", "%", "<", "<=", "==", "!=", "and", "or"][..],
        );
        prop_oneof![
            3 => (inner.clone(), bin, inner.clone()).prop_map(|(a, o, b)| format!("({a} {o} {b})")),
            1 => inner.clone().prop_map(|a| format!("-({a})")),
            1 => inner.clone().prop_map(|a| format!("not ({a})")),
            1 => inner.clone().prop_map(|a| format!("abs({a})")),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("max({a}, {b})")),
            1 => (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(a, b, c)| format!("clamp({a}, {b}, {c})")),
            1 => (inner.clone(), inner.clone(), inner)
                .prop_map(|(a, b, c)| format!("(({a}) if ({b}) else ({c}))")),
        ]
    })
}

/// How one expression went.
enum Run {
    /// Not for a device kernel: it does not parse or `check_wgsl` refuses it.
    NotAKernel,
    /// Refused because its values may leave `i32` over the box.
    PastI32,
    /// Computed on the device.
    Computed,
}

/// Fills a 3-D buffer on the device with `src` and compares it with the host's
/// values: an error for the first mismatch or an unexpected failure.
fn agree(ctx: &Context, src: &str) -> Result<Run, String> {
    let Ok(value) = Expr::parse(src) else {
        return Ok(Run::NotAKernel);
    };
    if value.check_wgsl().is_err() {
        return Ok(Run::NotAKernel);
    }
    let mut g = Buffer::new("g", ElemType::I32, &[9, 5, 2]).unwrap();
    match ctx.kernel_fill(&mut g, &value) {
        Ok(()) => {}
        Err(e) if e.to_string().contains("past 32 bits") => return Ok(Run::PastI32),
        Err(e) => return Err(format!("{src}: the kernel failed: {e}")),
    }
    ctx.copy_to_host(&mut g).unwrap();
    let c = g.compare(|c| value.eval(c), 1).unwrap();
    match c.mismatches {
        0 => Ok(Run::Computed),
        n => Err(format!(
            "{src}: {n} of 90 elements differ, first {:?}",
            c.first
        )),
    }
}

#[test]
fn host_and_device_agree_on_expressions() {
    let Some(ctx) = common::context(ContextOptions {
        validation: common::validation_installed(),
        ..Default::default()
    }) else {
        return;
    };
    let mut failures = Vec::new();
    // Counts of each outcome: not a kernel, refused past i32, computed.
    let mut counts = [0u64; 3];
    let mut tally = |r: Result<Run, String>, failures: &mut Vec<String>| match r {
        Ok(Run::NotAKernel) => counts[0] += 1,
        Ok(Run::PastI32) => counts[1] += 1,
        Ok(Run::Computed) => counts[2] += 1,
        Err(e) => failures.push(e),
    };
    let corpus = include_str!("corpus/expressions.txt");
    let mut replayed = 0;
    for line in corpus
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        assert!(
            Expr::parse(line).is_ok_and(|e| e.check_wgsl().is_ok()),
            "corpus: {line}"
        );
        tally(agree(&ctx, line), &mut failures);
        replayed += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(seconds());
    let strategy = expression();
    let mut tried = 0u64;
    let mut batch = 0u64;
    while Instant::now() < deadline && failures.len() < 5 {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&batch.to_le_bytes());
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
        );
        for _ in 0..64 {
            let src = strategy.new_tree(&mut runner).unwrap().current();
            tried += 1;
            tally(agree(&ctx, &src), &mut failures);
        }
        // Each expression is its own pipeline: keep the cache small.
        ctx.release_pipelines();
        batch += 1;
    }
    let [not_kernels, past, computed] = counts;
    eprintln!(
        "{replayed} corpus and {tried} random expressions in {batch} batches: {computed} \
         computed on the device and equal, {past} refused as past 32 bits, {not_kernels} not \
         device kernels"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(computed > 0 && past > 0);
    common::assert_clean(&ctx);
}
