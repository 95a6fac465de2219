//! vkcopy's timed copies: a copy timed by the host clock and GPU timestamps
//! over its runs, beside the reference it is held to (a host memcpy, the
//! runtime's raw copy, or the driver's floor), timed in the same runs.

use super::{Reference, State, StepError, Timed, TimedCopies};
use crate::rt::floor::{self, Floor};
use crate::rt::{CopyPath, Role};
use crate::timing::{self, gbps, HostMemcpy, Samples};
use vkcopy_results::outcome::Measurement;

impl TimedCopies for State<'_> {
    fn set_profiling(&mut self, on: bool) {
        self.ctx.set_profiling(on);
    }

    fn time(
        &mut self,
        timed: &Timed,
        repeat: u32,
        of: Option<&Reference>,
    ) -> Result<(Measurement, Option<Samples>), StepError> {
        time(self, timed, repeat, of)
    }

    fn under_validation(&self) -> bool {
        self.ctx.validation()
    }

    fn measured(&self) -> &[Measurement] {
        &self.measured
    }

    fn record(&mut self, m: Measurement) {
        self.measured.push(m);
    }

    fn take_measured(&mut self) -> Vec<Measurement> {
        std::mem::take(&mut self.measured)
    }
}

/// Runs the copy once untimed (imports, staging and first touches are not timed),
/// then `repeat` times by the host clock, each followed by a run timed by GPU
/// timestamps and, with a `host_memcpy` or `raw_copy` reference, by a run of it;
/// a `floor` is timed after the step's runs, as many.
fn time(
    s: &mut State,
    timed: &Timed,
    repeat: u32,
    of: Option<&Reference>,
) -> Result<(Measurement, Option<Samples>), StepError> {
    let ctx = s.ctx;
    let (what, bytes, role, path) = match timed {
        Timed::CopyToHost(b) => {
            let b = s.get(*b)?;
            let what = format!("copy_to_host {}", b.name());
            let bytes = b.len() * b.elem().bytes() as u64;
            (what, bytes, Some(Role::Readback), CopyPath::DeviceToHost)
        }
        Timed::CopyToDevice(b) => {
            let b = s.get(*b)?;
            let what = format!("copy_to_device {}", b.name());
            let bytes = b.len() * b.elem().bytes() as u64;
            (what, bytes, Some(Role::Upload), CopyPath::HostToDevice)
        }
        Timed::DeviceToDevice { from, to } => {
            let (f, t) = (s.get(*from)?, s.get(*to)?);
            let what = format!("device_to_device {} -> {}", f.name(), t.name());
            let bytes = f.len() * f.elem().bytes() as u64;
            (what, bytes, None, CopyPath::DeviceToDevice)
        }
    };
    let mut memcpy = match of {
        Some(Reference::HostMemcpy) => Some(HostMemcpy::new(bytes).map_err(StepError::Check)?),
        _ => None,
    };
    let raw = match of {
        Some(Reference::RawCopy) => Some(ctx.raw_copy(path, bytes)?),
        _ => None,
    };
    let mut reference_samples = Samples::default();
    let mut reference_error = None;
    let samples = timing::sample(
        ctx,
        &[path],
        (1, repeat),
        || copy_once(s, timed),
        || {
            if let Some(m) = &mut memcpy {
                reference_samples.host.push(m.run());
            }
            if let Some(r) = &raw {
                match r.run() {
                    Ok(t) => reference_samples.host.push(t.as_secs_f64()),
                    Err(e) => reference_error = Some(e),
                }
            }
        },
    )?;
    if let Some(e) = reference_error {
        return Err(StepError::Check(format!("measure: raw_copy: {e}")));
    }
    drop(raw);
    if let Some(Reference::Floor) = of {
        let at = |e: crate::rt::Error| StepError::Check(format!("measure: floor: {e}"));
        let times = Floor::new(ctx)
            .and_then(|f| f.measure(path, bytes, repeat))
            .map_err(at)?;
        if let Some(t) = floor::fastest(&times) {
            reference_samples.host = t.runs.iter().map(|d| d.as_secs_f64()).collect();
        }
    }
    let staging_type = role.and_then(|r| {
        ctx.stats()
            .placements()
            .iter()
            .rev()
            .find(|p| p.role == r)
            .map(|p| p.memory_type)
    });
    let (best, median) = (samples.best(), samples.median());
    let m = Measurement {
        what,
        name: None,
        bytes,
        repeat,
        best_seconds: best,
        median_seconds: median,
        gbps: gbps(bytes, best),
        median_gbps: gbps(bytes, median),
        gpu_best_seconds: samples.gpu_best(),
        gpu_median_seconds: samples.gpu_median(),
        staging_type,
        ratio: None,
        not_held: None,
    };
    Ok((m, of.is_some().then_some(reference_samples)))
}

/// One copy, its source marked as the side holding the data.
fn copy_once(s: &mut State, timed: &Timed) -> Result<(), StepError> {
    let ctx = s.ctx;
    match timed {
        Timed::CopyToHost(b) => {
            let b = s.get_mut(*b)?;
            b.set_host_dirty(false);
            b.set_device_dirty(true);
            ctx.copy_to_host(b)?;
        }
        Timed::CopyToDevice(b) => {
            let b = s.get_mut(*b)?;
            b.set_device_dirty(false);
            b.set_host_dirty(true);
            ctx.copy_to_device(b)?;
        }
        Timed::DeviceToDevice { from, to } => {
            let (src, dst) = s.pair(*from, *to)?;
            if src.host_dirty() || src.device_view().is_none() {
                return Err(StepError::Check(format!(
                    "measure: {} has no up-to-date device data; copy it to the device first",
                    src.name()
                )));
            }
            ctx.buffer_copy(src, dst, true)?;
        }
    }
    Ok(())
}
