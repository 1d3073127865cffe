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
//! - [`HsaDoorbell`] is an HSA signal created at [`INIT`]; the device rings it with
//!   `signal_add 1` (release), the host waits with `hsa_signal_wait_scacquire(NE last_seen)`,
//!   and [`Doorbell::handle`] is the signal handle the buffer's `doorbell` field holds.
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

use std::ffi::{c_char, c_void, CStr, OsStr};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hsa_sys::{
    AgentInfo, AmdAgentMemoryPoolInfo, AmdLinkInfoType, AmdMemoryPool, AmdMemoryPoolAccess,
    AmdMemoryPoolGlobalFlag, AmdMemoryPoolInfo, AmdMemoryPoolLinkInfo, AmdSegment, DeviceType, HsaAgent,
    HsaLib, HsaSignal, HsaStatus, LoadError, SignalCondition, SignalValue, SystemInfo, WaitState,
};

use crate::doorbell::{Doorbell, DONE, INIT};
use crate::memory::{DeviceMemory, MemoryError};

/// Why an HSA operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HsaError {
    /// The runtime library could not be loaded.
    Load(LoadError),
    /// An HSA function returned an error status.
    Status {
        /// The HSA function.
        call: &'static str,
        /// Its status code.
        status: HsaStatus,
        /// The runtime's description of the status (`hsa_status_string`), or the status's C
        /// name where the runtime gave none.
        text: String,
    },
    /// The runtime found no GPU agent.
    NoGpuAgent,
    /// No CPU agent has a global, fine-grained pool the runtime may allocate from.
    NoFineGrainedPool,
    /// A GPU agent can never access the CPU's fine-grained pool.
    NoAccess {
        /// The GPU agent's name.
        gpu: String,
    },
    /// A GPU reaches host memory over a link without 64-bit atomics, and the caller needs them.
    NoPlatformAtomics {
        /// The GPU agent's name.
        gpu: String,
        /// Which hop of the path (0 = nearest the GPU).
        hop: usize,
        /// The kind of that link.
        link: AmdLinkInfoType,
    },
}

impl HsaError {
    /// The HSA status code, for [`HsaError::Status`].
    pub fn status(&self) -> Option<HsaStatus> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for HsaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Load(error) => error.fmt(f),
            Self::Status { call, status, text } => {
                write!(f, "{call} failed with {status:?} ({:#x}): {text}", status.0)
            }
            Self::NoGpuAgent => f.write_str("the HSA runtime found no GPU agent"),
            Self::NoFineGrainedPool => {
                f.write_str("no CPU agent has a global fine-grained memory pool that allows allocation")
            }
            Self::NoAccess { gpu } => {
                write!(f, "GPU agent {gpu:?} can never access the CPU's fine-grained memory pool")
            }
            Self::NoPlatformAtomics { gpu, hop, link } => write!(
                f,
                "GPU agent {gpu:?} reaches host memory over a {link:?} link (hop {hop}) without 64-bit \
                 atomics (PCIe AtomicOps): the stack protocol's host and device read-modify-writes of \
                 `ready_stack` would not be mutually atomic (packets served twice, hangs); use the \
                 phase protocol instead, which needs no host/device atomics \
                 (HsaMemory::new with AtomicsRequirement::NotRequired)"
            ),
        }
    }
}

impl std::error::Error for HsaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Load(error) => Some(error),
            _ => None,
        }
    }
}

impl From<LoadError> for HsaError {
    fn from(error: LoadError) -> Self {
        Self::Load(error)
    }
}

/// The runtime's text for `status`: `hsa_status_string`'s, else the status's C name.
pub fn status_text(lib: &HsaLib, status: HsaStatus) -> String {
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: `hsa_status_string` writes one pointer to `text`, which is a valid out-pointer; it
    // may be called before `hsa_init` succeeds (it reads a static table).
    let result = unsafe { (lib.hsa_status_string)(status, &mut text) };
    if result.is_success() && !text.is_null() {
        // SAFETY: on success `text` points to a static NUL-terminated string owned by the runtime,
        // which stays loaded while `lib` lives; it is copied out here.
        return unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned();
    }
    status.c_name().map_or_else(|| format!("unknown HSA status {:#x}", status.0), str::to_owned)
}

