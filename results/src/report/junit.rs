//! `junit.xml`: one test case per case, for CI viewers. Re-runs are kept as
//! nextest keeps them: a flake is a success with a `<flakyFailure>` per failed
//! attempt, a failure that failed again a `<rerunFailure>` per re-run. As
//! deqp-runner's `junit`, a limit caps the failures written (a broken driver
//! fails hundreds of cases, which a viewer cannot show), and a link template
//! points each failure at its logs.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use quick_junit::{
    NonSuccessKind, Report as JReport, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use super::{device_slug, CaseRecord, Report};
use crate::outcome::{Status, Verdict};

/// What a link may hold of a case's name as it is: RFC 3986's unreserved
/// characters; the rest (`::` included) is percent-encoded.
const LINK_SAFE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// How to write the XML.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// At most this many failing cases; the rest are counted in one more test
    /// case, `vkcopy-suite::failures_over_the_limit`.
    pub limit: Option<usize>,
    /// A link added to each failure: `{name}` is the case's name, `{device}`
    /// the device's folder name (`nvidia-h200`), both percent-encoded.
    pub link: Option<String>,
}

/// The JUnit XML of `report`.
pub fn xml(report: &Report, options: &Options) -> String {
    xml_of_all(std::slice::from_ref(report), options)
}

/// The JUnit XML of several runs (the folders of a lab's fleet, shards): one
/// test suite per run, the failure limit over them all.
pub fn xml_of_all(reports: &[Report], options: &Options) -> String {
    let mut xml = JReport::new("vkcopy-suite");
    let mut failures = 0;
    let mut over = Vec::new();
    for report in reports {
        xml.add_test_suite(suite(report, options, &mut failures, &mut over));
    }
    if let Some(limit) = options.limit.filter(|_| !over.is_empty()) {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(format!(
            "failing cases over the limit of {limit}: {} more; see results.json",
            over.len()
        ));
        s.set_description(over.join("\n"));
        let mut rest = TestSuite::new("vkcopy-suite: over the limit");
        rest.add_test_case(TestCase::new("vkcopy-suite::failures_over_the_limit", s));
        xml.add_test_suite(rest);
    }
    xml.to_string().unwrap_or_default()
}

/// One run's test suite; failing cases past the limit go to `over`.
fn suite(
    report: &Report,
    options: &Options,
    failures: &mut usize,
    over: &mut Vec<String>,
) -> TestSuite {
    let mut suite = TestSuite::new(format!("vkcopy-suite on {}", report.device.name));
    let device = device_slug(&report.device.name);
    let encode = |t: &str| utf8_percent_encode(t, LINK_SAFE).to_string();
    for c in &report.cases {
        let fails = matches!(c.verdict, Verdict::Fail | Verdict::UnexpectedPass);
        if fails {
            *failures += 1;
            if options.limit.is_some_and(|l| *failures > l) {
                over.push(c.name.clone());
                continue;
            }
        }
        let link = options.link.as_ref().map(|t| {
            t.replace("{name}", &encode(&c.name))
                .replace("{device}", &encode(&device))
        });
        let mut case = TestCase::new(c.name.clone(), status(c, link.as_deref()));
        case.set_classname(c.name.rsplit_once("::").map_or("", |(a, _)| a).to_owned());
        case.set_time(std::time::Duration::from_secs_f64(c.outcome.seconds));
        if let Some(link) = link.filter(|_| fails) {
            case.add_property(("link", link.as_str()));
        }
        suite.add_test_case(case);
    }
    suite
}

