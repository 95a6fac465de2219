//! Submission: one command pool with a few command buffers and fences (lanes),
//! recorded and reused for every submission under one lock. Creating them per
//! copy (as Halide does) costs more than a small copy itself. A plain submission
//! uses lane 0 and waits for it; a pipelined copy keeps several lanes in flight.
//!
//! Work that names its recording with a key (a copy's buffers, offsets and
//! regions) is submitted again as recorded when the lane's last recording had
//! the same key: recording costs a small copy microseconds. A kept recording
//! serves only while no buffer or pipeline was destroyed since
//! ([`DeviceShared::retire`]): a new object may take a destroyed one's handle.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::profile::SubmitSteps;
use crate::vk::device::{DeviceShared, Queue, QueueRole};

/// Command buffers of a submitter; each submission signals the submitter's
/// timeline semaphore with the next value, and a lane is reused once its value
/// is reached.
pub(crate) const LANES: usize = 3;

/// Command buffers after the lanes that hold kept recordings, the one used
/// longest ago recorded over first: a pipeline's upload, copy and readback.
const KEPT: usize = 4;

/// Command buffers of a submitter.
const COMMAND_BUFFERS: usize = LANES + KEPT;

/// Recordings of at most this many copy regions are kept: longer keys cost
/// more to compare than recording saves.
pub(crate) const KEPT_REGIONS: usize = 64;

/// Whether the host touches what a submission writes, once it is done: reads it
/// (a readback), or writes over it with the CPU (device memory that takes
/// uploads written by the CPU, `runtime/mapped.rs`). Then the submission
/// ends with a barrier that makes its writes available to the host, so that
/// none of them lands after the host's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostAccess {
    Yes,
    No,
}

/// How long a wait polls the semaphore without yielding the core; it goes on
/// polling, yielding, up to the device's `spin`.
const SPIN: Duration = Duration::from_micros(200);

struct Lane {
    cmd: vk::CommandBuffer,
    /// The timeline value its last submission signals; 0 when never submitted.
    value: u64,
    /// What the command buffer holds, when it may be submitted again as it is.
    kept: Option<Kept>,
}

/// A recording kept for submitting again: its key, whether it ends with the
/// barrier to the host and begins with one, which timestamps it writes
/// ([`Lanes::stamps`]), and the device's [`DeviceShared::retired`] count when
/// it was made.
#[derive(Debug, PartialEq, Eq)]
struct Kept {
    key: Vec<u64>,
    host_reads: bool,
    lead: bool,
    stamps: (bool, bool),
    retired: u64,
}

struct Commands {
    pool: vk::CommandPool,
    lanes: Vec<Lane>,
    /// Two timestamps around the recorded work, when the queue has timestamps.
    queries: Option<vk::QueryPool>,
    /// The last value submitted.
    submitted: u64,
    /// The last value the host saw reached.
    reached: u64,
    /// What earlier submissions waited for ([`Waited`]).
    waited: Waited,
}

/// The other semaphores' values that earlier submissions waited for: a wait
/// orders every later submission of the queue as well, and each costs the
/// device microseconds, so a value is waited for once. Cleared when a
/// semaphore is forgotten, as a new one may take its handle.
#[derive(Default)]
struct Waited {
    values: Vec<(vk::Semaphore, u64)>,
    forgotten: u64,
}

impl Waited {
    /// Of `waits`, those no earlier submission waited for (`forgotten` as
    /// [`DeviceShared::waits_for`] says).
    fn new_of(
        &mut self,
        (waits, forgotten): (Vec<(vk::Semaphore, u64)>, u64),
    ) -> Vec<(vk::Semaphore, u64)> {
        if forgotten != self.forgotten {
            *self = Waited {
                values: Vec::new(),
                forgotten,
            };
        }
        let seen =
            |&(s, v): &(vk::Semaphore, u64)| self.values.iter().any(|&(w, at)| w == s && at >= v);
        waits.into_iter().filter(|w| !seen(w)).collect()
    }

