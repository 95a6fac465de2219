//! Structure-aware fuzzing of what the suite reads, as bounded property tests
//! (stable Rust, no installs): case files assembled from the vocabulary's own
//! pieces, and recorded tables with their lines cut and swapped. Each input
//! must load or fail with a located error; none may panic or hang. The seed
//! sequence is fixed, so a failure replays (its batch is named); each target runs
//! for `FUZZ_SECS` seconds (60 with `CI` set, else 10). `bad_cases/` is the
//! committed corpus of hand-written inputs.

use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use vkcopy_engine::discover::cases_root;
use vkcopy_engine::plan;
use vkcopy_engine::rt::MemoryTable;

/// Seconds each target runs: `FUZZ_SECS`, default 60 with `CI` set, else 10.
fn seconds() -> u64 {
    let default = if std::env::var_os("CI").is_some() {
        60
    } else {
        10
    };
    std::env::var("FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `test` on inputs of `strategy` in batches of 1000, batch `k` from seed
/// `k`, until the time is up; a failing input is shrunk and reported with its
/// batch. Returns the inputs tried.
fn fuzz<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(seconds());
    let mut batch = 0u64;
    while batch == 0 || Instant::now() < deadline {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&batch.to_le_bytes());
        let config = Config {
            cases: 1000,
            failure_persistence: None,
            ..Config::default()
        };
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
        if let Err(e) = runner.run(&strategy, &test) {
            panic!("batch {batch}: {e}");
        }
        batch += 1;
    }
    batch * 1000
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("g".to_owned()),
        Just("c".to_owned()),
        Just("h".to_owned()),
        Just("nope".to_owned()),
        (-3i64..12).prop_map(|v| v.to_string()),
        Just("9223372036854775807".to_owned()),
        Just("-9223372036854775808".to_owned()),
        Just("4294967297".to_owned()),
        Just("true".to_owned()),
        Just("[0, 0]".to_owned()),
        Just("[2, 2]".to_owned()),
        Just("[9, 9]".to_owned()),
        Just("[-1, 4]".to_owned()),
        Just("[1]".to_owned()),
        Just("[]".to_owned()),
        Just("\"x + 256*y\"".to_owned()),
        Just("\"x +\"".to_owned()),
        Just("{}".to_owned()),
        Just("!tag g".to_owned()),
        Just("*alias".to_owned()),
    ]
}

const STEPS: &[&str] = &[
    "copy_to_device",
    "copy_to_host",
    "buffer_copy",
    "crop",
    "slice",
    "view",
    "view_no_host",
    "fill_host",
    "fill_device",
    "add_host",
    "add_device",
    "sum_device",
    "map_device",
    "threads",
    "reuse_device_allocations",
    "expect_concurrent",
    "expect",
    "expect_flags",
    "measure",
    "fill_heap",
    "device_malloc",
    "device_free",
    "set_dirty",
    "repeat",
    "when",
    "expect_error",
    "wait",
    "start_copy_to_device",
    "release",
    "profiling",
    "bogus",
];
const FIELDS: &[&str] = &[
    "from",
    "to",
    "buffer",
    "min",
    "extent",
    "stride",
    "at",
    "dim",
    "pos",
    "value",
    "out",
    "inputs",
    "input",
    "heap",
    "leave",
    "repeat",
    "copy_to_host",
    "to_device",
    "var",
    "steps",
    "error",
    "step",
    "host_dirty",
    "device_dirty",
    "name",
    "cond",
    "count",
    "x",
];

/// One step: `name: scalar`, or `name: { field: value, ... }`.
fn step() -> impl Strategy<Value = String> {
    let fields = prop::collection::vec((prop::sample::select(FIELDS), value()), 0..5);
    (prop::sample::select(STEPS), value(), fields, any::<bool>()).prop_map(
        |(name, scalar, fields, flow)| {
            if flow {
                let body: Vec<String> = fields.iter().map(|(f, v)| format!("{f}: {v}")).collect();
                format!("  - {name}: {{ {} }}\n", body.join(", "))
            } else {
                format!("  - {name}: {scalar}\n")
            }
        },
    )
}

fn case_file() -> impl Strategy<Value = String> {
    let buffers = prop::collection::vec(
        (
            prop::sample::select(&["g", "c", "h"][..]),
            prop::sample::select(&["i32", "u8", "f64", "q"][..]),
            value(),
            any::<bool>(),
        ),
        0..3,
    );
    let sim =
        prop::sample::select(&["", "simulate_memory: lavapipe\n", "simulate_memory: ../x\n"][..]);
    (buffers, prop::collection::vec(step(), 0..6), sim).prop_map(|(bufs, steps, sim)| {
        let mut s = format!("about: fuzz\n{sim}");
        if !bufs.is_empty() {
            s.push_str("buffers:\n");
            for (name, ty, extent, host) in bufs {
                s.push_str(&format!(
                    "  {name}: {{ type: {ty}, extent: {extent}, host: {host} }}\n"
                ));
            }
        }
        s.push_str("steps:\n");
        s.extend(steps);
        s
    })
}

#[test]
fn case_parsing_and_planning_never_panic() {
    let root = cases_root();
    let path = Path::new("fuzz.yaml");
    let loaded = std::cell::Cell::new(0);
    let tried = fuzz(case_file(), |src| {
        match plan::parse(&root, path, &src) {
            Ok(_) => loaded.set(loaded.get() + 1),
            Err(e) => {
                prop_assert!(e.line > 0 && e.column > 0, "not located: {e}\n{src}");
                // An error of a step's own check: the input got past the YAML reader.
                if STEPS
                    .iter()
                    .any(|s| e.message.starts_with(&format!("{s}: ")))
                {
                    loaded.set(loaded.get() + 1);
                }
            }
        }
        Ok(())
    });
    eprintln!("{tried} case files, {} past the YAML reader", loaded.get());
    // The generator must also reach the steps' own checks, not only YAML errors.
    assert!(loaded.get() > 0);
}

#[test]
fn recorded_tables_never_panic() {
    let dir = cases_root().join("devices");
    let tables: Vec<String> = ["lavapipe", "nvidia-h200", "intel-arc-small-bar"]
        .iter()
        .map(|n| std::fs::read_to_string(dir.join(format!("{n}.yaml"))).unwrap())
        .collect();
    let edit = (
        0..tables.len(),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, value()), 1..6),
    );
    let tried = fuzz(edit, |(t, edits)| {
        let mut lines: Vec<String> = tables[t].lines().map(str::to_owned).collect();
        for (at, kind, v) in edits {
            let i = at
                .index(lines.len().max(1))
                .min(lines.len().saturating_sub(1));
            match kind {
                0 if !lines.is_empty() => drop(lines.remove(i)),
                1 => lines.insert(i, format!("  {v}")),
                2 if !lines.is_empty() => {
                    let line = &mut lines[i];
                    let cut = line.find(':').map_or(line.len(), |c| c + 1);
                    line.truncate(cut);
                    line.push(' ');
                    line.push_str(&v);
                }
                _ => {
                    let j = (i + 1).min(lines.len().saturating_sub(1));
                    lines.swap(i, j);
                }
            }
        }
        let _ = MemoryTable::from_yaml_str(&lines.join("\n"), "fuzz.yaml");
        Ok(())
    });
    eprintln!("{tried} edited tables");
}
