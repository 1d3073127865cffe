//! [`HsaMemory`]: fine-grained system memory near a GPU that every GPU agent can reach, and the
//! platform-atomics check made when it is set up.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use hsa_sys::{AmdMemoryPoolAccess, HsaAgent};

use super::error::HsaError;
use super::placement::{Placement, PlatformAtomics, Pool};
use super::pool::PoolAllocator;
use super::runtime::HsaRuntime;
use crate::memory::{DeviceMemory, MemoryError};

/// Whether the caller needs CPU/GPU atomics to be mutually atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AtomicsRequirement {
    /// The stack protocol: refuse memory where the runtime says atomics do not cross the link
    /// ([`HsaError::NoPlatformAtomics`]).
    #[default]
    Required,
    /// The phase protocol: the host never read-modify-writes shared words, so any fine-grained
    /// memory will do; the verdict is still recorded.
    NotRequired,
}

/// Fine-grained system memory from the HSA runtime, where ROCm puts hostcall buffers: the pool
/// of the CPU agent nearest a GPU ([`Placement`]), every allocation made accessible to every GPU
/// agent (`hsa_amd_agents_allow_access`), zeroed by the host. Any power-of-two alignment is
/// honoured (above the pool's own by over-allocating). Device address = host address:
/// fine-grained system memory is mapped at the same virtual address on every agent.
pub struct HsaMemory {
    allocator: PoolAllocator,
    gpus: Vec<HsaAgent>,
    placement: Placement,
}

impl fmt::Debug for HsaMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsaMemory")
            .field("gpu", &self.placement.gpu.name)
            .field("cpu", &self.placement.cpu.name)
            .field("pool", &self.placement.system)
            .field("gpus", &self.gpus.len())
            .field("atomics", &self.placement.atomics)
            .finish()
    }
}

impl HsaMemory {
    /// The memory for the first GPU agent: [`HsaMemory::with_placement`] of its
    /// [`HsaRuntime::placement`].
    pub fn new(runtime: Arc<HsaRuntime>, atomics: AtomicsRequirement) -> Result<Self, HsaError> {
        let gpu = runtime.gpu_agents()?.into_iter().next().ok_or(HsaError::NoGpuAgent)?;
        let placement = runtime.placement(&gpu)?;
        Self::with_placement(runtime, placement, atomics)
    }

    /// The memory `placement` names, granted to every GPU agent. Refused: a GPU that can never
    /// reach the pool ([`HsaError::NoAccess`]); with [`AtomicsRequirement::Required`], a
    /// placement whose verdict is [`PlatformAtomics::Missing`] ([`HsaError::NoPlatformAtomics`]).
    pub fn with_placement(
        runtime: Arc<HsaRuntime>,
        placement: Placement,
        atomics: AtomicsRequirement,
    ) -> Result<Self, HsaError> {
        if let (PlatformAtomics::Missing { gpu, hop, link }, AtomicsRequirement::Required) =
            (&placement.atomics, atomics)
        {
            return Err(HsaError::NoPlatformAtomics { gpu: gpu.clone(), hop: *hop, link: *link });
        }
        let mut gpus = Vec::new();
        for gpu in runtime.gpu_agents()? {
            if runtime.links(gpu.handle, placement.system.handle)?.0 == AmdMemoryPoolAccess::NEVER_ALLOWED {
                return Err(HsaError::NoAccess { gpu: gpu.name });
            }
            gpus.push(gpu.handle);
        }
        Ok(Self { allocator: PoolAllocator::new(runtime, placement.system), gpus, placement })
    }

    /// The platform-atomics verdict found at creation.
    pub fn platform_atomics(&self) -> &PlatformAtomics {
        &self.placement.atomics
    }

    /// Where this memory is, and for which GPU.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The pool allocations come from.
    pub fn pool(&self) -> Pool {
        self.placement.system
    }

    /// The GPU agents granted access to every allocation.
    pub fn gpu_agents(&self) -> &[HsaAgent] {
        &self.gpus
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<HsaRuntime> {
        &self.allocator.runtime
    }
}

impl DeviceMemory for HsaMemory {
    fn name(&self) -> &'static str {
        "hsa-fine-grained"
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        let block = self.allocator.allocate(size, align)?;
        if !self.gpus.is_empty() {
            // SAFETY: `gpus` holds `gpus.len()` valid agents, flags must be null, and `raw` is
            // the start of a live allocation of this pool.
            let status = unsafe {
                (self.runtime().lib.hsa_amd_agents_allow_access)(
                    self.gpus.len() as u32,
                    self.gpus.as_ptr(),
                    std::ptr::null(),
                    block.raw,
                )
            };
            if let Err(error) = self.runtime().check("hsa_amd_agents_allow_access", status) {
                self.allocator.abandon(block);
                return Err(MemoryError::Backend(error.to_string()));
            }
        }
        // SAFETY: `size` bytes from `ptr` lie in the block (see `PoolAllocator::allocate`), which
        // is fresh, host-accessible (fine-grained system memory) and not yet shared with anyone.
        unsafe { block.ptr.as_ptr().write_bytes(0, size) };
        Ok(block.ptr)
    }

    unsafe fn free(&self, ptr: NonNull<u8>, _size: usize, _align: usize) {
        self.allocator.free(ptr);
    }

    fn device_address(&self, host: *const u8) -> u64 {
        // Fine-grained system memory is mapped at the same virtual address on every agent.
        host as u64
    }
}
