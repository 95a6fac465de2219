//! Handles of async copies. A [`Pending`] copy borrows its buffers until it is
//! waited for (or dropped, which waits), and sets the destination's dirty bits
//! when it is; an [`Event`] is a shareable view of its completion that later
//! copies can be made to wait for.

use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::types::CopyPath;

/// What a copy's completion holds.
enum State {
    Running,
    Done(Result<CopyPath>),
    /// The result was taken by [`Pending::wait`]; whether it was a success.
    Taken(bool),
}

pub(crate) struct Completion {
    state: Mutex<State>,
    done: Condvar,
    /// When its stream began and finished it.
    ran: Mutex<Option<(Instant, Instant)>>,
}

impl Completion {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Completion {
            state: Mutex::new(State::Running),
            done: Condvar::new(),
            ran: Mutex::new(None),
        })
    }

    /// Done with `result`, run between `from` and now.
    pub(crate) fn finish(&self, result: Result<CopyPath>, from: Instant) {
        *self.ran.lock().unwrap_or_else(|p| p.into_inner()) = Some((from, Instant::now()));
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = State::Done(result);
        self.done.notify_all();
    }

    /// Waits up to `timeout`; whether the copy is done.
    fn wait_done(&self, timeout: Duration) -> bool {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (state, _) = self
            .done
            .wait_timeout_while(state, timeout, |s| matches!(s, State::Running))
            .unwrap_or_else(|p| p.into_inner());
        !matches!(*state, State::Running)
    }

    fn take(&self) -> Option<Result<CopyPath>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut *state, State::Running) {
            State::Running => None,
            State::Done(r) => {
                *state = State::Taken(r.is_ok());
                Some(r)
            }
            State::Taken(ok) => {
                *state = State::Taken(ok);
                None
            }
        }
    }

    fn succeeded(&self) -> Option<bool> {
        match &*self.state.lock().unwrap_or_else(|p| p.into_inner()) {
            State::Running => None,
            State::Done(r) => Some(r.is_ok()),
            State::Taken(ok) => Some(*ok),
        }
    }
}

/// The completion of an async copy, shareable and cheap to clone: poll it, wait
/// for it, or pass it to [`Context::start_buffer_copy_after`](crate::Context::start_buffer_copy_after)
/// so that a later copy starts only once this one is done.
#[derive(Clone)]
pub struct Event {
    pub(crate) completion: Arc<Completion>,
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("done", &self.is_done())
            .finish()
    }
}

impl Event {
    /// An event that is already done, for copies that had nothing to move.
    pub(crate) fn done(path: CopyPath) -> Self {
        let c = Completion::new();
        c.finish(Ok(path), Instant::now());
        Event {
            completion: c,
            timeout: Duration::ZERO,
        }
    }

    /// Whether the copy has finished (successfully or not).
    pub fn is_done(&self) -> bool {
        self.completion.succeeded().is_some()
    }

    /// Waits up to `timeout`; None while the copy runs, else whether it succeeded.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<bool> {
        self.completion.wait_done(timeout);
        self.completion.succeeded()
    }

    /// When the copy's stream began and finished it (host clock), once done. Two
    /// copies ran at the same time when these intervals overlap.
    pub fn interval(&self) -> Option<(Instant, Instant)> {
        *self
            .completion
            .ran
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the event as a dependency of a later copy: an error when it
    /// failed or did not finish within the timeout.
    pub(crate) fn wait_dependency(&self) -> Result<()> {
        match self.wait_timeout(self.timeout) {
            Some(true) => Ok(()),
            Some(false) => Err(Error::DependencyFailed(
                "a copy this one was started after failed".into(),
            )),
            None => Err(Error::Timeout {
                op: "a copy this one was started after".into(),
                after: self.timeout,
            }),
        }
    }
}

/// An event the host signals: copies started after it wait until
/// [`HostEvent::signal`], as a consumer stage waits for its producer.
#[derive(Debug)]
pub struct HostEvent {
    event: Event,
}

impl HostEvent {
    /// An unsignalled event; copies wait for it up to `timeout`.
    pub fn new(timeout: Duration) -> Self {
        HostEvent {
            event: Event {
                completion: Completion::new(),
                timeout,
            },
        }
    }

    /// The event, for [`Context::start_buffer_copy_after`](crate::Context::start_buffer_copy_after).
    pub fn event(&self) -> Event {
        self.event.clone()
    }

    /// Signals the event: copies waiting for it begin.
    pub fn signal(&self) {
        if !self.event.is_done() {
            self.event
                .completion
                .finish(Ok(CopyPath::HostToHost), Instant::now());
        }
    }
}

impl Drop for HostEvent {
    /// An event dropped unsignalled is signalled, so that nothing waits for it forever.
    fn drop(&mut self) {
        self.signal();
    }
}

