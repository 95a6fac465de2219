//! vkcopy-kernels: the expression language of vkcopy's conformance cases, and
//! compute kernels (fill, map, add, sum) generated as WGSL, compiled by naga and run
//! through the runtime's dispatch of SPIR-V ([`vkcopy::Context::dispatch`]).
//!
//! ```no_run
//! use vkcopy::{Buffer, Context, ContextOptions, ElemType};
//! use vkcopy_kernels::{expr::Expr, Kernels};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::new(ContextOptions::default())?;
//! let mut g = Buffer::new("g", ElemType::I32, &[128, 128])?;
//! ctx.kernel_fill(&mut g, &Expr::parse("x + 256 * y")?)?; // device-dirty
//! ctx.copy_to_host(&mut g)?;
//! assert_eq!(g.get(&[3, 2])?, vkcopy::Value::Int(3 + 512));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs, unreachable_pub)]

mod compile;
pub mod expr;
mod kernels;
mod wgsl;

pub use kernels::Kernels;

/// Compiles WGSL (entry point `main`) to SPIR-V 1.3 words with the features
/// `ctx`'s device enabled, for a [`vkcopy::Shader`].
pub fn compile_wgsl(ctx: &vkcopy::Context, source: &str) -> vkcopy::Result<Vec<u32>> {
    compile::compile(source, compile::capabilities(ctx))
}
