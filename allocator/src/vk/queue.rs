//! Device queues and the roles they serve. Blocking copies and kernels go to the
//! first queue of the compute family; async copies to a queue of their own per
//! direction where the device has them (its transfer-only family), so that an
//! upload, a readback and a kernel can run at the same time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;

use crate::vk::adapter::QueueFamily;

/// What a queue is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueRole {
    /// Blocking copies and kernels.
    Compute = 0,
    /// Async host-to-device copies.
    Upload = 1,
    /// Async device-to-host copies.
    Readback = 2,
    /// Async device-to-device copies (a compute queue: the copy kernel runs there).
    Device = 3,
}

/// One device queue. `vkQueueSubmit` needs the queue externally synchronised, and
/// several roles may share one queue, so submissions take its lock.
pub(crate) struct Queue {
    raw: vk::Queue,
    lock: Mutex<()>,
    /// The queue family.
    pub(crate) family: u32,
    /// Index of the queue in its family.
    pub(crate) index: u32,
    /// Whether the family's queues write valid timestamps.
    pub(crate) timestamps: bool,
    /// Whether compute work may run here.
    pub(crate) compute: bool,
    /// The caller submits here too: its queue, or one handed out
    /// ([`Queue::share`]).
    shared: AtomicBool,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "queue {} of family {}", self.index, self.family)
    }
}

impl Queue {
    /// The queue handle, locked for a submission.
    pub(crate) fn lock(&self) -> (vk::Queue, MutexGuard<'_, ()>) {
        (
            self.raw,
            self.lock.lock().unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// Whether the caller's work may come before vkcopy's here, not ending
    /// with vkcopy's barrier (`vk/submit.rs`).
    pub(crate) fn shared(&self) -> bool {
        self.shared.load(Ordering::Acquire)
    }

    /// The queue is handed to the caller, who may submit to it.
    pub(crate) fn share(&self) {
        self.shared.store(true, Ordering::Release);
    }

    /// The caller's queue, of `family`, for every role.
    pub(crate) fn borrowed(raw: vk::Queue, family: &QueueFamily) -> [Arc<Queue>; 4] {
        let q = Arc::new(Queue {
            raw,
            lock: Mutex::new(()),
            family: family.index,
            index: 0,
            timestamps: family.timestamps,
            compute: true,
            shared: AtomicBool::new(true),
        });
        [q.clone(), q.clone(), q.clone(), q]
    }

    /// The queues of every role from the created `families`: the first family is the
    /// compute one, a second one a transfer-only family. Then the copy queues:
    /// queue 0 of every family but the first, the second family's first.
    pub(crate) fn assign(
        device: &ash::Device,
        families: &[QueueFamily],
    ) -> ([Arc<Queue>; 4], Vec<Arc<Queue>>) {
        // One `Queue` (and one lock) per queue, however many roles share it.
        let made: std::cell::RefCell<Vec<Arc<Queue>>> = Default::default();
        let nth = |f: &QueueFamily, i: u32, compute: bool| {
            let index = i.min(f.queues - 1);
            let mut made = made.borrow_mut();
            if let Some(q) = made
                .iter()
                .find(|q| q.family == f.index && q.index == index)
            {
                return q.clone();
            }
            let q = Arc::new(Queue {
                // SAFETY: `f.queues` queues were requested from this family at device
                // creation, and `index` is below that.
                raw: unsafe { device.get_device_queue(f.index, index) },
                lock: Mutex::new(()),
                family: f.index,
                index,
                timestamps: f.timestamps,
                compute,
                shared: AtomicBool::new(false),
            });
            made.push(q.clone());
            q
        };
        let main = &families[0];
        let compute = nth(main, 0, true);
        let second = nth(main, 1, true);
        // Uploads and readbacks on queues of their own: the transfer family's where
        // there is one (it measured faster than compute queues for both at once),
        // else further compute queues.
        let (upload, readback) = match families.get(1) {
            Some(t) => (nth(t, 0, false), nth(t, 1, false)),
            None => (second.clone(), nth(main, 2, true)),
        };
        let copy = families[1..].iter().map(|f| nth(f, 0, false)).collect();
        ([compute, upload, readback, second], copy)
    }
}
