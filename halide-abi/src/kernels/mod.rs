//! Halide's kernels: `halide_vulkan_initialize_kernels` compiles a pipeline's
//! blob once per context, `halide_vulkan_run` launches one entry point and
//! waits, `halide_vulkan_finalize_kernels` lets go of it (the compiled objects
//! stay until `halide_device_release`, as in Halide).
//!
//! Where Halide 21 destroys and re-creates an entry point's pipeline on every
//! launch that sets specialization constants (workgroup size, dynamic shared
//! memory), pipelines here are cached by the constants' values.

mod blob;
mod launch;

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use vkcopy::ash::vk;

use crate::context::{self, Device};
use crate::entry::entry;
use crate::error::Failure;
use crate::ffi::{code, Uc};

/// One compiled SPIR-V module of a blob.
pub(crate) struct Compiled {
    pub(crate) module: blob::Module,
    pub(crate) shader: vk::ShaderModule,
    /// One per entry point: entry point `n` uses set `n`.
    pub(crate) set_layouts: Vec<vk::DescriptorSetLayout>,
    pub(crate) layout: vk::PipelineLayout,
    /// Pipelines by entry point and specialization constant values.
    pub(crate) pipelines: HashMap<(usize, Vec<(u32, u32)>), vk::Pipeline>,
}

/// A pipeline's kernels on one context.
pub(crate) struct Kernels {
    pub(crate) device: Arc<Device>,
    pub(crate) modules: Vec<Compiled>,
    /// Pipelines between their initialize and finalize calls.
    holds: u32,
}

impl Kernels {
    fn destroy(self) {
        let d = &self.device.ctx.raw_device();
        for m in self.modules {
            // SAFETY: every launch waited for its work, so none of these is in use;
            // each was made on this device and is destroyed once.
            unsafe {
                for (_, p) in m.pipelines {
                    d.destroy_pipeline(p, None);
                }
                d.destroy_pipeline_layout(m.layout, None);
                for l in m.set_layouts {
                    d.destroy_descriptor_set_layout(l, None);
                }
                d.destroy_shader_module(m.shader, None);
            }
        }
    }
}

/// Compiled blobs by the id their pipeline keeps in its state slot. Held
/// through a launch: launches run one at a time, as in Halide.
fn registry() -> MutexGuard<'static, HashMap<u64, Kernels>> {
    static REGISTRY: LazyLock<Mutex<HashMap<u64, Kernels>>> = LazyLock::new(Mutex::default);
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Destroys every compiled kernel: the context is going.
pub(crate) fn release() {
    let all: Vec<Kernels> = registry().drain().map(|(_, k)| k).collect();
    for k in all {
        k.destroy();
        crate::trace::say("vk_destroy_compute_pipeline (vkcopy)");
    }
}

fn compile(device: &Arc<Device>, blob: &[u8]) -> Result<Kernels, Failure> {
    let fail = |m: String| Failure::new(code::GENERIC_ERROR, m);
    let modules = blob::parse(blob).map_err(fail)?;
    let mut k = Kernels {
        device: device.clone(),
        modules: Vec::with_capacity(modules.len()),
        holds: 0,
    };
    let d = &device.ctx.raw_device();
    for m in modules {
        let made = (|| -> Result<Compiled, vk::Result> {
            let info = vk::ShaderModuleCreateInfo::default().code(&m.spirv);
            // SAFETY: valid create info over words of the blob.
            let shader = unsafe { d.create_shader_module(&info, None) }?;
            let mut c = Compiled {
                module: m.clone(),
                shader,
                set_layouts: Vec::new(),
                layout: vk::PipelineLayout::null(),
                pipelines: HashMap::new(),
            };
            for e in &m.entries {
                let bindings: Vec<_> = (0..e.uniform_buffers + e.storage_buffers)
                    .map(|b| {
                        let ty = if b < e.uniform_buffers {
                            vk::DescriptorType::UNIFORM_BUFFER
                        } else {
                            vk::DescriptorType::STORAGE_BUFFER
                        };
                        vk::DescriptorSetLayoutBinding::default()
                            .binding(b)
                            .descriptor_type(ty)
                            .descriptor_count(1)
                            .stage_flags(vk::ShaderStageFlags::COMPUTE)
                    })
                    .collect();
                let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
                // SAFETY: valid create info over locals.
                match unsafe { d.create_descriptor_set_layout(&info, None) } {
                    Ok(l) => c.set_layouts.push(l),
                    Err(e) => {
                        destroy_partial(d, c);
                        return Err(e);
                    }
                }
            }
            let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&c.set_layouts);
            // SAFETY: valid create info; the set layouts are alive.
            match unsafe { d.create_pipeline_layout(&info, None) } {
                Ok(l) => c.layout = l,
                Err(e) => {
                    destroy_partial(d, c);
                    return Err(e);
                }
            }
            Ok(c)
        })();
        match made {
            Ok(c) => k.modules.push(c),
            Err(e) => {
                k.destroy();
                return Err(fail(format!("creating a kernel module: {e}")));
            }
        }
    }
    Ok(k)
}

