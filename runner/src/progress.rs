//! What `vkcopy-suite run` prints as cases end: on a terminal a progress bar
//! (case name, counts, ETA) with only the cases that did not pass printed above
//! it; otherwise one plain line per case.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::outcome::Verdict;
use crate::report::CaseRecord;

/// The lines of one case: `pass  basic::x (0.12 s)`, `FAIL  basic::y (crash)` and
/// its message, and a line per measured copy.
pub fn case_lines(c: &CaseRecord) -> String {
    let (name, o) = (&c.name, &c.outcome);
    let first = o.message.lines().next().unwrap_or("");
    let mut text = match c.verdict {
        // A pass may carry notes (what a validation layer said about another
        // runtime): shown below it.
        Verdict::Pass if !o.message.is_empty() => format!(
            "pass  {name} ({:.2} s)\n      {}",
            o.seconds,
            o.message.replace('\n', "\n      ")
        ),
        Verdict::Pass => format!("pass  {name} ({:.2} s)", o.seconds),
        Verdict::Skip => format!("skip  {name}: {}", o.message),
        Verdict::ExpectedFail => {
            // The validation layer's findings, listed apart from the failure.
            let said = o
                .message
                .split_once("\nvalidation layer on")
                .map_or(String::new(), |(_, v)| {
                    format!("\n      validation layer on{}", v.replace('\n', "\n      "))
                });
            format!("xfail {name}: {first}{said}")
        }
        Verdict::Flake => format!("flake {name}: {first}"),
        Verdict::Fail | Verdict::UnexpectedPass => format!(
            "FAIL  {name} ({})\n      {}",
            o.status,
            o.message.replace('\n', "\n      ")
        ),
    };
    for m in &o.measurements {
        text.push_str(&format!("\n      measured {}", m.summary()));
    }
    text
}

/// Prints the progress of a run.
pub struct Progress {
    bar: Option<ProgressBar>,
    counts: [usize; Verdict::ALL.len()],
}

impl Progress {
    /// A bar when stdout and stderr are terminals, plain lines otherwise.
    pub fn new(total: usize) -> Self {
        let terminal = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        let bar = terminal.then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            let style =
                ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}, ETA {eta}]")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        });
        Progress {
            bar,
            counts: [0; Verdict::ALL.len()],
        }
    }

    /// Prints a line (above the bar, if there is one).
    pub fn line(&self, text: &str) {
        let print = || {
            let _ = writeln!(std::io::stdout(), "{text}");
        };
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }

    /// A case ended.
    pub fn case(&mut self, c: &CaseRecord) {
        if let Some(i) = Verdict::ALL.iter().position(|v| *v == c.verdict) {
            self.counts[i] += 1;
        }
        let Some(bar) = &self.bar else {
            self.line(&case_lines(c));
            return;
        };
        if !matches!(c.verdict, Verdict::Pass | Verdict::Skip) || !c.outcome.measurements.is_empty()
        {
            self.line(&case_lines(c));
        }
        let counts: Vec<String> = Verdict::ALL
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(v, n)| format!("{v} {n}"))
            .collect();
        bar.set_message(format!("{} | {}", counts.join(" "), c.name));
        bar.inc(1);
    }

    /// Removes the bar.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