fn check(lib: &HsaLib, call: &'static str, status: HsaStatus) -> Result<(), HsaError> {
    if status.is_success() {
        Ok(())
    } else {
        Err(HsaError::Status { call, status, text: status_text(lib, status) })
    }
}

/// One HSA agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// Its handle.
    pub handle: HsaAgent,
    /// CPU, GPU or DSP.
    pub device_type: DeviceType,
    /// `HSA_AGENT_INFO_NAME` (e.g. `gfx90a`).
    pub name: String,
}

/// The HSA runtime, initialised: `hsa_init` on creation, `hsa_shut_down` on drop.
pub struct HsaRuntime {
    lib: HsaLib,
}

impl fmt::Debug for HsaRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsaRuntime").field("library", &self.lib.path()).finish()
    }
}

impl HsaRuntime {
    /// Loads the library ([`HsaLib::load`]: `HOSTCALL_HSA_LIB`, else the default name) and
    /// initialises the runtime.
    pub fn new() -> Result<Self, HsaError> {
        Self::with_library(HsaLib::load()?)
    }

    /// Loads the library from `path` (the environment is not consulted) and initialises it.
    pub fn from_path(path: impl AsRef<OsStr>) -> Result<Self, HsaError> {
        Self::with_library(HsaLib::load_from(path)?)
    }

    /// Initialises the runtime of an already loaded library.
    pub fn with_library(lib: HsaLib) -> Result<Self, HsaError> {
        // SAFETY: `hsa_init` takes no argument and may be called at any time (it is reference
        // counted); a failure leaves nothing to shut down.
        let status = unsafe { (lib.hsa_init)() };
        check(&lib, "hsa_init", status)?;
        Ok(Self { lib })
    }

    /// The loaded functions.
    pub fn library(&self) -> &HsaLib {
        &self.lib
    }

    /// The runtime's text for `status`.
    pub fn status_text(&self, status: HsaStatus) -> String {
        status_text(&self.lib, status)
    }

    fn check(&self, call: &'static str, status: HsaStatus) -> Result<(), HsaError> {
        check(&self.lib, call, status)
    }

    /// Reads a system attribute of type `T`.
    ///
    /// # Safety
    /// `T` must be the attribute's documented C type (e.g. `u64` for
    /// [`SystemInfo::TIMESTAMP_FREQUENCY`]).
    pub unsafe fn system_info<T: Copy + Default>(&self, attribute: SystemInfo) -> Result<T, HsaError> {
        let mut value = T::default();
        // SAFETY: the runtime is initialised; `value` is a valid out-pointer of the attribute's
        // type (the caller's contract).
        let status = unsafe { (self.lib.hsa_system_get_info)(attribute, (&mut value as *mut T).cast()) };
        self.check("hsa_system_get_info", status).map(|()| value)
    }

    /// Signal-wait timeouts are in these units per second (`HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`).
    pub fn timestamp_frequency(&self) -> Result<u64, HsaError> {
        // SAFETY: the attribute is a `uint64_t`.
        unsafe { self.system_info::<u64>(SystemInfo::TIMESTAMP_FREQUENCY) }
    }

    /// Reads an agent attribute of type `T`.
    ///
    /// # Safety
    /// `T` must be the attribute's documented C type (e.g. [`DeviceType`] for
    /// [`AgentInfo::DEVICE`], `[u8; 64]` for [`AgentInfo::NAME`]).
    pub unsafe fn agent_info<T: Copy>(
        &self,
        agent: HsaAgent,
        attribute: AgentInfo,
        init: T,
    ) -> Result<T, HsaError> {
        let mut value = init;
        // SAFETY: the runtime is initialised; `value` is a valid out-pointer of the attribute's
        // type (the caller's contract).
        let status =
            unsafe { (self.lib.hsa_agent_get_info)(agent, attribute, (&mut value as *mut T).cast()) };
        self.check("hsa_agent_get_info", status).map(|()| value)
    }

