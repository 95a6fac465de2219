//! Cases in worker processes, as Mesa's deqp-runner runs them: a worker is this
//! same binary (`vkcopy-suite worker`), reads case paths on stdin and writes one
//! result line per case on stdout. A panic, abort or signal in a case or the
//! driver ends only the worker: the case is a `crash` with what the worker
//! printed, and the next case gets a new worker. A case past its time limit is
//! killed as a `timeout`.

use crate::error::SuiteError;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::outcome::{Outcome, Status};
use vkcopy_engine::exec;
use vkcopy_engine::plan;
use vkcopy_engine::rt::ContextOptions;
use vkcopy_engine::runtime::Target;

/// The start of a result line on a worker's stdout; any other line is output.
const MARK: &str = "\u{1e}vkcopy-suite-result ";

/// Lines of a worker's output kept for a crash or timeout report.
const TAIL_LINES: usize = 200;

/// How to start a worker: the binary and the arguments of its `worker` subcommand.
#[derive(Clone, Debug)]
pub struct Spawn {
    /// The `vkcopy-suite` binary.
    pub exe: PathBuf,
    /// `worker --cases ROOT ...`.
    pub args: Vec<String>,
    /// Each case in a worker of its own: the runtime keeps its state in
    /// process globals (Halide's context, allocator and loader entry points),
    /// which a case must not inherit from the one before it.
    pub fresh: bool,
}

impl Spawn {
    /// A worker of `exe` for the cases below `root`, with the run's overrides of
    /// the environment's options.
    pub fn new(exe: &Path, root: &Path, overrides: &Overrides) -> Self {
        let mut args = vec![
            "worker".to_owned(),
            "--cases".to_owned(),
            root.display().to_string(),
        ];
        if let Some(p) = &overrides.policy {
            args.extend(["--policy".to_owned(), p.clone()]);
        }
        if let Some(t) = &overrides.simulate_memory {
            args.extend(["--simulate-memory".to_owned(), t.display().to_string()]);
        }
        if overrides.validation {
            args.push("--validation".to_owned());
        }
        // The runtime travels as an argument, resolved once by the run.
        args.extend(["--runtime".to_owned(), overrides.runtime.choice().arg()]);
        Spawn {
            exe: exe.to_owned(),
            args,
            fresh: overrides.runtime.fresh_worker_per_case(),
        }
    }
}

/// What a run sets on top of the `VKCOPY_*` variables, which workers inherit.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--policy`, if given.
    pub policy: Option<String>,
    /// `--simulate-memory`, if given.
    pub simulate_memory: Option<PathBuf>,
    /// `--validation`.
    pub validation: bool,
    /// The runtime under test.
    pub runtime: Target,
}

enum Event {
    Result(Box<Outcome>),
    /// stdout closed: the worker is gone.
    Closed,
}

/// One running worker process.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Receiver<Event>,
    /// The last lines the worker printed (stdout and stderr) since its current case began.
    output: Arc<Mutex<VecDeque<String>>>,
}

