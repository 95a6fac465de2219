//! `select` and `devices`: memory-type questions on a recorded table, and the
//! tables of the Vulkan devices here.

use std::path::PathBuf;
use std::process::ExitCode;

use vkcopy_engine::rt::{Context, MemoryRequest, MemoryTable, Policy, Role};

use super::fail;

/// `vkcopy-suite select`'s options.
#[derive(clap::Args)]
pub struct SelectArgs {
    /// A recorded table, e.g. cases/devices/nvidia-h200.yaml.
    #[arg(long)]
    table: PathBuf,
    /// readback, upload, device, device_mapped, or a VISIBILITY/CACHING pair such as device_to_host/cached_coherent.
    #[arg(long)]
    request: String,
    #[arg(long, default_value = "vkcopy")]
    policy: Policy,
}

/// Prints the memory type `--policy` picks for `--request` on `--table`.
pub fn select(args: &SelectArgs) -> ExitCode {
    let (table, request, policy) = (&args.table, args.request.as_str(), args.policy);
    let t = match MemoryTable::from_yaml_file(table) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    // A role is answered as the runtime places it (`Policy::select_role`), a raw
    // request by the policy's ranking alone.
    let (req, picked) = match request.parse::<Role>() {
        Ok(role) => (policy.request(role), policy.select_role(&t, role, u32::MAX)),
        Err(_) => match request.parse::<MemoryRequest>() {
            Ok(r) => {
                let picked = policy.select(&t, &r, u32::MAX);
                (r, picked)
            }
            Err(e) => {
                let want = "expected readback, upload, device, device_mapped or VISIBILITY/CACHING";
                return fail(format!("request '{request}': {want}: {e}"));
            }
        },
    };
    match picked {
        Ok(ty) => {
            out!("{}", t.describe_type(ty));
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!(
            "{request} ({req}) under {policy} on {}: {e}",
            table.display()
        )),
    }
}

/// Prints every Vulkan device and its memory table, one YAML document each.
pub fn devices() -> ExitCode {
    match Context::list_devices() {
        Ok(list) => {
            for d in list {
                out!("---");
                out!("# device {}: {} ({:?})", d.index, d.name, d.device_type);
                out!("{}", d.memory.to_yaml());
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