    /// A submission waited for `waits`.
    fn add(&mut self, waits: &[(vk::Semaphore, u64)]) {
        for &(s, v) in waits {
            match self.values.iter_mut().find(|(w, _)| *w == s) {
                Some(e) => e.1 = e.1.max(v),
                None => self.values.push((s, v)),
            }
        }
    }
}

pub(crate) struct Submitter {
    device: Arc<DeviceShared>,
    queue: Arc<Queue>,
    role: QueueRole,
    /// It submits blocking work (an async copy's stream submits the rest).
    blocking: bool,
    semaphore: vk::Semaphore,
    inner: Mutex<Commands>,
    timestamp_period: f32,
}

/// Frees what `new` made so far when it fails half-way.
struct Partial<'a> {
    device: &'a ash::Device,
    pool: vk::CommandPool,
    semaphore: vk::Semaphore,
}

impl Drop for Partial<'_> {
    fn drop(&mut self) {
        // SAFETY: nothing was submitted; freeing the pool frees its command buffers;
        // destroying a null semaphore is allowed.
        unsafe {
            self.device.destroy_semaphore(self.semaphore, None);
            self.device.destroy_command_pool(self.pool, None);
        }
    }
}

impl Submitter {
    /// Commands for the queue of `role`, for blocking work or an async copy's
    /// stream; timestamps when its family has them and runs compute work.
    pub(crate) fn new(shared: &Arc<DeviceShared>, role: QueueRole, blocking: bool) -> Result<Self> {
        Self::on_queue(shared, shared.queue(role).clone(), role, blocking)
    }

