//! Running the caller's compute shader over vkcopy buffers, crops and views, with
//! the runtime doing what Halide's pipelines do around a kernel: inputs that are
//! host-dirty are uploaded, outputs get device memory when they have none, the
//! descriptors are written and the dispatch synchronised
//! ([`Context::dispatch`]), and outputs end device-dirty, their views told
//! ([`Buffer::set_device_dirty`]). The built-in kernels of `vkcopy-kernels` run
//! through here too.
//!
//! The shader's contract is [`Context::dispatch`]'s: entry point `main`, storage
//! buffers at bindings `0..n` of set 0 in the order of the arguments, a
//! grid-stride loop. A crop or view is bound with its whole region: the element at
//! its mins is element [`Binding::base`] of the binding, which the shader adds
//! (get it from [`Context::bind`] once the buffer has device memory, or from
//! [`Context::prepare`]).

use crate::buffer::Buffer;
use crate::error::Result;
use crate::runtime::context::Context;
use crate::runtime::dispatch::{Binding, Dispatch, Shader};

/// How a kernel uses one of its buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read only: uploaded first when host-dirty.
    Read,
    /// Written only: gets device memory; its host data is not uploaded.
    Write,
    /// Read and written in place: uploaded first when host-dirty.
    ReadWrite,
}

/// One buffer of a kernel launch, at the binding of its position.
#[derive(Debug)]
pub struct Arg<'a> {
    /// The buffer, crop or view.
    pub buffer: &'a mut Buffer,
    /// How the kernel uses it.
    pub access: Access,
}

impl<'a> Arg<'a> {
    /// An input.
    pub fn read(buffer: &'a mut Buffer) -> Self {
        Arg {
            buffer,
            access: Access::Read,
        }
    }

    /// An output.
    pub fn write(buffer: &'a mut Buffer) -> Self {
        Arg {
            buffer,
            access: Access::Write,
        }
    }

    /// A buffer updated in place.
    pub fn read_write(buffer: &'a mut Buffer) -> Self {
        Arg {
            buffer,
            access: Access::ReadWrite,
        }
    }
}

impl Context {
    /// Makes every argument ready on the device (uploads inputs that are
    /// host-dirty, gives outputs device memory) and returns their bindings: the
    /// `base` of each is what a shader adds to reach the element at the buffer's mins.
    pub fn prepare(&self, args: &mut [Arg<'_>]) -> Result<Vec<Binding>> {
        for a in args.iter_mut() {
            match a.access {
                Access::Read | Access::ReadWrite => self.copy_to_device(a.buffer)?,
                Access::Write => self.device_malloc(a.buffer)?,
            }
        }
        args.iter().map(|a| self.bind(a.buffer)).collect()
    }

    /// Runs `shader` in `groups` workgroups over `args` (binding `i` is `args[i]`),
    /// synchronously: [`Context::prepare`], one dispatch, then every output
    /// (`Write`, `ReadWrite`) is device-dirty and not host-dirty.
    pub fn launch(&self, shader: Shader<'_>, args: &mut [Arg<'_>], groups: u64) -> Result<()> {
        self.launch_with(shader, args, groups, &[])
    }

    /// [`Context::launch`] with push-constant words for the shader
    /// ([`Dispatch::push_constants`]).
    pub fn launch_with(
        &self,
        shader: Shader<'_>,
        args: &mut [Arg<'_>],
        groups: u64,
        push_constants: &[u32],
    ) -> Result<()> {
        let bindings = self.prepare(args)?;
        self.dispatch(&[Dispatch {
            shader,
            bindings,
            groups,
            push_constants,
        }])?;
        for a in args.iter_mut() {
            if a.access != Access::Read {
                a.buffer.host_dirty = false;
                a.buffer.set_device_dirty(true);
            }
        }
        Ok(())
    }
}
