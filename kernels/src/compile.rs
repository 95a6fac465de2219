//! WGSL to SPIR-V with naga.

use vkcopy::{Context, Error, Result};

/// The naga capabilities the device's enabled features allow.
pub(crate) fn capabilities(ctx: &Context) -> naga::valid::Capabilities {
    use naga::valid::Capabilities as C;
    let mut caps = C::empty();
    if ctx.info().has("shaderInt64") {
        caps |= C::SHADER_INT64;
    }
    if ctx.info().has("shaderFloat64") {
        caps |= C::FLOAT64;
    }
    caps
}

/// Compiles WGSL to SPIR-V 1.3 (Vulkan 1.1) words, without debug info.
pub(crate) fn compile(source: &str, caps: naga::valid::Capabilities) -> Result<Vec<u32>> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| {
        Error::KernelCompileFailed(format!(
            "WGSL parse: {}\n{source}",
            e.emit_to_string(source)
        ))
    })?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| {
            Error::KernelCompileFailed(format!(
                "WGSL validation: {}\n{source}",
                e.emit_to_string(source)
            ))
        })?;
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        flags: naga::back::spv::WriterFlags::empty(),
        // Without a binding map, "fake" bindings are the WGSL's own @group/@binding.
        fake_missing_bindings: true,
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".into(),
    };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
        .map_err(|e| Error::KernelCompileFailed(format!("SPIR-V output: {e}\n{source}")))
}
