//! [`HsaRuntime`]: the loaded, initialised runtime; its agents and their memory pools.

use std::ffi::{c_void, OsStr};
use std::fmt;

use hsa_sys::{
    AgentInfo, AmdAgentMemoryPoolInfo, AmdMemoryPool, AmdMemoryPoolAccess, AmdMemoryPoolInfo,
    AmdMemoryPoolLinkInfo, DeviceType, HsaAgent, HsaLib, HsaStatus, SystemInfo,
};

use super::error::{check, status_text, HsaError};

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
    pub(super) lib: HsaLib,
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

    pub(super) fn check(&self, call: &'static str, status: HsaStatus) -> Result<(), HsaError> {
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
    /// RUNTIME_ALLOC_ALLOWED, `usize` for sizes, [`AmdSegment`](hsa_sys::AmdSegment) for the segment).
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

    /// How `agent` may reach `pool`, and the link hops in between (none: the pool is the
    /// agent's own, or on the same chip).
    pub fn links(
        &self,
        agent: HsaAgent,
        pool: AmdMemoryPool,
    ) -> Result<(AmdMemoryPoolAccess, Vec<AmdMemoryPoolLinkInfo>), HsaError> {
        // SAFETY: ACCESS is an `hsa_amd_memory_pool_access_t` (a 32-bit enum, mirrored by
        // `AmdMemoryPoolAccess`) and NUM_LINK_HOPS a `uint32_t`.
        let (access, hops) = unsafe {
            (
                self.agent_pool_info(agent, pool, AmdAgentMemoryPoolInfo::ACCESS, AmdMemoryPoolAccess(0))?,
                self.agent_pool_info(agent, pool, AmdAgentMemoryPoolInfo::NUM_LINK_HOPS, 0u32)?,
            )
        };
        let mut links = vec![AmdMemoryPoolLinkInfo::default(); hops as usize];
        if !links.is_empty() {
            // SAFETY: LINK_INFO is an array of NUM_LINK_HOPS `hsa_amd_memory_pool_link_info_t`
            // (mirrored by `AmdMemoryPoolLinkInfo`, layout checked against the header); `links`
            // has exactly that many elements, initialised.
            let status = unsafe {
                (self.lib.hsa_amd_agent_memory_pool_get_info)(
                    agent,
                    pool,
                    AmdAgentMemoryPoolInfo::LINK_INFO,
                    links.as_mut_ptr().cast(),
                )
            };
            self.check("hsa_amd_agent_memory_pool_get_info", status)?;
        }
        Ok((access, links))
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
