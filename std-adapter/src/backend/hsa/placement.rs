//! [`Placement`]: where ROCm puts a GPU's hostcall memory, found the way ROCm's runtime (ROCclr)
//! finds it, and [`PlatformAtomics`], its verdict on host/device atomics.
//!
//! - **The buffer** goes in the fine-grained pool of the CPU agent *nearest* the GPU: for every
//!   CPU agent, ROCclr sums `numa_distance` over the link hops from the GPU to that agent's
//!   fine-grained pool, and takes the smallest sum (the first on a tie; a pool with no hops is at
//!   distance 0). Of a CPU agent's fine-grained pools it prefers one that is not the kernel
//!   argument pool (`KERNARG_INIT`).
//! - **Device-local memory** (the phase protocol's `occupied` bitmap, DEVMEM blocks) comes from
//!   the GPU's own global, coarse-grained pool.
//! - **Platform atomics**: ROCclr looks at hop 0 of the link from the GPU to the chosen pool and
//!   counts atomics as supported when it reports 32- *or* 64-bit atomics (or when there is no
//!   hop at all: the pool is on the GPU's own chip).

use hsa_sys::{AmdLinkInfoType, AmdMemoryPoolAccess, AmdMemoryPoolGlobalFlag, AmdMemoryPoolInfo, AmdSegment};

use super::error::HsaError;
use super::runtime::{Agent, HsaRuntime};
use hsa_sys::{AmdMemoryPool, AmdMemoryPoolLinkInfo};

/// A memory pool the runtime allocates from, and its allocation alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    /// The pool.
    pub handle: AmdMemoryPool,
    /// `HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT` (at least 1).
    pub alignment: usize,
}

/// Whether CPU and GPU atomics on the hostcall buffer are mutually atomic, as ROCclr judges it
/// (see the module docs and [`crate::backend::hsa`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlatformAtomics {
    /// Hop 0 of the GPU's link to the pool reports 32- or 64-bit atomics, or there is no hop.
    Supported,
    /// Hop 0 reports neither: the stack protocol is unsafe there; use the phase protocol.
    Missing {
        /// The GPU agent's name.
        gpu: String,
        /// The hop (0: the one nearest the GPU, the one ROCclr checks).
        hop: usize,
        /// The kind of link.
        link: AmdLinkInfoType,
    },
}

impl PlatformAtomics {
    /// The verdict for `gpu` from its link hops to the pool (ROCclr's: hop 0 only).
    pub fn from_links(gpu: &str, links: &[AmdMemoryPoolLinkInfo]) -> Self {
        match links.first() {
            Some(hop) if !hop.atomic_support_32bit && !hop.atomic_support_64bit => {
                Self::Missing { gpu: gpu.to_owned(), hop: 0, link: hop.link_type }
            }
            _ => Self::Supported,
        }
    }
}

/// Where the hostcall memory of one GPU goes ([`HsaRuntime::placement`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The GPU.
    pub gpu: Agent,
    /// The CPU agent nearest it.
    pub cpu: Agent,
    /// That CPU agent's fine-grained pool: hostcall buffers.
    pub system: Pool,
    /// The NUMA distance from the GPU to `system` (the sum over the link hops).
    pub distance: u32,
    /// The GPU's own coarse-grained pool: the phase bitmap, DEVMEM blocks.
    pub device: Pool,
    /// The verdict on hop 0 of the GPU's link to `system`.
    pub atomics: PlatformAtomics,
}

/// Pool flags that matter here, read once.
struct PoolFlags {
    global: bool,
    flags: u32,
    alloc_allowed: bool,
}

