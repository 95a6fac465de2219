//! Streams: one worker thread per async queue role (upload, readback, device
//! copy), each with its own submitter on that role's queue. A stream runs its
//! jobs in order; jobs of different streams run at the same time, so an upload,
//! a readback and the caller's kernels overlap where the device has the queues.
//! Threads start on first use and end when the context is dropped, which
//! waits for them: a thread left running would destroy its submitter (and
//! perhaps the device) while the next context is made, or while the process
//! exits, and the validation layer does not survive that (TESTING.md).

use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::vk::device::{DeviceShared, QueueRole};
use crate::vk::submit::Submitter;

/// Work for a stream, given the stream's submitter.
pub(crate) type Job = Box<dyn FnOnce(&Submitter) + Send>;

/// The async streams of a context.
#[derive(Default)]
pub(crate) struct Streams {
    upload: OnceLock<Mutex<mpsc::Sender<Job>>>,
    readback: OnceLock<Mutex<mpsc::Sender<Job>>>,
    device: OnceLock<Mutex<mpsc::Sender<Job>>>,
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
    pub(crate) fn send(&self, device: &Arc<DeviceShared>, role: QueueRole, job: Job) -> Result<()> {
        let (slot, name) = match role {
            QueueRole::Upload => (&self.upload, "vkcopy-upload"),
            QueueRole::Readback => (&self.readback, "vkcopy-readback"),
            _ => (&self.device, "vkcopy-device-copy"),
        };
        let tx = match slot.get() {
            Some(tx) => tx,
            None => {
                let (tx, thread) = start(device, role, name)?;
                self.threads
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(thread);
                // Another thread may have started the stream meanwhile; its sender wins
                // and this one's thread ends at once.
                slot.get_or_init(|| Mutex::new(tx))
            }
        };
        let tx = tx.lock().unwrap_or_else(|p| p.into_inner());
        tx.send(job)
            .map_err(|_| Error::DeviceLost(format!("{name}: the stream's thread is gone")))
    }
}

/// A stream's thread, with its submitter made here so that failures are returned.
fn start(
    device: &Arc<DeviceShared>,
    role: QueueRole,
    name: &str,
) -> Result<(mpsc::Sender<Job>, std::thread::JoinHandle<()>)> {
    let submitter = Submitter::new(device, role, false)?;
    let (tx, rx) = mpsc::channel::<Job>();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            for job in rx {
                job(&submitter);
            }
        })
        .map_err(|e| Error::DeviceLost(format!("cannot start {name}: {e}")))?;
    Ok((tx, thread))
}