/// A copy in flight. It borrows its source and destination until it is waited
/// for, so that neither can be used meanwhile through these buffers; other views
/// of the same memory must not be written (nor the destination read) until then.
/// Dropping it waits (up to the context's timeout) and sets the dirty bits as
/// [`Pending::wait`] does.
///
/// The rules: a copy sees every copy and kernel that finished before it was
/// started (blocking ones, and async ones that were waited for). It runs on the
/// stream of its path (upload, readback, device to device), in order with the
/// other copies of that stream and at the same time as everything else. A wait
/// makes its writes visible to the host and to every later copy and kernel.
/// Host memory, device memory, imports and staging stay alive until the copy is
/// done, even if the buffers are dropped; after a copy fails with `timeout` its
/// memory is kept for the life of the process, as the device may still use it.
#[must_use = "a copy is waited for when its handle is dropped"]
pub struct Pending<'a> {
    event: Event,
    /// The destination, whose dirty bits are set once the copy succeeded.
    dst: Option<(&'a mut Buffer, (bool, bool))>,
    _borrows: PhantomData<(&'a Buffer, &'a mut Buffer)>,
}

impl std::fmt::Debug for Pending<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("done", &self.event.is_done())
            .finish()
    }
}

impl<'a> Pending<'a> {
    pub(crate) fn new(event: Event, dst: &'a mut Buffer, dirty: (bool, bool)) -> Self {
        Pending {
            event,
            dst: Some((dst, dirty)),
            _borrows: PhantomData,
        }
    }

    /// A copy that had nothing to move: done, and `buf` left as it is.
    pub(crate) fn nothing(path: CopyPath, _buf: &'a mut Buffer) -> Self {
        Pending {
            event: Event::done(path),
            dst: None,
            _borrows: PhantomData,
        }
    }

    /// Whether the copy has finished; the dirty bits are set only by a wait.
    pub fn is_done(&self) -> bool {
        self.event.is_done()
    }

    /// The copy's completion, for later copies to wait for.
    pub fn event(&self) -> Event {
        self.event.clone()
    }

    /// Waits up to `timeout`: Ok(None) while the copy runs; once it is done, its
    /// result, with the destination's dirty bits set on success. A result is given
    /// once; later calls return Ok(None) with [`Pending::is_done`] true.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<CopyPath>> {
        if !self.event.completion.wait_done(timeout) {
            return Ok(None);
        }
        match self.event.completion.take() {
            None => Ok(None),
            Some(Err(e)) => {
                self.dst = None;
                Err(e)
            }
            Some(Ok(path)) => {
                if let Some((dst, dirty)) = self.dst.take() {
                    crate::runtime::copy::finish_dirty(dst, dirty);
                }
                Ok(Some(path))
            }
        }
    }

    /// Waits for the copy (up to the context's timeout) and returns its path.
    pub fn wait(mut self) -> Result<CopyPath> {
        let timeout = self.event.timeout;
        match self.wait_timeout(timeout)? {
            Some(path) => Ok(path),
            None if self.event.is_done() => Err(Error::DependencyFailed(
                "the copy's result was already taken".into(),
            )),
            None => Err(Error::Timeout {
                op: "an async copy".into(),
                after: timeout,
            }),
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.dst.is_some() {
            let timeout = self.event.timeout;
            let _ = self.wait_timeout(timeout);
        }
    }
}

/// A copy in flight that owns its destination buffer, for callers that keep
/// buffers in collections (a case runner, a scheduler): [`InFlight::wait`] gives
/// the buffer back with the copy's result, its dirty bits set on success. The
/// source is not held: the caller keeps it unwritten until the wait, as the
/// rules of [`Context::start_buffer_copy`](crate::Context::start_buffer_copy) say.
/// Dropping it waits (up to the context's timeout) and drops the buffer.
#[must_use = "a copy is waited for when its handle is dropped"]
pub struct InFlight {
    event: Event,
    buf: Option<Buffer>,
    /// The destination's dirty bits once done; None when the copy had nothing to do.
    dirty: Option<(bool, bool)>,
    /// An error found before the copy started.
    failed: Option<Error>,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("done", &self.is_done())
            .finish()
    }
}

impl InFlight {
    pub(crate) fn new(event: Event, buf: Buffer, dirty: Option<(bool, bool)>) -> Self {
        InFlight {
            event,
            buf: Some(buf),
            dirty,
            failed: None,
        }
    }

    pub(crate) fn failed(error: Error, buf: Buffer) -> Self {
        InFlight {
            event: Event::done(CopyPath::HostToHost),
            buf: Some(buf),
            dirty: None,
            failed: Some(error),
        }
    }

    /// Whether the copy failed before it started (bad request).
    pub fn failed_at_start(&self) -> bool {
        self.failed.is_some()
    }

    /// Whether the copy has finished.
    pub fn is_done(&self) -> bool {
        self.event.is_done()
    }

    /// The copy's completion, for later copies to wait for.
    pub fn event(&self) -> Event {
        self.event.clone()
    }

    /// Waits for the copy (up to the context's timeout); the buffer, and the path
    /// taken or why the copy failed.
    pub fn wait(mut self) -> (Buffer, Result<CopyPath>) {
        let result = self.finish();
        (self.buf.take().expect("held until the wait"), result)
    }

    fn finish(&mut self) -> Result<CopyPath> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let timeout = self.event.timeout;
        if !self.event.completion.wait_done(timeout) {
            return Err(Error::Timeout {
                op: "an async copy".into(),
                after: timeout,
            });
        }
        let path = match self.event.completion.take() {
            Some(r) => r?,
            None => CopyPath::HostToHost,
        };
        if let (Some(buf), Some(dirty)) = (self.buf.as_mut(), self.dirty) {
            crate::runtime::copy::finish_dirty(buf, dirty);
        }
        Ok(path)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.buf.is_some() {
            let _ = self.finish();
        }
    }
}