fn destroy_partial(d: &vkcopy::ash::Device, c: Compiled) {
    // SAFETY: objects just made on `d`, never used.
    unsafe {
        for l in c.set_layouts {
            d.destroy_descriptor_set_layout(l, None);
        }
        d.destroy_shader_module(c.shader, None);
    }
}

/// `halide_vulkan_initialize_kernels`: compiles `src` (`size` bytes) on the
/// current context unless the pipeline's state already names it there.
///
/// # Safety
/// `state_ptr` is the pipeline's writable state slot; `src` holds `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn halide_vulkan_initialize_kernels(
    uc: Uc,
    state_ptr: *mut *mut c_void,
    src: *const c_char,
    size: c_int,
) -> c_int {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    entry(uc, "halide_vulkan_initialize_kernels", || {
        if state_ptr.is_null() || src.is_null() || size <= 0 {
            return Err(Failure::new(
                code::GENERIC_ERROR,
                "a null state, a null blob or an empty blob".into(),
            ));
        }
        let device = context::acquire()?;
        // SAFETY: the caller's promise.
        let id = match unsafe { *state_ptr } as u64 {
            0 => {
                let id = NEXT.fetch_add(1, Ordering::Relaxed);
                // SAFETY: as above.
                unsafe { *state_ptr = id as *mut c_void };
                id
            }
            id => id,
        };
        let mut reg = registry();
        if let Some(k) = reg.get_mut(&id) {
            if k.device.generation == device.generation {
                k.holds += 1;
                return Ok(());
            }
        }
        // SAFETY: the caller's promise.
        let blob = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), size as usize) };
        let mut k = compile(&device, blob)?;
        crate::trace::say("vk_create_compute_pipeline (vkcopy)");
        k.holds = 1;
        if let Some(old) = reg.insert(id, k) {
            old.destroy();
            crate::trace::say("vk_destroy_compute_pipeline (vkcopy)");
        }
        Ok(())
    })
}

/// `halide_vulkan_finalize_kernels`: the pipeline is done with its kernels
/// for now; they stay compiled for its next call.
#[no_mangle]
pub extern "C" fn halide_vulkan_finalize_kernels(_uc: Uc, state_ptr: *mut c_void) {
    if let Some(k) = registry().get_mut(&(state_ptr as u64)) {
        k.holds = k.holds.saturating_sub(1);
    }
}

/// `halide_vulkan_run`: launches `entry_name` of the pipeline whose state is
/// `state_ptr` on a grid of blocks, with `threads` per block and
/// `shared_mem_bytes` of dynamic shared memory, and waits for it. The
/// arguments end at the first zero size; a buffer argument is its
/// `halide_buffer_t`, a scalar points to its value.
///
/// # Safety
/// As Halide's generated code calls it: every array runs to its zero size,
/// and each buffer has device memory of this library.
#[no_mangle]
pub unsafe extern "C" fn halide_vulkan_run(
    uc: Uc,
    state_ptr: *mut c_void,
    entry_name: *const c_char,
    blocks_x: c_int,
    blocks_y: c_int,
    blocks_z: c_int,
    threads_x: c_int,
    threads_y: c_int,
    threads_z: c_int,
    shared_mem_bytes: c_int,
    arg_sizes: *const usize,
    args: *const *mut c_void,
    arg_is_buffer: *const i8,
) -> c_int {
    entry(uc, "halide_vulkan_run", || {
        // SAFETY: Halide's NUL-terminated entry name.
        let name = unsafe { context::text(entry_name) };
        let mut reg = registry();
        let k = reg.get_mut(&(state_ptr as u64)).ok_or_else(|| {
            Failure::new(
                code::DEVICE_RUN_FAILED,
                format!("{name}: its pipeline's kernels were not initialized on this context"),
            )
        })?;
        // SAFETY: the caller's promise.
        let args = unsafe { launch::Args::read(arg_sizes, args, arg_is_buffer) };
        let grid = launch::Grid {
            blocks: [blocks_x, blocks_y, blocks_z],
            threads: [threads_x, threads_y, threads_z],
            shared_mem_bytes,
        };
        launch::run(k, &name, &grid, &args)
    })
}