    /// Every agent the runtime knows.
    pub fn agents(&self) -> Result<Vec<Agent>, HsaError> {
        let mut handles: Vec<HsaAgent> = Vec::new();
        // SAFETY: the runtime is initialised; `collect_handle::<HsaAgent>` treats `data` as the
        // `Vec<HsaAgent>` passed here, which lives across the (synchronous) iteration.
        let status = unsafe {
            (self.lib.hsa_iterate_agents)(
                collect_handle::<HsaAgent>,
                (&mut handles as *mut Vec<HsaAgent>).cast(),
            )
        };
        self.check("hsa_iterate_agents", status)?;
        handles.into_iter().map(|handle| self.describe(handle)).collect()
    }

    fn describe(&self, handle: HsaAgent) -> Result<Agent, HsaError> {
        // SAFETY: HSA_AGENT_INFO_DEVICE is an `hsa_device_type_t` (a 32-bit enum, which
        // `DeviceType` mirrors) and HSA_AGENT_INFO_NAME a `char[64]`.
        let (device_type, name) = unsafe {
            (
                self.agent_info(handle, AgentInfo::DEVICE, DeviceType(u32::MAX))?,
                self.agent_info(handle, AgentInfo::NAME, [0u8; 64])?,
            )
        };
        let end = name.iter().position(|&byte| byte == 0).unwrap_or(name.len());
        Ok(Agent { handle, device_type, name: String::from_utf8_lossy(&name[..end]).into_owned() })
    }

    /// The CPU agents.
    pub fn cpu_agents(&self) -> Result<Vec<Agent>, HsaError> {
        Ok(self.agents()?.into_iter().filter(|agent| agent.device_type == DeviceType::CPU).collect())
    }

    /// The GPU agents.
    pub fn gpu_agents(&self) -> Result<Vec<Agent>, HsaError> {
        Ok(self.agents()?.into_iter().filter(|agent| agent.device_type == DeviceType::GPU).collect())
    }

    /// The memory pools of `agent`.
    pub fn memory_pools(&self, agent: HsaAgent) -> Result<Vec<AmdMemoryPool>, HsaError> {
        let mut pools: Vec<AmdMemoryPool> = Vec::new();
        // SAFETY: the runtime is initialised; `collect_handle::<AmdMemoryPool>` treats `data` as
        // the `Vec<AmdMemoryPool>` passed here, which lives across the (synchronous) iteration.
        let status = unsafe {
            (self.lib.hsa_amd_agent_iterate_memory_pools)(
                agent,
                collect_handle::<AmdMemoryPool>,
                (&mut pools as *mut Vec<AmdMemoryPool>).cast(),
            )
        };
        self.check("hsa_amd_agent_iterate_memory_pools", status).map(|()| pools)
    }

    /// Reads a memory pool attribute of type `T`.
    ///
    /// # Safety
    /// `T` must be the attribute's documented C type (`u32` for the global flags, `bool` for
    /// RUNTIME_ALLOC_ALLOWED, `usize` for sizes, [`AmdSegment`] for the segment).
    pub unsafe fn pool_info<T: Copy>(
        &self,
        pool: AmdMemoryPool,
        attribute: AmdMemoryPoolInfo,
        init: T,
    ) -> Result<T, HsaError> {
        let mut value = init;
        // SAFETY: the runtime is initialised; `value` is a valid out-pointer of the attribute's
        // type (the caller's contract).
        let status = unsafe {
            (self.lib.hsa_amd_memory_pool_get_info)(pool, attribute, (&mut value as *mut T).cast())
        };
        self.check("hsa_amd_memory_pool_get_info", status).map(|()| value)
    }

