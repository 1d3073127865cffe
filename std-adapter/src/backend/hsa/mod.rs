//! The HSA backend: ROCm fine-grained memory ([`HsaMemory`]) and HSA signals ([`HsaDoorbell`]).
//!
//! [`HsaRuntime`] loads the HSA runtime library at run time (through [`hsa_sys`]), calls
//! `hsa_init`, and calls `hsa_shut_down` when dropped; [`HsaMemory`] and [`HsaDoorbell`] hold an
//! `Arc` of it, so the runtime outlives every buffer and signal made with it. Every failing HSA
//! call becomes an [`HsaError::Status`] that carries the call, the status code and the runtime's
//! own text for it (`hsa_status_string`).
//!
//! - [`HsaMemory`] allocates from the CPU agent's global, fine-grained pool (the memory ROCm's own
//!   hostcall buffers live in), grants every GPU agent access to each buffer
//!   (`hsa_amd_agents_allow_access`), and frees through the pool. Device address = host address:
//!   fine-grained system memory is mapped at the same virtual address on the GPUs.
//! - [`HsaDoorbell`] is an HSA signal created at [`INIT`](crate::doorbell::INIT); the device rings it with
//!   `signal_add 1` (release), the host waits with `hsa_signal_wait_scacquire(NE last_seen)`,
//!   and [`Doorbell::handle`](crate::doorbell::Doorbell::handle) is the signal handle the buffer's `doorbell` field holds.
//!
//! # Platform atomics
//!
//! The stack protocol has the host and the GPU read-modify-write the same word (`ready_stack`),
//! which is only sound where CPU and GPU atomics are mutually atomic: over PCIe that takes PCIe
//! AtomicOps ("platform atomics"). HSA has no direct "are host/device atomics mutually atomic"
//! query. What it has is the link information from a GPU agent to the CPU's pool
//! (`hsa_amd_agent_memory_pool_get_info(HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO)`), whose
//! `atomic_support_64bit` the runtime fills from the kernel driver's IO-link flags (the KFD marks
//! a GPU's link `NO_ATOMICS_64_BIT` when PCIe atomics could not be enabled for it). [`HsaMemory`]
//! reads it for every GPU: where a hop says no, it reports [`PlatformAtomics::Missing`] and, when
//! the caller asked for [`AtomicsRequirement::Required`] (the stack protocol), refuses with
//! [`HsaError::NoPlatformAtomics`], whose message names the phase protocol as the way out (it
//! needs no host/device read-modify-write). `HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT` is
//! about XNACK page migration, not atomics, and is not used for this.
//!
//! Caveat, from reading the public ROCr and KFD sources rather than from hardware: older ROCr
//! releases set `atomic_support_64bit = true` for every PCIe link and ignore the driver's flags,
//! so there a `Supported` answer may be optimistic; `Missing` is only ever reported when the
//! runtime says so. A GPU whose pool has no link hops (an APU) yields
//! [`PlatformAtomics::Unknown`], which is accepted.
//!
//! # What was verified, and what was not
//!
//! No machine this was written on has an AMD GPU. Verified: the library loads through
//! `libloading` (Debian's ROCm 5.2.3 `libhsa-runtime64-1`), `hsa_init` fails there with
//! `HSA_STATUS_ERROR_OUT_OF_RESOURCES` (0x1008) and `hsa_status_string` describes it, the error
//! carries both, and [`crate::backend::detect`] falls back to host memory; the constants and
//! struct layouts match ROCm's headers (a compile-time C check). **Not run anywhere**: agent and
//! pool discovery on a real system, `hsa_amd_memory_pool_allocate` / `allow_access` / `free`,
//! signal creation, waiting and ringing (from the host or from a GPU kernel), the link-info atomics
//! check, and a kernel reaching the buffer. That code follows the HSA headers' documented
//! contracts and ROCm's own hostcall listener, but is untested.

mod code_objects;
mod error;
mod memory;
mod runtime;
mod signal;
#[cfg(test)]
mod tests;

pub use code_objects::{LoadedCodeObject, MAX_CODE_OBJECTS, MAX_URI_LEN};
pub use error::HsaError;
pub use memory::{AtomicsRequirement, HsaMemory, PlatformAtomics};
pub use runtime::{Agent, HsaRuntime};
pub use signal::HsaDoorbell;
