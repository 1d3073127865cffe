//! The HSA backend: ROCm fine-grained memory ([`HsaMemory`]), device-local memory
//! ([`HsaDeviceMemory`]) and HSA signals ([`HsaDoorbell`]).
//!
//! [`HsaRuntime`] loads the HSA runtime library at run time (through [`hsa_sys`]), calls
//! `hsa_init`, and calls `hsa_shut_down` when dropped; [`HsaMemory`] and [`HsaDoorbell`] hold an
//! `Arc` of it, so the runtime outlives every buffer and signal made with it. Every failing HSA
//! call becomes an [`HsaError::Status`] that carries the call, the status code and the runtime's
//! own text for it (`hsa_status_string`).
//!
//! Memory goes where ROCm's runtime (ROCclr) puts it ([`Placement`], [`HsaRuntime::placement`]):
//!
//! - [`HsaMemory`] allocates hostcall buffers from the fine-grained pool of the CPU agent nearest
//!   the GPU (the smallest sum of `numa_distance` over the link hops, as ROCclr picks it), grants
//!   every GPU agent access to each buffer (`hsa_amd_agents_allow_access`), and frees through the
//!   pool. Device address = host address: fine-grained system memory is mapped at the same
//!   virtual address on the GPUs.
//! - [`HsaDeviceMemory`] allocates from the GPU's own coarse-grained pool: the phase protocol's
//!   `occupied` bitmap (only the device touches it, so its `fetch_or` never crosses PCIe) and
//!   DEVMEM blocks. The CPU may not reach it, so it is zeroed with `hsa_amd_memory_fill`.
//! - [`HsaRuntime::loaded_code_objects`] lists the code objects loaded in the process through the
//!   loader extension ([`LoadedCodeObject`]: load base, size, delta, URI), for the SANITIZER
//!   report's code-object lookup.
//! - [`HsaDoorbell`] is an HSA signal created as ROCm's listener creates it,
//!   `hsa_signal_create(1, 0, NULL, &signal)` ([`INIT`](crate::doorbell::INIT), no consumers):
//!   one per listener (or pool), shared by all its buffers, destroyed when the last owner drops
//!   it. The device rings it with `signal_add 1` (release), the host waits with
//!   `hsa_signal_wait_scacquire(signal, NE, last_seen, timeout, BLOCKED)`, and
//!   [`Doorbell::handle`](crate::doorbell::Doorbell::handle) is the signal handle (the address of
//!   ROCr's `amd_signal_t`) the buffers' `doorbell` field holds.
//!
//! # Platform atomics
//!
//! The stack protocol has the host and the GPU read-modify-write the same word (`ready_stack`),
//! which is only sound where CPU and GPU atomics are mutually atomic: over PCIe that takes PCIe
//! AtomicOps ("platform atomics"). HSA has no direct "are host/device atomics mutually atomic"
//! query. What it has is the link information from a GPU agent to the CPU's pool
//! (`hsa_amd_agent_memory_pool_get_info(HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO)`), whose
//! atomics flags the runtime fills from the kernel driver's IO-link flags (the KFD marks a GPU's
//! link `NO_ATOMICS_32_BIT`/`NO_ATOMICS_64_BIT` when PCIe atomics could not be enabled for it).
//! As ROCclr does, [`PlatformAtomics::from_links`] looks at hop 0 of the link from the GPU to the
//! chosen pool and counts atomics as there when it reports 32- or 64-bit ones (or when there is
//! no hop). Where they are not, it reports [`PlatformAtomics::Missing`] and, when the caller asked
//! for [`AtomicsRequirement::Required`] (the stack protocol), [`HsaMemory`] refuses with
//! [`HsaError::NoPlatformAtomics`], whose message names the phase protocol as the way out (it
//! needs no host/device read-modify-write). `HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT` is
//! about XNACK page migration, not atomics, and is not used for this.
//!
//! Caveat, from reading the public ROCr and KFD sources rather than from hardware: older ROCr
//! releases report atomics on every PCIe link and ignore the driver's flags, so there a
//! `Supported` answer may be optimistic; `Missing` is only ever reported when the runtime says so.
//!
//! # What was verified, and what was not
//!
//! No machine this was written on has an AMD GPU. Against ROCm's real library (Debian's ROCm
//! 5.2.3 `libhsa-runtime64-1`): it loads through `libloading`, `hsa_init` fails there with
//! `HSA_STATUS_ERROR_OUT_OF_RESOURCES` (0x1008) and `hsa_status_string` describes it, and
//! [`crate::backend::detect`] falls back to host memory; the constants and struct layouts match
//! ROCm's headers (a compile-time C check). Against the HSA stand-in (a C implementation of the
//! calls used here, `std-adapter/tests/hsa-standin/`, with NUMA nodes, pools, links and
//! `amd_signal_t` signals; `tests/hsa_standin.rs`): agent and pool discovery, the placement
//! choices, allocation, access grants, fills and frees, signal creation, raw device adds waking
//! a blocked wait, failures injected into each call, and that everything is freed, destroyed and
//! shut down. **Never run**: any of it on ROCr itself with a GPU, and a GPU kernel reaching the
//! memory or ringing the signal.

mod code_objects;
mod error;
mod memory;
mod placement;
mod pool;
mod runtime;
mod signal;
#[cfg(test)]
mod tests;

pub use code_objects::{LoadedCodeObject, MAX_CODE_OBJECTS, MAX_URI_LEN};
pub use error::HsaError;
pub use memory::{AtomicsRequirement, HsaMemory};
pub use placement::{Placement, PlatformAtomics, Pool};
pub use pool::HsaDeviceMemory;
pub use runtime::{Agent, HsaRuntime};
pub use signal::HsaDoorbell;