    /// The first pool of a CPU agent that is global, fine-grained and allows allocation, with
    /// its allocation alignment.
    pub fn fine_grained_pool(&self) -> Result<(AmdMemoryPool, usize), HsaError> {
        for cpu in self.cpu_agents()? {
            for pool in self.memory_pools(cpu.handle)? {
                // SAFETY: the segment is an `hsa_amd_segment_t` (mirrored by `AmdSegment`), the
                // flags a `uint32_t` (read only for global pools, where they are defined),
                // RUNTIME_ALLOC_ALLOWED a `bool`, RUNTIME_ALLOC_ALIGNMENT a `size_t`.
                unsafe {
                    if self.pool_info(pool, AmdMemoryPoolInfo::SEGMENT, AmdSegment(u32::MAX))?
                        != AmdSegment::GLOBAL
                    {
                        continue;
                    }
                    let flags = self.pool_info(pool, AmdMemoryPoolInfo::GLOBAL_FLAGS, 0u32)?;
                    if !AmdMemoryPoolGlobalFlag::FINE_GRAINED.is_set_in(flags)
                        || !self.pool_info(pool, AmdMemoryPoolInfo::RUNTIME_ALLOC_ALLOWED, false)?
                    {
                        continue;
                    }
                    let alignment =
                        self.pool_info(pool, AmdMemoryPoolInfo::RUNTIME_ALLOC_ALIGNMENT, 0usize)?;
                    return Ok((pool, alignment.max(1)));
                }
            }
        }
        Err(HsaError::NoFineGrainedPool)
    }

    /// Whether `gpu`'s atomics on `pool` are atomic with the host's, as far as the runtime tells
    /// (see the module docs). Errors with [`HsaError::NoAccess`] if `gpu` can never reach `pool`.
    pub fn platform_atomics(&self, gpu: &Agent, pool: AmdMemoryPool) -> Result<PlatformAtomics, HsaError> {
        // SAFETY: ACCESS is an `hsa_amd_memory_pool_access_t` (a 32-bit enum, mirrored by
        // `AmdMemoryPoolAccess`) and NUM_LINK_HOPS a `uint32_t`.
        let (access, hops) = unsafe {
            (
                self.agent_pool_info(
                    gpu.handle,
                    pool,
                    AmdAgentMemoryPoolInfo::ACCESS,
                    AmdMemoryPoolAccess(0),
                )?,
                self.agent_pool_info(gpu.handle, pool, AmdAgentMemoryPoolInfo::NUM_LINK_HOPS, 0u32)?,
            )
        };
        if access == AmdMemoryPoolAccess::NEVER_ALLOWED {
            return Err(HsaError::NoAccess { gpu: gpu.name.clone() });
        }
        let mut links = vec![AmdMemoryPoolLinkInfo::default(); hops as usize];
        if !links.is_empty() {
            // SAFETY: LINK_INFO is an array of NUM_LINK_HOPS `hsa_amd_memory_pool_link_info_t`
            // (mirrored by `AmdMemoryPoolLinkInfo`, layout checked against the header); `links`
            // has exactly that many elements, initialised.
            let status = unsafe {
                (self.lib.hsa_amd_agent_memory_pool_get_info)(
                    gpu.handle,
                    pool,
                    AmdAgentMemoryPoolInfo::LINK_INFO,
                    links.as_mut_ptr().cast(),
                )
            };
            self.check("hsa_amd_agent_memory_pool_get_info", status)?;
        }
        Ok(PlatformAtomics::from_links(&gpu.name, &links))
    }