impl HsaRuntime {
    /// Where `gpu`'s hostcall memory goes: the nearest CPU agent's fine-grained pool, the GPU's
    /// coarse-grained pool, and the atomics verdict (see the module docs).
    pub fn placement(&self, gpu: &Agent) -> Result<Placement, HsaError> {
        let mut best: Option<(u32, Agent, Pool, Vec<AmdMemoryPoolLinkInfo>)> = None;
        for cpu in self.cpu_agents()? {
            let Some(pool) = self.system_pool(&cpu)? else { continue };
            let (access, links) = self.links(gpu.handle, pool.handle)?;
            if access == AmdMemoryPoolAccess::NEVER_ALLOWED {
                continue;
            }
            let distance = links.iter().map(|hop| hop.numa_distance).fold(0u32, u32::saturating_add);
            if best.as_ref().map_or(true, |(nearest, ..)| distance < *nearest) {
                best = Some((distance, cpu, pool, links));
            }
        }
        let Some((distance, cpu, system, links)) = best else {
            return Err(HsaError::NoFineGrainedPool);
        };
        let device = self.device_pool(gpu)?;
        let atomics = PlatformAtomics::from_links(&gpu.name, &links);
        Ok(Placement { gpu: gpu.clone(), cpu, system, distance, device, atomics })
    }

    /// `cpu`'s global fine-grained pool that allows allocation, preferring one that is not the
    /// kernel-argument pool; `None` if it has none.
    pub fn system_pool(&self, cpu: &Agent) -> Result<Option<Pool>, HsaError> {
        let mut kernarg = None;
        for pool in self.memory_pools(cpu.handle)? {
            let flags = self.pool_flags(pool)?;
            if !flags.global
                || !flags.alloc_allowed
                || !AmdMemoryPoolGlobalFlag::FINE_GRAINED.is_set_in(flags.flags)
            {
                continue;
            }
            if !AmdMemoryPoolGlobalFlag::KERNARG_INIT.is_set_in(flags.flags) {
                return self.pool(pool).map(Some);
            }
            kernarg = kernarg.or(Some(pool));
        }
        kernarg.map(|pool| self.pool(pool)).transpose()
    }

    /// `gpu`'s own global, coarse-grained pool that allows allocation (device-local memory).
    pub fn device_pool(&self, gpu: &Agent) -> Result<Pool, HsaError> {
        for pool in self.memory_pools(gpu.handle)? {
            let flags = self.pool_flags(pool)?;
            if flags.global
                && flags.alloc_allowed
                && AmdMemoryPoolGlobalFlag::COARSE_GRAINED.is_set_in(flags.flags)
            {
                return self.pool(pool);
            }
        }
        Err(HsaError::NoDevicePool { gpu: gpu.name.clone() })
    }

    fn pool_flags(&self, pool: AmdMemoryPool) -> Result<PoolFlags, HsaError> {
        // SAFETY: the segment is an `hsa_amd_segment_t` (mirrored by `AmdSegment`), the flags a
        // `uint32_t` (read only for global pools, where they are defined), RUNTIME_ALLOC_ALLOWED
        // a `bool`.
        unsafe {
            let segment = self.pool_info(pool, AmdMemoryPoolInfo::SEGMENT, AmdSegment(u32::MAX))?;
            if segment != AmdSegment::GLOBAL {
                return Ok(PoolFlags { global: false, flags: 0, alloc_allowed: false });
            }
            Ok(PoolFlags {
                global: true,
                flags: self.pool_info(pool, AmdMemoryPoolInfo::GLOBAL_FLAGS, 0u32)?,
                alloc_allowed: self.pool_info(pool, AmdMemoryPoolInfo::RUNTIME_ALLOC_ALLOWED, false)?,
            })
        }
    }

    fn pool(&self, pool: AmdMemoryPool) -> Result<Pool, HsaError> {
        // SAFETY: RUNTIME_ALLOC_ALIGNMENT is a `size_t`.
        let alignment = unsafe { self.pool_info(pool, AmdMemoryPoolInfo::RUNTIME_ALLOC_ALIGNMENT, 0usize)? };
        Ok(Pool { handle: pool, alignment: alignment.max(1) })
    }
}
