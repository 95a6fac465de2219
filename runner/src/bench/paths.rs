//! The copy paths of the bench, named as the CUDA reference names them, and
//! one copy of each on a context.

use vkcopy_engine::rt::{Buffer, Context, CopyPath, Error};

/// A copy path of the sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum BenchPath {
    /// Device to host: `copy_to_host`.
    Readback,
    /// Host to device: `copy_to_device`.
    Upload,
    /// `buffer_copy` between two device buffers.
    DeviceToDevice,
    /// An upload then a readback of the same buffer: a latency.
    RoundTrip,
}

/// Round trips measure latency: sizes up to this only, as the CUDA reference.
pub const ROUND_TRIP_MAX: u64 = 64 << 10;

impl BenchPath {
    pub const ALL: [BenchPath; 4] = [
        BenchPath::Readback,
        BenchPath::Upload,
        BenchPath::DeviceToDevice,
        BenchPath::RoundTrip,
    ];

    /// The name in the JSON's `path`.
    pub fn name(self) -> &'static str {
        match self {
            BenchPath::Readback => "readback",
            BenchPath::Upload => "upload",
            BenchPath::DeviceToDevice => "device_to_device",
            BenchPath::RoundTrip => "round_trip",
        }
    }

    /// The runtime's copy paths one copy takes, whose GPU times it sums.
    pub fn copy_paths(self) -> &'static [CopyPath] {
        match self {
            BenchPath::Readback => &[CopyPath::DeviceToHost],
            BenchPath::Upload => &[CopyPath::HostToDevice],
            BenchPath::DeviceToDevice => &[CopyPath::DeviceToDevice],
            BenchPath::RoundTrip => &[CopyPath::HostToDevice, CopyPath::DeviceToHost],
        }
    }

    /// Whether a copy of this path reads or writes host memory.
    pub fn uses_host(self) -> bool {
        self != BenchPath::DeviceToDevice
    }
}

/// The buffers of one measurement: `b` alone, or `a` copied to `b` on the device.
pub struct Pair {
    pub a: Option<Buffer>,
    pub b: Buffer,
}

/// One copy of `path`; the dirty bits are set first so that the runtime copies.
pub fn copy(ctx: &Context, path: BenchPath, bufs: &mut Pair) -> Result<(), Error> {
    let b = &mut bufs.b;
    match path {
        BenchPath::Readback => readback(ctx, b),
        BenchPath::Upload => upload(ctx, b),
        BenchPath::RoundTrip => {
            upload(ctx, b)?;
            readback(ctx, b)
        }
        BenchPath::DeviceToDevice => {
            let a = bufs.a.as_ref().expect("device_to_device has a source");
            ctx.buffer_copy(a, b, true).map(|_| ())
        }
    }
}

fn readback(ctx: &Context, b: &mut Buffer) -> Result<(), Error> {
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    ctx.copy_to_host(b)
}

fn upload(ctx: &Context, b: &mut Buffer) -> Result<(), Error> {
    b.set_device_dirty(false);
    b.set_host_dirty(true);
    ctx.copy_to_device(b)
}