    /// # Safety
    /// `T` must be the attribute's documented C type.
    unsafe fn agent_pool_info<T: Copy>(
        &self,
        agent: HsaAgent,
        pool: AmdMemoryPool,
        attribute: AmdAgentMemoryPoolInfo,
        init: T,
    ) -> Result<T, HsaError> {
        let mut value = init;
        // SAFETY: the runtime is initialised; `value` is a valid out-pointer of the attribute's
        // type (the caller's contract).
        let status = unsafe {
            (self.lib.hsa_amd_agent_memory_pool_get_info)(
                agent,
                pool,
                attribute,
                (&mut value as *mut T).cast(),
            )
        };
        self.check("hsa_amd_agent_memory_pool_get_info", status).map(|()| value)
    }
}

impl Drop for HsaRuntime {
    fn drop(&mut self) {
        // SAFETY: this value's `hsa_init` succeeded, so this drops exactly the reference it took.
        let status = unsafe { (self.lib.hsa_shut_down)() };
        if !status.is_success() {
            log::warn!("hsa_shut_down failed: {}", self.status_text(status));
        }
    }
}

/// The iteration callback: appends each handle to the `Vec<H>` behind `data`.
///
/// # Safety
/// `data` must point to a live `Vec<H>` that nothing else accesses during the iteration.
unsafe extern "C" fn collect_handle<H>(handle: H, data: *mut c_void) -> HsaStatus {
    // SAFETY: the callers (`agents`, `memory_pools`) pass a `&mut Vec<H>` as `data` and the
    // runtime calls back synchronously, on the calling thread, before the iteration returns.
    let handles = unsafe { &mut *data.cast::<Vec<H>>() };
    handles.push(handle);
    HsaStatus::SUCCESS
}

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

/// Converts a timeout to HSA timestamp units (`frequency` per second), saturating.
pub fn timeout_ticks(timeout: Duration, frequency: u64) -> u64 {
    let ticks = timeout.as_nanos().saturating_mul(u128::from(frequency)) / 1_000_000_000;
    u64::try_from(ticks).unwrap_or(u64::MAX)
}

/// A doorbell that is an HSA signal: what a GPU kernel rings.
pub struct HsaDoorbell {
    runtime: Arc<HsaRuntime>,
    signal: HsaSignal,
    frequency: u64,
}

impl fmt::Debug for HsaDoorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsaDoorbell").field("signal", &self.signal).finish()
    }
}

impl HsaDoorbell {
    /// Creates a signal at [`INIT`] with no specific consumers (so any agent may wait on it).
    pub fn new(runtime: Arc<HsaRuntime>) -> Result<Self, HsaError> {
        let frequency = runtime.timestamp_frequency().unwrap_or(1_000_000_000).max(1);
        let mut signal = HsaSignal::default();
        // SAFETY: no consumer list (0, null) is allowed; `signal` is a valid out-pointer.
        let status =
            unsafe { (runtime.lib.hsa_signal_create)(INIT as SignalValue, 0, std::ptr::null(), &mut signal) };
        runtime.check("hsa_signal_create", status)?;
        Ok(Self { runtime, signal, frequency })
    }

    /// The signal.
    pub fn signal(&self) -> HsaSignal {
        self.signal
    }
}

impl Doorbell for HsaDoorbell {
    fn handle(&self) -> u64 {
        self.signal.handle
    }

    fn ring(&self) {
        // SAFETY: the signal is live until drop. Release (`screlease`): the caller's earlier writes
        // (the ready-stack push) are ordered before the ring, as with the device's `signal_add`.
        unsafe { (self.runtime.lib.hsa_signal_add_screlease)(self.signal, 1) }
    }

    fn value(&self) -> u64 {
        // SAFETY: the signal is live until drop.
        unsafe { (self.runtime.lib.hsa_signal_load_scacquire)(self.signal) as u64 }
    }

