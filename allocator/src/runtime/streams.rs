//! Streams: one worker thread per async queue role (upload, readback, device
//! copy), each with its own submitter on that role's queue. A stream runs its
//! jobs in order; jobs of different streams run at the same time, so an upload,
//! a readback and the caller's kernels overlap where the device has the queues.
//! Threads start on first use and end when the context is dropped, which
//! waits for them: a thread left running would destroy its submitter (and
//! perhaps the device) while the next context is made, or while the process
//! exits, and the validation layer does not survive that (TESTING.md).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::vk::device::{DeviceShared, QueueRole};
use crate::vk::submit::Submitter;

/// Work for a stream, given the stream's submitter and its [`Busy`].
pub(crate) type Job = Box<dyn FnOnce(&Submitter, &Busy) + Send>;

/// A stream's share of the work in flight (`Stats::work_in_flight`): one from
/// the moment a copy on it is ready to run (when it is started, or once the
/// copies it waits for are done) until it has run every ready copy. Copies of
/// one stream run one after another, so they count once; copies of different
/// streams count once each, however the threads are scheduled.
pub(crate) struct Busy {
    ready: AtomicU64,
    device: Arc<DeviceShared>,
}

impl Busy {
    /// A copy is ready to run on the stream.
    pub(crate) fn ready(&self) {
        if self.ready.fetch_add(1, Ordering::AcqRel) == 0 {
            self.device.stats.work_started();
        }
    }

    /// A ready copy has run.
    pub(crate) fn done(&self) {
        if self.ready.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.device.stats.work_ended();
        }
    }
}

/// One stream: the sender of its thread's jobs.
struct Stream {
    tx: Mutex<mpsc::Sender<Job>>,
    busy: Arc<Busy>,
}

/// The async streams of a context.
#[derive(Default)]
pub(crate) struct Streams {
    upload: OnceLock<Stream>,
    readback: OnceLock<Stream>,
    device: OnceLock<Stream>,
    /// The streams' threads, joined on drop.
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Drop for Streams {
    fn drop(&mut self) {
        // Closing the channels ends the threads' loops once their jobs are done.
        drop((self.upload.take(), self.readback.take(), self.device.take()));
        let me = std::thread::current().id();
        let threads = std::mem::take(self.threads.get_mut().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            // A context dropped by its own stream's job cannot wait for itself.
            if t.thread().id() != me {
                // A job that panicked already failed its copy (its event says so);
                // nothing is left to report here.
                let _ = t.join();
            }
        }
    }
}

impl Streams {
    /// Queues `job` on the stream of `role`, starting the stream if needed.
    /// `ready`: it may run at once (else it calls [`Busy::ready`] when it may);
    /// either way it calls [`Busy::done`] once it has run.
    pub(crate) fn send(
        &self,
        device: &Arc<DeviceShared>,
        role: QueueRole,
        ready: bool,
        job: Job,
    ) -> Result<()> {
        let (slot, name) = match role {
            QueueRole::Upload => (&self.upload, "vkcopy-upload"),
            QueueRole::Readback => (&self.readback, "vkcopy-readback"),
            _ => (&self.device, "vkcopy-device-copy"),
        };
        let stream = match slot.get() {
            Some(s) => s,
            None => {
                let (stream, thread) = start(device, role, name)?;
                self.threads
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(thread);
                // Another thread may have started the stream meanwhile; its sender wins
                // and this one's thread ends at once.
                slot.get_or_init(|| stream)
            }
        };
        let tx = stream.tx.lock().unwrap_or_else(|p| p.into_inner());
        if ready {
            stream.busy.ready();
        }
        tx.send(job).map_err(|_| {
            if ready {
                stream.busy.done();
            }
            Error::DeviceLost(format!("{name}: the stream's thread is gone"))
        })
    }
}

/// A stream's thread, with its submitter made here so that failures are returned.
fn start(
    device: &Arc<DeviceShared>,
    role: QueueRole,
    name: &str,
) -> Result<(Stream, std::thread::JoinHandle<()>)> {
    let submitter = Submitter::new(device, role, false)?;
    let (tx, rx) = mpsc::channel::<Job>();
    let busy = Arc::new(Busy {
        ready: AtomicU64::new(0),
        device: device.clone(),
    });
    let on_thread = busy.clone();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            for job in rx {
                job(&submitter, &on_thread);
            }
        })
        .map_err(|e| Error::DeviceLost(format!("cannot start {name}: {e}")))?;
    let stream = Stream {
        tx: Mutex::new(tx),
        busy,
    };
    Ok((stream, thread))
}
