//! The C handles and structs of `hsa.h` and `hsa_ext_amd.h` that the adapter uses (the enums and
//! their constants are in `enums.rs`), and their C spellings.

use crate::enums::AmdLinkInfoType;

/// The value type of a signal (`int64_t` in the large machine model, `int32_t` in the small one).
#[cfg(target_pointer_width = "64")]
pub type SignalValue = i64;
/// The value type of a signal (`int64_t` in the large machine model, `int32_t` in the small one).
#[cfg(not(target_pointer_width = "64"))]
pub type SignalValue = i32;

/// An agent (a CPU or a GPU), as an opaque handle. C: `hsa_agent_t`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct HsaAgent {
    /// Opaque handle.
    pub handle: u64,
}

/// A signal, as an opaque handle. C: `hsa_signal_t`. The handle is the word a kernel uses (it
/// is what the hostcall buffer's `doorbell` field holds).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct HsaSignal {
    /// Opaque handle (0 is no signal).
    pub handle: u64,
}

/// A memory pool, as an opaque handle. C: `hsa_amd_memory_pool_t`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct AmdMemoryPool {
    /// Opaque handle.
    pub handle: u64,
}

/// The properties of one link hop from an agent to a memory pool. C:
/// `hsa_amd_memory_pool_link_info_t`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AmdMemoryPoolLinkInfo {
    /// Minimum transfer latency in ns.
    pub min_latency: u32,
    /// Maximum transfer latency in ns.
    pub max_latency: u32,
    /// Minimum bandwidth in MB/s.
    pub min_bandwidth: u32,
    /// Maximum bandwidth in MB/s.
    pub max_bandwidth: u32,
    /// Whether 32-bit atomics work across this link.
    pub atomic_support_32bit: bool,
    /// Whether 64-bit atomics work across this link (what the stack protocol needs).
    pub atomic_support_64bit: bool,
    /// Whether the link is cache coherent.
    pub coherent_support: bool,
    /// Kind of link.
    pub link_type: AmdLinkInfoType,
    /// NUMA distance from the agent to the pool.
    pub numa_distance: u32,
}

impl Default for AmdMemoryPoolLinkInfo {
    fn default() -> Self {
        Self {
            min_latency: 0,
            max_latency: 0,
            min_bandwidth: 0,
            max_bandwidth: 0,
            atomic_support_32bit: false,
            atomic_support_64bit: false,
            coherent_support: false,
            link_type: AmdLinkInfoType(0),
            numa_distance: 0,
        }
    }
}

/// C spelling of the type names, for code ported from C.
#[allow(non_camel_case_types)]
pub mod c_names {
    /// `hsa_status_t`.
    pub type hsa_status_t = crate::enums::HsaStatus;
    /// `hsa_agent_t`.
    pub type hsa_agent_t = super::HsaAgent;
    /// `hsa_signal_t`.
    pub type hsa_signal_t = super::HsaSignal;
    /// `hsa_signal_value_t`.
    pub type hsa_signal_value_t = super::SignalValue;
    /// `hsa_amd_memory_pool_t`.
    pub type hsa_amd_memory_pool_t = super::AmdMemoryPool;
    /// `hsa_amd_memory_pool_link_info_t`.
    pub type hsa_amd_memory_pool_link_info_t = super::AmdMemoryPoolLinkInfo;
}