    fn wait(&self, last_seen: u64, timeout: Duration) -> u64 {
        if timeout.is_zero() {
            return self.value();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // SAFETY: the signal is live until drop. The wait may return early (the HSA spec
            // allows spurious wake-ups); the loop waits out the rest of the timeout.
            let value = unsafe {
                (self.runtime.lib.hsa_signal_wait_scacquire)(
                    self.signal,
                    SignalCondition::NE,
                    last_seen as SignalValue,
                    timeout_ticks(left, self.frequency),
                    WaitState::BLOCKED,
                )
            } as u64;
            if value != last_seen || Instant::now() >= deadline {
                return value;
            }
        }
    }

    fn stop(&self) {
        // SAFETY: the signal is live until drop.
        unsafe { (self.runtime.lib.hsa_signal_store_screlease)(self.signal, DONE as SignalValue) }
    }
}

impl Drop for HsaDoorbell {
    fn drop(&mut self) {
        // SAFETY: the signal was created by `new` and is destroyed once, here.
        let status = unsafe { (self.runtime.lib.hsa_signal_destroy)(self.signal) };
        if let Err(error) = self.runtime.check("hsa_signal_destroy", status) {
            log::warn!("{error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(atomic_64: bool, link_type: AmdLinkInfoType) -> AmdMemoryPoolLinkInfo {
        AmdMemoryPoolLinkInfo { atomic_support_64bit: atomic_64, link_type, ..Default::default() }
    }

    #[test]
    fn a_link_without_64_bit_atomics_is_missing() {
        let verdict = PlatformAtomics::from_links(
            "gfx90a",
            &[link(true, AmdLinkInfoType::XGMI), link(false, AmdLinkInfoType::PCIE)],
        );
        assert_eq!(
            verdict,
            PlatformAtomics::Missing { gpu: "gfx90a".into(), hop: 1, link: AmdLinkInfoType::PCIE }
        );
        assert_eq!(
            PlatformAtomics::from_links("gfx90a", &[link(true, AmdLinkInfoType::PCIE)]),
            PlatformAtomics::Supported
        );
        assert!(matches!(PlatformAtomics::from_links("gfx90a", &[]), PlatformAtomics::Unknown(_)));
    }

    #[test]
    fn combine_prefers_missing_then_unknown() {
        let missing = PlatformAtomics::Missing { gpu: "b".into(), hop: 0, link: AmdLinkInfoType::PCIE };
        let unknown = PlatformAtomics::Unknown("a".into());
        assert_eq!(
            PlatformAtomics::combine([PlatformAtomics::Supported, unknown.clone(), missing.clone()]),
            missing
        );
        assert_eq!(PlatformAtomics::combine([PlatformAtomics::Supported, unknown.clone()]), unknown);
        assert_eq!(PlatformAtomics::combine([]), PlatformAtomics::Supported);
    }

    #[test]
    fn the_atomics_error_names_the_phase_protocol() {
        let error = HsaError::NoPlatformAtomics { gpu: "gfx90a".into(), hop: 0, link: AmdLinkInfoType::PCIE };
        let text = error.to_string();
        assert!(text.contains("phase protocol"), "{text}");
        assert!(text.contains("HSA_AMD_LINK_INFO_TYPE_PCIE"), "{text}");
    }

    #[test]
    fn timeouts_convert_to_ticks_and_saturate() {
        assert_eq!(timeout_ticks(Duration::from_millis(3), 1_000_000_000), 3_000_000);
        assert_eq!(timeout_ticks(Duration::from_secs(2), 100_000_000), 200_000_000);
        assert_eq!(timeout_ticks(Duration::MAX, 1_000_000_000), u64::MAX);
        assert_eq!(timeout_ticks(Duration::ZERO, 1_000_000_000), 0);
    }

    #[test]
    fn status_errors_show_code_name_and_text() {
        let error = HsaError::Status {
            call: "hsa_init",
            status: HsaStatus::ERROR_OUT_OF_RESOURCES,
            text: "out of resources".into(),
        };
        assert_eq!(
            error.to_string(),
            "hsa_init failed with HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008): out of resources"
        );
        assert_eq!(error.status(), Some(HsaStatus(0x1008)));
    }
}
