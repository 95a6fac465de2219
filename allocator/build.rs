//! Compiles the device-to-device copy kernel (`shaders/copy.wgsl`) to SPIR-V with
//! naga, so that the runtime carries no shader compiler and the repository no
//! binary blob. Writes `copy_spirv.rs` (a `&[u32]` constant) to `OUT_DIR`.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let source_path = "shaders/copy.wgsl";
    println!("cargo:rerun-if-changed={source_path}");
    let source = std::fs::read_to_string(source_path).expect("read shaders/copy.wgsl");
    let module = naga::front::wgsl::parse_str(&source)
        .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&source)));
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::IMMEDIATES,
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&source)));
    // SPIR-V 1.3 (Vulkan 1.1), no debug info, the WGSL's own bindings, and no
    // bounds checks: the runtime binds exactly the ranges the indices reach.
    let options = naga::back::spv::Options {
        lang_version: (1, 3),
        flags: naga::back::spv::WriterFlags::empty(),
        fake_missing_bindings: true,
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".into(),
    };
    let words = naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
        .expect("write SPIR-V");
    let mut out = String::from(
        "/// SPIR-V of `shaders/copy.wgsl`, written by build.rs.\n\
         pub(crate) const COPY_SPIRV: &[u32] = &[\n",
    );
    for line in words.chunks(8) {
        out.push_str("   ");
        for w in line {
            write!(out, " {w:#010x},").unwrap();
        }
        out.push('\n');
    }
    out.push_str("];\n");
    let dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(dir.join("copy_spirv.rs"), out).expect("write copy_spirv.rs");
}
