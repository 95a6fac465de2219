//! WGSL to SPIR-V with naga.

use vkcopy::{Context, Error, Result};

/// The naga capabilities the device's enabled features allow, and immediates
/// (push constants: the runtime's pipeline layout has them).
pub(crate) fn capabilities(ctx: &Context) -> naga::valid::Capabilities {
    use naga::valid::Capabilities as C;
    let mut caps = C::IMMEDIATES;
    if ctx.info().has("shaderInt64") {
        caps |= C::SHADER_INT64;
    }
    if ctx.info().has("shaderFloat64") {
        caps |= C::FLOAT64;
    }
    caps
}

/// Longest compiler message kept: naga's messages can quote whole expressions.
const MAX_MESSAGE: usize = 300;

/// `what at line:column: message`, one line and at most [`MAX_MESSAGE`]
/// characters of naga's message: the shader itself is never quoted.
fn failed(what: &str, at: Option<naga::SourceLocation>, message: &str) -> Error {
    let mut message: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if message.chars().count() > MAX_MESSAGE {
        message = message.chars().take(MAX_MESSAGE).collect::<String>() + "...";
    }
    let at = at.map_or(String::new(), |l| {
        format!(" at {}:{}", l.line_number, l.line_position)
    });
    Error::KernelCompileFailed(format!("WGSL {what}{at}: {message}"))
}

/// Compiles WGSL to SPIR-V 1.3 (Vulkan 1.1) words, without debug info.
pub(crate) fn compile(source: &str, caps: naga::valid::Capabilities) -> Result<Vec<u32>> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| failed("parse", e.location(source), e.message()))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| failed("validation", e.location(source), &e.as_inner().to_string()))?;
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
        .map_err(|e| failed("to SPIR-V", None, &e.to_string()))
}
