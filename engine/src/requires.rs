//! Device types as cases name them (`requires.device_types`, `measure`
//! thresholds, expectation entries).

use serde::{Deserialize, Serialize};

use crate::names;
use crate::rt::DeviceType;

/// A device type a case may require.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceReq {
    /// Any device.
    Any,
    /// Integrated or discrete.
    Gpu,
    /// A CPU implementation (lavapipe, SwiftShader).
    Cpu,
    /// A GPU sharing the host's memory.
    #[serde(alias = "integrated_gpu")]
    IntegratedGpu,
    /// A GPU with memory of its own.
    #[serde(alias = "discrete_gpu")]
    DiscreteGpu,
    /// A GPU of a virtual machine.
    #[serde(alias = "virtual_gpu")]
    VirtualGpu,
    /// Any other device type.
    Other,
}

impl DeviceReq {
    /// The device type `s` names, in any of the spellings cases use.
    pub fn parse(s: &str) -> Option<Self> {
        names::parse(s)
    }

    /// Every name, for error messages.
    pub fn names() -> &'static [&'static str] {
        names::variants::<DeviceReq>()
    }

    /// The name as cases write it.
    pub fn name(self) -> &'static str {
        names::name(&self)
    }

    /// The requirement that exactly `t` meets.
    pub fn of(t: DeviceType) -> Self {
        match t {
            DeviceType::Cpu => DeviceReq::Cpu,
            DeviceType::IntegratedGpu => DeviceReq::IntegratedGpu,
            DeviceType::DiscreteGpu => DeviceReq::DiscreteGpu,
            DeviceType::VirtualGpu => DeviceReq::VirtualGpu,
            DeviceType::Other => DeviceReq::Other,
        }
    }

    /// Whether a device of type `t` meets this requirement.
    pub fn accepts(self, t: DeviceType) -> bool {
        match self {
            DeviceReq::Any => true,
            DeviceReq::Gpu => matches!(t, DeviceType::IntegratedGpu | DeviceType::DiscreteGpu),
            want => want == DeviceReq::of(t),
        }
    }
}