/// A case's status, its failed attempts as re-runs.
fn status(c: &CaseRecord, link: Option<&str>) -> TestCaseStatus {
    let kind = match c.outcome.status {
        Status::Fail | Status::Pass => NonSuccessKind::Failure,
        _ => NonSuccessKind::Error,
    };
    let first_line = c.outcome.message.lines().next().unwrap_or("").to_owned();
    let text = match link {
        Some(l) => format!("{}\n{l}", c.outcome.message),
        None => c.outcome.message.clone(),
    };
    match c.verdict {
        Verdict::Pass => TestCaseStatus::success(),
        Verdict::Flake => {
            // Failed attempts, then the pass that made it a flake; a listed
            // known flake is not re-run, so its one attempt is the failure.
            let failed = match (c.outcome.status, c.attempts) {
                (Status::Pass, _) => 0,
                (_, 0 | 1) => 1,
                (_, n) => n - 1,
            };
            let mut s = TestCaseStatus::success();
            s.add_reruns((0..failed).map(|i| {
                let mut r = TestRerun::new(kind);
                // The report keeps the first failing attempt's message only.
                if i == 0 {
                    r.set_message(first_line.clone())
                        .set_description(text.clone());
                } else {
                    r.set_message(format!("attempt {} failed too", i + 1));
                }
                r
            }));
            s
        }
        Verdict::Skip | Verdict::ExpectedFail => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(c.outcome.message.clone());
            s
        }
        Verdict::Fail | Verdict::UnexpectedPass => {
            let mut s = TestCaseStatus::non_success(kind);
            s.set_message(first_line).set_description(text);
            s.add_reruns((1..c.attempts).map(|i| {
                let mut r = TestRerun::new(kind);
                r.set_message(format!("re-run {i} failed too"));
                r
            }));
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    fn case(name: &str, verdict: Verdict, status: Status, attempts: u32) -> CaseRecord {
        CaseRecord {
            name: name.into(),
            path: String::new(),
            verdict,
            attempts,
            expectation: None,
            expected_by: None,
            tags: Vec::new(),
            outcome: Outcome::new(
                status,
                format!("{name} went wrong\nmore"),
                Default::default(),
            ),
        }
    }

    fn report(cases: Vec<CaseRecord>) -> Report {
        let mut r: Report = serde_json::from_str(
            r#"{"device": {"name": "NVIDIA H200"}, "policy": "vkcopy", "cases": []}"#,
        )
        .unwrap();
        r.cases = cases;
        r
    }

    #[test]
    fn a_flake_is_a_success_with_its_failed_attempts() {
        let r = report(vec![
            case("a::flaky", Verdict::Flake, Status::Fail, 3),
            case("a::fails", Verdict::Fail, Status::Crash, 2),
            case("a::passes", Verdict::Pass, Status::Pass, 1),
        ]);
        let x = xml(&r, &Options::default());
        assert_eq!(x.matches("<flakyFailure").count(), 2, "{x}");
        assert!(x.contains("a::flaky went wrong"), "{x}");
        // A crash is an error; its one re-run is kept as a rerunError.
        assert_eq!(x.matches("<error").count(), 1, "{x}");
        assert_eq!(x.matches("<rerunError").count(), 1, "{x}");
        assert_eq!(x.matches("<failure").count(), 0, "{x}");
    }

    #[test]
    fn the_limit_counts_the_rest_and_links_point_at_each_failure() {
        let cases = (0..5)
            .map(|i| case(&format!("b::f{i}"), Verdict::Fail, Status::Fail, 1))
            .chain([case("b::ok", Verdict::Pass, Status::Pass, 1)])
            .collect();
        let options = Options {
            limit: Some(2),
            link: Some("https://lab/{device}/{name}.log".into()),
        };
        let x = xml(&report(cases), &options);
        assert!(
            x.contains("b::f0") && x.contains("b::f1") && x.contains("b::ok"),
            "{x}"
        );
        assert!(!x.contains("<testcase name=\"b::f2\""), "{x}");
        assert!(
            x.contains("failing cases over the limit of 2: 3 more"),
            "{x}"
        );
        // The name is percent-encoded: `::` is not a path's.
        assert!(x.contains("https://lab/nvidia-h200/b%3A%3Af0.log"), "{x}");
        // Passing cases get no link.
        assert_eq!(x.matches("https://lab/").count(), 4, "{x}");
    }

    #[test]
    fn runs_of_a_folder_are_one_suite_each_under_one_limit() {
        let a = report(vec![case("a::f", Verdict::Fail, Status::Fail, 1)]);
        let mut b = report(vec![
            case("b::f", Verdict::Fail, Status::Fail, 1),
            case("b::ok", Verdict::Pass, Status::Pass, 1),
        ]);
        b.device.name = "llvmpipe (LLVM 15.0.6, 256 bits)".into();
        let options = Options {
            limit: Some(1),
            link: None,
        };
        let x = xml_of_all(&[a, b], &options);
        assert!(
            x.contains("<testsuite name=\"vkcopy-suite on NVIDIA H200\""),
            "{x}"
        );
        assert!(
            x.contains("<testsuite name=\"vkcopy-suite on llvmpipe (LLVM 15.0.6, 256 bits)\""),
            "{x}"
        );
        assert!(x.contains("<testcase name=\"a::f\""), "{x}");
        assert!(!x.contains("<testcase name=\"b::f\""), "{x}");
        assert!(
            x.contains("failing cases over the limit of 1: 1 more"),
            "{x}"
        );
    }
}