impl Worker {
    /// Starts a worker.
    pub fn start(spawn: &Spawn) -> Result<Worker, SuiteError> {
        let mut cmd = Command::new(&spawn.exe);
        cmd.args(&spawn.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A runner killed (a lab's scheduler, a reboot script) takes its
        // workers with it: none is left holding the device while the run is
        // resumed. The parent is the thread that owns this worker, which drops
        // it (killing it) before it ends anyway.
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|source| SuiteError::Worker {
            what: format!("cannot start a worker ({})", spawn.exe.display()),
            source,
        })?;
        let output = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, events) = channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let out = Arc::clone(&output);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match line.strip_prefix(MARK) {
                    Some(json) => {
                        let outcome = serde_json::from_str(json).unwrap_or_else(|e| {
                            Outcome::failed(format!("unreadable worker result: {e}"))
                        });
                        if tx.send(Event::Result(Box::new(outcome))).is_err() {
                            return;
                        }
                    }
                    None => keep(&out, line),
                }
            }
            let _ = tx.send(Event::Closed);
        });
        let out = Arc::clone(&output);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                keep(&out, line);
            }
        });
        Ok(Worker {
            stdin: child.stdin.take(),
            child,
            events,
            output,
        })
    }

    /// Runs the case file `path` within `limit`. `Err` with the outcome when the
    /// worker is gone (crashed, or killed at the limit) and must be replaced.
    pub fn run(&mut self, path: &Path, limit: Duration) -> Result<Outcome, Outcome> {
        let start = Instant::now();
        lock(&self.output).clear();
        let sent = match &mut self.stdin {
            Some(stdin) => writeln!(stdin, "{}", path.display()).and_then(|()| stdin.flush()),
            None => Err(std::io::Error::other("stdin closed")),
        };
        if sent.is_err() {
            return Err(self.died(start));
        }
        match self.events.recv_timeout(limit) {
            Ok(Event::Result(outcome)) => Ok(*outcome),
            Ok(Event::Closed) | Err(RecvTimeoutError::Disconnected) => Err(self.died(start)),
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let mut out = Outcome::new(
                    Status::Timeout,
                    format!(
                        "killed after {:.1} s, the case's time limit",
                        limit.as_secs_f64()
                    ),
                    start.elapsed(),
                );
                out.output = self.tail();
                Err(out)
            }
        }
    }

    /// The outcome of a case whose worker exited under it.
    fn died(&mut self, start: Instant) -> Outcome {
        let how = match self.child.wait() {
            Ok(status) => describe_exit(status),
            Err(e) => format!("cannot be waited for: {e}"),
        };
        // The stderr thread may still be draining the last lines.
        std::thread::sleep(Duration::from_millis(50));
        let output = self.tail();
        let lines: Vec<&str> = output.lines().collect();
        // A panic's own lines, else the last lines.
        let from = match lines.iter().rposition(|l| l.contains("panicked at")) {
            Some(i) => i,
            None => lines.len().saturating_sub(20),
        };
        let mut message = format!("the worker {how}");
        for l in lines.iter().skip(from).take(20) {
            message.push('\n');
            message.push_str(l);
        }
        let mut out = Outcome::new(Status::Crash, message, start.elapsed());
        out.output = output;
        out
    }

    fn tail(&self) -> String {
        let lines = lock(&self.output);
        lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing stdin ends an idle worker; one still running is killed.
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn keep(out: &Mutex<VecDeque<String>>, line: String) {
    let mut lines = lock(out);
    if lines.len() == TAIL_LINES {
        lines.pop_front();
    }
    lines.push_back(line);
}

/// `exited with code 101 (a panic)`, `was killed by signal 6 (SIGABRT)`.
fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL: out of memory?)",
                11 => " (SIGSEGV)",
                _ => "",
            };
            return format!("was killed by signal {sig}{name}");
        }
    }
    match status.code() {
        Some(101) => "exited with code 101 (a panic)".to_owned(),
        Some(c) => format!("exited with code {c}"),
        None => "exited".to_owned(),
    }
}

/// The worker side: runs each case path read from `input` and writes its
/// outcome as one line to stdout.
pub fn serve(
    root: &Path,
    options: &ContextOptions,
    runtime: &Target,
    input: impl BufRead,
) -> Result<(), SuiteError> {
    let pipe = |what: &str| {
        let what = what.to_owned();
        move |source| SuiteError::Worker { what, source }
    };
    for line in input.lines() {
        let line = line.map_err(pipe("stdin"))?;
        if line.is_empty() {
            continue;
        }
        let path = Path::new(&line);
        let outcome = match plan::load(root, path) {
            Ok(plan) => {
                let out = match crate::hook::before(&plan.name) {
                    Some(out) => out,
                    None => exec::run(&plan, options, runtime),
                };
                crate::hook::after();
                out
            }
            Err(e) => Outcome::failed(e.to_string()),
        };
        let json = serde_json::to_string(&outcome).expect("an outcome serializes");
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{MARK}{json}")
            .and_then(|()| stdout.flush())
            .map_err(pipe("stdout"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Overrides, Spawn};
    use std::path::Path;
    use vkcopy_engine::runtime::Choice;

    /// Halide's runtime keeps its state in process globals: each case gets a
    /// worker of its own, told the runtime on its command line.
    #[test]
    fn workers_of_halide_serve_one_case_each_and_carry_the_runtime() {
        let halide = Overrides {
            runtime: crate::target::target(Choice::Halide("/x/libhalide.so".into())),
            ..Overrides::default()
        };
        let s = Spawn::new(Path::new("suite"), Path::new("/c"), &halide);
        assert!(s.fresh);
        assert_eq!(
            s.args,
            [
                "worker",
                "--cases",
                "/c",
                "--runtime",
                "halide:/x/libhalide.so"
            ]
        );
        let s = Spawn::new(Path::new("suite"), Path::new("/c"), &Overrides::default());
        assert!(!s.fresh);
        assert_eq!(s.args[3..], ["--runtime", "vkcopy"]);
    }
}
