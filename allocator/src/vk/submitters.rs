//! Submitters for blocking work: one for each thread submitting at the same
//! time, so that threads sharing a context have work in flight together on the
//! queue instead of waiting for each other's submissions to finish.

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::vk::device::{DeviceShared, Queue, QueueRole};
use crate::vk::submit::Submitter;

pub(crate) struct Submitters {
    device: Arc<DeviceShared>,
    queue: Arc<Queue>,
    role: QueueRole,
    idle: Mutex<Vec<Submitter>>,
}

/// A submitter taken from [`Submitters`]; given back when dropped.
pub(crate) struct Taken<'a> {
    pool: &'a Submitters,
    sub: Option<Submitter>,
}

impl Submitters {
    /// A pool for `role`, holding one submitter made now (so that a device that
    /// cannot make one fails at once).
    pub(crate) fn new(device: &Arc<DeviceShared>, role: QueueRole) -> Result<Self> {
        Self::on_queue(device, device.queue(role).clone(), role)
    }

    /// As [`Submitters::new`], on `queue`, for work of `role`.
    pub(crate) fn on_queue(
        device: &Arc<DeviceShared>,
        queue: Arc<Queue>,
        role: QueueRole,
    ) -> Result<Self> {
        let first = Submitter::on_queue(device, queue.clone(), role, true)?;
        Ok(Submitters {
            device: device.clone(),
            queue,
            role,
            idle: Mutex::new(vec![first]),
        })
    }

    /// An idle submitter, or a new one when every one is in use.
    pub(crate) fn take(&self) -> Result<Taken<'_>> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let sub = match idle {
            Some(s) => s,
            None => Submitter::on_queue(&self.device, self.queue.clone(), self.role, true)?,
        };
        Ok(Taken {
            pool: self,
            sub: Some(sub),
        })
    }
}

impl Deref for Taken<'_> {
    type Target = Submitter;
    fn deref(&self) -> &Submitter {
        self.sub.as_ref().expect("present until dropped")
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let Some(sub) = self.sub.take() else {
            return;
        };
        // Kept, however many threads submitted at once: a destroyed submitter's
        // semaphore would leave the list other queues' submissions wait for,
        // and with it the order of its writes before theirs.
        let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.push(sub);
    }
}
