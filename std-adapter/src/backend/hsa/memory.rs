//! [`HsaMemory`]: fine-grained system memory every GPU agent can reach, and the platform-atomics
//! check made when it is set up.

use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use hsa_sys::{AmdLinkInfoType, AmdMemoryPool, AmdMemoryPoolLinkInfo, HsaAgent, HsaStatus};

use super::error::HsaError;
use super::runtime::HsaRuntime;
use crate::memory::{DeviceMemory, MemoryError};

/// Whether CPU and GPU atomics on the hostcall buffer are mutually atomic (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlatformAtomics {
    /// Every GPU's every link hop to the pool reports 64-bit atomic support.
    Supported,
    /// A link reports no 64-bit atomic support: the stack protocol is unsafe; use the phase one.
    Missing {
        /// The GPU agent's name.
        gpu: String,
        /// The hop (0 = nearest the GPU).
        hop: usize,
        /// The kind of link.
        link: AmdLinkInfoType,
    },
    /// The runtime gave no link information (why, in words).
    Unknown(String),
}

impl PlatformAtomics {
    /// The verdict for one GPU from its link hops to the pool.
    pub fn from_links(gpu: &str, links: &[AmdMemoryPoolLinkInfo]) -> Self {
        if links.is_empty() {
            return Self::Unknown(format!("GPU agent {gpu:?} reports no link hops to host memory"));
        }
        match links.iter().position(|link| !link.atomic_support_64bit) {
            Some(hop) => Self::Missing { gpu: gpu.to_owned(), hop, link: links[hop].link_type },
            None => Self::Supported,
        }
    }

    /// The verdict for several GPUs: the first `Missing`, else the first `Unknown`, else
    /// `Supported`.
    pub fn combine(verdicts: impl IntoIterator<Item = Self>) -> Self {
        let mut combined = Self::Supported;
        for verdict in verdicts {
            match verdict {
                Self::Missing { .. } => return verdict,
                Self::Unknown(_) if combined == Self::Supported => combined = verdict,
                _ => {}
            }
        }
        combined
    }
}

/// Whether the caller needs CPU/GPU atomics to be mutually atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AtomicsRequirement {
    /// The stack protocol: refuse memory where the runtime says 64-bit atomics do not cross the
    /// link ([`HsaError::NoPlatformAtomics`]).
    #[default]
    Required,
    /// The phase protocol: the host never read-modify-writes shared words, so any fine-grained
    /// memory will do; the verdict is still recorded.
    NotRequired,
}

/// Fine-grained system memory from the HSA runtime, accessible to every GPU agent.
pub struct HsaMemory {
    runtime: Arc<HsaRuntime>,
    pool: AmdMemoryPool,
    alignment: usize,
    gpus: Vec<HsaAgent>,
    atomics: PlatformAtomics,
}

impl fmt::Debug for HsaMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsaMemory")
            .field("pool", &self.pool)
            .field("alignment", &self.alignment)
            .field("gpus", &self.gpus.len())
            .field("atomics", &self.atomics)
            .finish()
    }
}

impl HsaMemory {
    /// Finds the CPU agent's global fine-grained pool and checks that every GPU agent can reach
    /// it and, when `atomics` is [`AtomicsRequirement::Required`], that atomics cross the links.
    pub fn new(runtime: Arc<HsaRuntime>, atomics: AtomicsRequirement) -> Result<Self, HsaError> {
        let (pool, alignment) = runtime.fine_grained_pool()?;
        let gpus = runtime.gpu_agents()?;
        let verdicts =
            gpus.iter().map(|gpu| runtime.platform_atomics(gpu, pool)).collect::<Result<Vec<_>, _>>()?;
        let verdict = PlatformAtomics::combine(verdicts);
        match (&verdict, atomics) {
            (PlatformAtomics::Missing { gpu, hop, link }, AtomicsRequirement::Required) => {
                return Err(HsaError::NoPlatformAtomics { gpu: gpu.clone(), hop: *hop, link: *link });
            }
            (PlatformAtomics::Unknown(why), AtomicsRequirement::Required) => {
                log::warn!(
                    "cannot tell whether CPU/GPU atomics are mutually atomic ({why}); assuming they are"
                );
            }
            _ => {}
        }
        let gpus = gpus.into_iter().map(|gpu| gpu.handle).collect();
        Ok(Self { runtime, pool, alignment, gpus, atomics: verdict })
    }

    /// The platform-atomics verdict found at creation.
    pub fn platform_atomics(&self) -> &PlatformAtomics {
        &self.atomics
    }

    /// The pool allocations come from.
    pub fn pool(&self) -> AmdMemoryPool {
        self.pool
    }

    /// The pool's allocation alignment (the largest `align` [`DeviceMemory::allocate`] accepts).
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// The GPU agents granted access to every allocation.
    pub fn gpu_agents(&self) -> &[HsaAgent] {
        &self.gpus
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<HsaRuntime> {
        &self.runtime
    }

    fn free_raw(&self, ptr: *mut c_void) {
        // SAFETY: `ptr` came from `hsa_amd_memory_pool_allocate` and is freed once (the callers'
        // contract); the runtime is alive (we hold it).
        let status = unsafe { (self.runtime.lib.hsa_amd_memory_pool_free)(ptr) };
        if let Err(error) = self.runtime.check("hsa_amd_memory_pool_free", status) {
            log::warn!("{error}");
        }
    }
}

impl DeviceMemory for HsaMemory {
    fn name(&self) -> &'static str {
        "hsa-fine-grained"
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        if size == 0 || !align.is_power_of_two() || align > self.alignment {
            return Err(MemoryError::BadRequest { size, align });
        }
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let lib = &self.runtime.lib;
        // SAFETY: the pool allows runtime allocation (checked in `fine_grained_pool`), flags must
        // be 0, and `ptr` is a valid out-pointer.
        let status = unsafe { (lib.hsa_amd_memory_pool_allocate)(self.pool, size, 0, &mut ptr) };
        if status == HsaStatus::ERROR_OUT_OF_RESOURCES {
            return Err(MemoryError::OutOfMemory { size });
        }
        self.runtime
            .check("hsa_amd_memory_pool_allocate", status)
            .map_err(|error| MemoryError::Backend(error.to_string()))?;
        let Some(block) = NonNull::new(ptr.cast::<u8>()) else {
            return Err(MemoryError::OutOfMemory { size });
        };
        if !self.gpus.is_empty() {
            // SAFETY: `gpus` holds `gpus.len()` valid agents, flags must be null, and `ptr` is a
            // live allocation of this pool.
            let status = unsafe {
                (lib.hsa_amd_agents_allow_access)(
                    self.gpus.len() as u32,
                    self.gpus.as_ptr(),
                    std::ptr::null(),
                    ptr,
                )
            };
            if let Err(error) = self.runtime.check("hsa_amd_agents_allow_access", status) {
                self.free_raw(ptr);
                return Err(MemoryError::Backend(error.to_string()));
            }
        }
        // SAFETY: the block is `size` bytes, freshly allocated, host-accessible (fine-grained
        // system memory) and not yet shared with anyone.
        unsafe { block.as_ptr().write_bytes(0, size) };
        Ok(block)
    }

    unsafe fn free(&self, ptr: NonNull<u8>, _size: usize, _align: usize) {
        self.free_raw(ptr.as_ptr().cast());
    }

    fn device_address(&self, host: *const u8) -> u64 {
        // Fine-grained system memory is mapped at the same virtual address on every agent.
        host as u64
    }
}