    /// As [`Submitter::new`], on `queue`, for work of `role`.
    pub(crate) fn on_queue(
        shared: &Arc<DeviceShared>,
        queue: Arc<Queue>,
        role: QueueRole,
        blocking: bool,
    ) -> Result<Self> {
        let device = &shared.raw();
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(queue.family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create info; destroyed in drop (or by Partial on failure).
        let pool =
            unsafe { device.create_command_pool(&pool_info, None) }.vk("vkCreateCommandPool")?;
        let mut partial = Partial {
            device,
            pool,
            semaphore: vk::Semaphore::null(),
        };
        let mut timeline = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut timeline);
        // SAFETY: valid create info (timeline semaphores are enabled); destroyed in drop.
        partial.semaphore =
            unsafe { device.create_semaphore(&info, None) }.vk("vkCreateSemaphore")?;
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(COMMAND_BUFFERS as u32);
        // SAFETY: the pool is alive and owned by this device.
        let cmds =
            unsafe { device.allocate_command_buffers(&alloc) }.vk("vkAllocateCommandBuffers")?;
        // vkCmdResetQueryPool needs a graphics or compute queue: a transfer-only
        // queue's work is timed on the host.
        let timestamp_period =
            (queue.timestamps && queue.compute).then_some(shared.info.timestamp_period);
        let queries = match timestamp_period {
            None => None,
            Some(_) => {
                let info = vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2);
                // SAFETY: valid create info; destroyed in drop.
                Some(unsafe { device.create_query_pool(&info, None) }.vk("vkCreateQueryPool")?)
            }
        };
        let semaphore = partial.semaphore;
        std::mem::forget(partial);
        let stats = &shared.stats;
        stats.command_pool_created();
        for _ in 0..COMMAND_BUFFERS {
            stats.command_buffer_created();
        }
        stats.fence_created();
        stats.submitter_kept(COMMAND_BUFFERS as u64);
        Ok(Submitter {
            device: shared.clone(),
            queue,
            role,
            blocking,
            semaphore,
            inner: Mutex::new(Commands {
                pool,
                lanes: cmds
                    .into_iter()
                    .map(|cmd| Lane {
                        cmd,
                        value: 0,
                        kept: None,
                    })
                    .collect(),
                queries,
                submitted: 0,
                reached: 0,
                waited: Waited::default(),
            }),
            timestamp_period: timestamp_period.unwrap_or(0.0),
        })
    }

    /// The queue this submitter uses.
    pub(crate) fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Records with `record`, submits, and waits for it. Submissions are
    /// serialised: the command buffers are used by one thread at a time.
    pub(crate) fn run(&self, record: impl FnOnce(vk::CommandBuffer)) -> Result<()> {
        self.run_timed(false, record).map(|_| ())
    }

    /// As [`Submitter::run`]; with `timed`, also returns the GPU time of the recorded
    /// work in nanoseconds, from two timestamp queries.
    pub(crate) fn run_timed(
        &self,
        timed: bool,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<Option<u64>> {
        let mut lanes = self.lanes(timed);
        lanes.submit(0, true, record)?;
        lanes.finish()
    }

    /// [`Submitter::run_timed`] where the host touches what the work writes, else
    /// [`Submitter::run_on_device`].
    pub(crate) fn run_with(
        &self,
        timed: bool,
        host: HostAccess,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<Option<u64>> {
        self.run_kept(None, timed, host, record)
    }

    /// As [`Submitter::run_with`], for work that `key` names: every input of
    /// `record` that its commands depend on. When one of the kept command buffers
    /// holds a recording of the same key and nothing was destroyed since, it is
    /// submitted again as it is, timed or not (a timed recording resets its
    /// queries itself).
    pub(crate) fn run_kept(
        &self,
        key: Option<Vec<u64>>,
        timed: bool,
        host: HostAccess,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<Option<u64>> {
        let mut lanes = self.lanes(timed);
        lanes.host_access(host);
        lanes.submit_on(0, true, key, record)?;
        lanes.finish()
    }

    /// As [`Submitter::run_timed`], for work whose writes the host does not read
    /// afterwards (device-to-device copies, uploads): no barrier to the host stage
    /// at its end, which costs a small copy a few microseconds.
    pub(crate) fn run_on_device(
        &self,
        timed: bool,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<Option<u64>> {
        let mut lanes = self.lanes(timed);
        lanes.device_only();
        lanes.submit(0, true, record)?;
        lanes.finish()
    }

    /// The lanes, for several submissions in flight; held until dropped.
    pub(crate) fn lanes(&self, timed: bool) -> Lanes<'_> {
        let asked = self.device.trace.enabled().then(Instant::now);
        let c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let queries = c.queries.filter(|_| timed);
        let steps = asked.map(|t| Steps {
            at: Instant::now(),
            done: SubmitSteps {
                lock_ns: t.elapsed().as_nanos() as u64,
                ..SubmitSteps::default()
            },
        });
        Lanes {
            submitter: self,
            c,
            queries,
            started: false,
            host_reads: true,
            lead: self.queue.shared(),
            steps,
        }
    }

    /// Waits until the semaphore reaches `value`, polling first (a blocking wait
    /// costs a wake-up of tens of microseconds after the work ends, so the wait
    /// polls as CUDA's default synchronisation does, yielding the core after
    /// [`SPIN`]) up to the device's `spin`, then blocking up to its timeout.
    fn wait_value(&self, c: &mut Commands, value: u64) -> Result<()> {
        if c.reached >= value {
            return Ok(());
        }
        let device = &self.device;
        let raw = &device.raw();
        let start = Instant::now();
        let (poll_until, spin_until) = (start + SPIN, start + SPIN.max(device.spin));
        loop {
            // SAFETY: the semaphore belongs to this device and is a timeline semaphore.
            let now = unsafe { raw.get_semaphore_counter_value(self.semaphore) }
                .map_err(|r| device.wait_failed("vkGetSemaphoreCounterValue", r))?;
            if now >= value {
                return self.reached(c, now);
            }
            let t = Instant::now();
            if t >= spin_until {
                break;
            }
            if t < poll_until {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let semaphores = [self.semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&semaphores)
            .values(&values);
        let timeout = device.timeout;
        // SAFETY: as above; the wait is bounded by the timeout.
        match unsafe { raw.wait_semaphores(&info, timeout.as_nanos() as u64) } {
            Ok(()) => self.reached(c, value),
            Err(vk::Result::TIMEOUT) => Err({
                device.timed_out();
                Error::Timeout {
                    op: format!(
                        "vkWaitSemaphores for {:?} work on {:?}",
                        self.role, self.queue
                    ),
                    after: timeout,
                }
            }),
            Err(r) => Err(device.wait_failed("vkWaitSemaphores", r)),
        }
    }

    /// Whether it submits blocking work (an async copy's stream submits the rest).
    pub(crate) fn blocking(&self) -> bool {
        self.blocking
    }

    /// Whether its submissions count as work in flight: blocking work does; an
    /// async copy's stream counts the whole copy instead.
    fn counted(&self) -> bool {
        self.blocking()
    }

    fn reached(&self, c: &mut Commands, value: u64) -> Result<()> {
        if self.counted() && c.reached < c.submitted && value >= c.submitted {
            self.device.stats.work_ended();
        }
        c.reached = c.reached.max(value);
        self.device.reached(self.semaphore, c.reached);
        Ok(())
    }
}

/// The submitter's lanes, locked. Every lane is waited for before they are
/// released (up to the device's timeout), so nothing recorded here is pending
/// afterwards unless a wait timed out; then the lane stays pending and is waited
/// for again before its next use.
pub(crate) struct Lanes<'a> {
    submitter: &'a Submitter,
    c: MutexGuard<'a, Commands>,
    /// Timestamps from the first submission to the last.
    queries: Option<vk::QueryPool>,
    started: bool,
    /// Submissions end with a barrier that makes their writes visible to the host.
    host_reads: bool,
    /// Submissions begin with a barrier too: the caller's work may come first
    /// on the queue.
    lead: bool,
    /// The steps so far and when the last ended, while the device is traced.
    steps: Option<Steps>,
}

struct Steps {
    at: Instant,
    done: SubmitSteps,
}

impl Steps {
    /// Nanoseconds since the last step ended; this step ends now.
    fn lap(&mut self) -> u64 {
        let now = Instant::now();
        let ns = (now - self.at).as_nanos() as u64;
        self.at = now;
        ns
    }
}

impl Lanes<'_> {
    /// The host reads nothing these submissions write: they end without a barrier
    /// to the host stage.
    pub(crate) fn device_only(&mut self) {
        self.host_reads = false;
    }

    /// [`Lanes::device_only`] unless the host touches what they write.
    pub(crate) fn host_access(&mut self, host: HostAccess) {
        if host == HostAccess::No {
            self.device_only();
        }
    }

    /// Records with `record` on lane `i` (waiting for its earlier work first) and
    /// submits it. `last` says that no later submission belongs to this timing.
    pub(crate) fn submit(
        &mut self,
        i: usize,
        last: bool,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<()> {
        self.submit_kept(i, last, None, record)
    }

    /// The timestamps a recording at this point of the timing writes: the
    /// first (with the queries' reset) and, where `last`, the last.
    fn stamps(&self, last: bool) -> (bool, bool) {
        let timed = self.queries.is_some();
        (timed && !self.started, timed && last)
    }

    /// The command buffer for work that `key` names, `last` of its timing: the
    /// kept one that holds its recording, else the kept one used longest ago;
    /// lane 0 for work without a key.
    fn kept_lane(&self, key: Option<&[u64]>, last: bool) -> usize {
        let Some(key) = key else {
            return 0;
        };
        let retired = self.submitter.device.retired();
        let stamps = self.stamps(last);
        let lanes = &self.c.lanes;
        let holds = |i: &usize| {
            lanes[*i].kept.as_ref().is_some_and(|k| {
                k.key == key
                    && k.host_reads == self.host_reads
                    && k.lead == self.lead
                    && k.stamps == stamps
                    && k.retired == retired
            })
        };
        let kept = LANES..lanes.len();
        kept.clone()
            .find(holds)
            .or_else(|| kept.min_by_key(|&i| lanes[i].value))
            .unwrap_or(0)
    }

    /// [`Lanes::submit`] on lane `i`, or, for work that `key` names, on the
    /// kept command buffer for it ([`Submitter::run_kept`]). Returns the lane
    /// submitted, to wait for.
    pub(crate) fn submit_on(
        &mut self,
        i: usize,
        last: bool,
        key: Option<Vec<u64>>,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<usize> {
        let lane = match &key {
            Some(_) => self.kept_lane(key.as_deref(), last),
            None => i,
        };
        self.submit_kept(lane, last, key, record)?;
        Ok(lane)
    }

    /// [`Lanes::submit`] for work that `key` names, on lane `i`.
    fn submit_kept(
        &mut self,
        i: usize,
        last: bool,
        key: Option<Vec<u64>>,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<()> {
        self.wait(i)?;
        let stamps = self.stamps(last);
        if stamps.0 {
            // The queries are reset in this submission: none may be pending in
            // another lane (one left by a wait that timed out).
            let submitted = self.c.submitted;
            self.submitter.wait_value(&mut self.c, submitted)?;
        }
        let shared = &self.submitter.device;
        shared.usable("a submission")?;
        // Read before recording: a retirement during it only makes the count stale.
        let kept = key.map(|key| Kept {
            key,
            host_reads: self.host_reads,
            lead: self.lead,
            stamps,
            retired: shared.retired(),
        });
        let lane = &mut self.c.lanes[i];
        if kept.is_none() || lane.kept != kept {
            lane.kept = None;
            self.record(i, last, kept.is_none(), record)?;
            self.c.lanes[i].kept = kept;
        } else {
            shared.stats.recording_submitted_again();
            // The timing's first timestamp is in the kept recording.
            self.started |= stamps.0;
            if let Some(s) = &mut self.steps {
                s.done.record_ns += s.lap();
            }
        }
        let submitted = self.queue_submit(i);
        if submitted.is_err() {
            self.c.lanes[i].kept = None;
        }
        submitted
    }

    /// Records lane `i`'s command buffer: the barrier before where the caller
    /// shares the queue, `record`, the barrier after (to the host too where it
    /// reads the writes). `once`: it is submitted only once.
    fn record(
        &mut self,
        i: usize,
        last: bool,
        once: bool,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<()> {
        let shared = &self.submitter.device;
        let device = &shared.raw();
        let cmd = self.c.lanes[i].cmd;
        let flags = match once {
            true => vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT,
            false => vk::CommandBufferUsageFlags::empty(),
        };
        let begin = vk::CommandBufferBeginInfo::default().flags(flags);
        // SAFETY: the lane's command buffer is not pending: it was waited for above.
        unsafe {
            device
                .reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                .vk("vkResetCommandBuffer")?;
            device
                .begin_command_buffer(cmd, &begin)
                .vk("vkBeginCommandBuffer")?;
        }
        // Every submission ends with one barrier: its transfer and compute
        // accesses before every later one of its queue (a semaphore wait on
        // the host orders the host, not later device work), and its writes
        // visible to the host where the host reads them. One barrier there
        // costs a readback less than one here and one there. Where work of the
        // caller's may come first on the queue ([`Queue::shared`]), which need
        // not end so, a submission begins with the same barrier too.
        // A transfer-only queue has no shader stage: its barriers cover transfers only.
        let (device_stages, writes, reads) = match self.submitter.queue.compute {
            true => (
                vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::AccessFlags::TRANSFER_WRITE | vk::AccessFlags::SHADER_WRITE,
                vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::SHADER_READ,
            ),
            false => (
                vk::PipelineStageFlags::TRANSFER,
                vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::TRANSFER_READ,
            ),
        };
        let before = [vk::MemoryBarrier::default()
            .src_access_mask(writes)
            .dst_access_mask(reads | writes)];
        let (after_stages, after_access) = match self.host_reads {
            true => (
                device_stages | vk::PipelineStageFlags::HOST,
                reads | writes | vk::AccessFlags::HOST_READ,
            ),
            false => (device_stages, reads | writes),
        };
        let after = [vk::MemoryBarrier::default()
            .src_access_mask(writes)
            .dst_access_mask(after_access)];
        if self.lead {
            // SAFETY: the command buffer is recording.
            unsafe {
                device.cmd_pipeline_barrier(
                    cmd,
                    device_stages,
                    device_stages,
                    vk::DependencyFlags::empty(),
                    &before,
                    &[],
                    &[],
                );
            }
        }
        if let (Some(q), false) = (self.queries, self.started) {
            // SAFETY: recording; the pool has two queries, reset before being written;
            // no earlier submission using them is pending (all lanes were waited for
            // before the lock was last released).
            unsafe {
                device.cmd_reset_query_pool(cmd, q, 0, 2);
                device.cmd_write_timestamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, q, 0);
            }
        }
        self.started = true;
        record(cmd);
        if let (Some(q), true) = (self.queries, last) {
            // SAFETY: recording; query 1 was reset by the first submission of this timing.
            unsafe {
                device.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, q, 1)
            };
        }
        // SAFETY: as above.
        unsafe {
            device.cmd_pipeline_barrier(
                cmd,
                device_stages,
                after_stages,
                vk::DependencyFlags::empty(),
                &after,
                &[],
                &[],
            );
        }
        // SAFETY: as above.
        unsafe { device.end_command_buffer(cmd).vk("vkEndCommandBuffer")? };
        if let Some(s) = &mut self.steps {
            s.done.record_ns += s.lap();
        }
        Ok(())
    }

    /// Submits lane `i`'s recorded command buffer, signalling the next value.
    fn queue_submit(&mut self, i: usize) -> Result<()> {
        let shared = &self.submitter.device;
        let device = &shared.raw();
        let cmd = self.c.lanes[i].cmd;
        // Work of other queues that the host saw finish is visible to this one.
        let semaphore = self.submitter.semaphore;
        let waits = self.c.waited.new_of(shared.waits_for(semaphore));
        let (wait_sems, wait_values): (Vec<_>, Vec<_>) = waits.iter().copied().unzip();
        let stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; wait_sems.len()];
        let value = self.c.submitted + 1;
        let signal = [semaphore];
        let signal_values = [value];
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_values)
            .signal_semaphore_values(&signal_values);
        let cmds = [cmd];
        let submit = [vk::SubmitInfo::default()
            .command_buffers(&cmds)
            .wait_semaphores(&wait_sems)
            .wait_dst_stage_mask(&stages)
            .signal_semaphores(&signal)
            .push_next(&mut timeline)];
        let (queue, _guard) = self.submitter.queue.lock();
        // SAFETY: recording is complete; the queue is locked; the signalled value is
        // above every value submitted before.
        unsafe { device.queue_submit(queue, &submit, vk::Fence::null()) }
            .map_err(|r| shared.error("vkQueueSubmit", r))?;
        self.c.waited.add(&waits);
        if let Some(s) = &mut self.steps {
            s.done.submit_ns += s.lap();
        }
        if self.submitter.counted() && self.c.reached == self.c.submitted {
            shared.stats.work_started();
        }
        self.c.submitted = value;
        self.c.lanes[i].value = value;
        Ok(())
    }

    /// Waits until lane `i`'s work is done (at once if nothing is pending there).
    pub(crate) fn wait(&mut self, i: usize) -> Result<()> {
        let value = self.c.lanes[i].value;
        self.submitter.wait_value(&mut self.c, value)?;
        if let Some(s) = &mut self.steps {
            s.done.wait_ns += s.lap();
        }
        Ok(())
    }

    /// Waits for every lane; the GPU time from the first submission to the last in
    /// nanoseconds, when timed.
    pub(crate) fn finish(mut self) -> Result<Option<u64>> {
        let last = self.c.submitted;
        self.submitter.wait_value(&mut self.c, last)?;
        let mut steps = self.steps.take().map(|mut s| {
            s.done.wait_ns += s.lap();
            s.done
        });
        let trace = &self.submitter.device.trace;
        let Some(q) = self.queries.filter(|_| self.started) else {
            if let Some(s) = steps {
                trace.push(s);
            }
            return Ok(None);
        };
        let device = &self.submitter.device.raw();
        let mut ticks = [0u64; 2];
        // SAFETY: both queries were written by submissions that were waited for.
        unsafe {
            device
                .get_query_pool_results(q, 0, &mut ticks, vk::QueryResultFlags::TYPE_64)
                .vk("vkGetQueryPoolResults")?;
        }
        let period = self.submitter.timestamp_period as f64;
        let gpu = (ticks[1].saturating_sub(ticks[0]) as f64 * period) as u64;
        if let Some(mut s) = steps.take() {
            s.gpu_ns = Some(gpu);
            trace.push(s);
        }
        Ok(Some(gpu))
    }
}

impl Drop for Lanes<'_> {
    fn drop(&mut self) {
        // After an error nothing may stay pending when the lock is released, unless
        // the wait itself fails (then the lanes are waited for before their reuse).
        let last = self.c.submitted;
        let _ = self.submitter.wait_value(&mut self.c, last);
    }
}

impl Drop for Submitter {
    fn drop(&mut self) {
        let c = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        let last = c.submitted;
        let mut c = std::mem::replace(
            c,
            Commands {
                pool: vk::CommandPool::null(),
                lanes: Vec::new(),
                queries: None,
                submitted: last,
                reached: 0,
                waited: Waited::default(),
            },
        );
        if self.wait_value(&mut c, last).is_err() && !self.device.is_lost() {
            // Still running after the timeout: its objects cannot be destroyed while
            // in use, so they are left to the device's teardown.
            return;
        }
        let device = &self.device.raw();
        self.device.forget(self.semaphore);
        // SAFETY: every submission was waited for (or the device is lost), and
        // nothing records into the command buffers any more.
        unsafe {
            if let Some(q) = c.queries {
                device.destroy_query_pool(q, None);
            }
            device.destroy_semaphore(self.semaphore, None);
            device.destroy_command_pool(c.pool, None);
        }
        let stats = &self.device.stats;
        stats.command_pool_destroyed();
        for _ in 0..COMMAND_BUFFERS {
            stats.command_buffer_destroyed();
        }
        stats.fence_destroyed();
        stats.submitter_released(COMMAND_BUFFERS as u64);
    }
}

#[cfg(test)]
mod tests {
    use ash::vk::Handle;

    use super::*;

    #[test]
    fn a_value_is_waited_for_once_until_a_semaphore_is_forgotten() {
        let (a, b) = (vk::Semaphore::from_raw(1), vk::Semaphore::from_raw(2));
        let mut w = Waited::default();
        let first = w.new_of((vec![(a, 5), (b, 3)], 0));
        assert_eq!(first, [(a, 5), (b, 3)]);
        w.add(&first);
        // Met already: nothing; a higher value: waited for.
        assert_eq!(w.new_of((vec![(a, 5), (b, 3)], 0)), []);
        assert_eq!(w.new_of((vec![(a, 4), (b, 7)], 0)), [(b, 7)]);
        w.add(&[(b, 7)]);
        assert_eq!(w.new_of((vec![(b, 6)], 0)), []);
        // A forgotten semaphore's handle may be a new semaphore's: all again.
        assert_eq!(w.new_of((vec![(a, 1), (b, 3)], 1)), [(a, 1), (b, 3)]);
    }
}
