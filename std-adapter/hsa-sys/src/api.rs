//! The HSA functions, loaded at run time from the runtime library.

use core::ffi::{c_char, c_void};
use std::ffi::{OsStr, OsString};
use std::fmt;

use libloading::Library;

use crate::enums::{
    AgentInfo, AmdAgentMemoryPoolInfo, AmdMemoryPoolInfo, HsaStatus, SignalCondition, SystemInfo, WaitState,
};
use crate::types::{AmdMemoryPool, HsaAgent, HsaSignal, SignalValue};

/// The environment variable that overrides the library [`HsaLib::load`] opens.
pub const LIBRARY_ENV: &str = "HOSTCALL_HSA_LIB";

/// The library [`HsaLib::load`] opens when [`LIBRARY_ENV`] is unset (found through the dynamic
/// loader's search path).
pub const DEFAULT_LIBRARY: &str = "libhsa-runtime64.so.1";

/// Where ROCm installs the runtime, tried by [`HsaLib::load`] when [`DEFAULT_LIBRARY`] is not on
/// the search path and [`LIBRARY_ENV`] is unset.
pub const ROCM_LIBRARY: &str = "/opt/rocm/lib/libhsa-runtime64.so.1";

/// The callback `hsa_iterate_agents` calls once per agent.
pub type AgentCallback = unsafe extern "C" fn(agent: HsaAgent, data: *mut c_void) -> HsaStatus;

/// The callback `hsa_amd_agent_iterate_memory_pools` calls once per pool.
pub type MemoryPoolCallback = unsafe extern "C" fn(pool: AmdMemoryPool, data: *mut c_void) -> HsaStatus;

/// Why the HSA runtime library could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// `dlopen` failed (typically: ROCm is not installed).
    Open {
        /// The path or name handed to `dlopen`.
        path: String,
        /// The dynamic loader's message.
        message: String,
    },
    /// The library opened but lacks a function (not an HSA runtime, or too old).
    Symbol {
        /// The library.
        path: String,
        /// The missing function.
        symbol: &'static str,
        /// The dynamic loader's message.
        message: String,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The hint only where the default name was tried: a path from `LIBRARY_ENV` (or
            // the caller) is what failed, and setting it again would not help.
            Self::Open { path, message } if path == DEFAULT_LIBRARY => {
                write!(
                    f,
                    "cannot load the HSA runtime from {path:?} (set {LIBRARY_ENV} to its path): {message}"
                )
            }
            Self::Open { path, message } => {
                write!(f, "cannot load the HSA runtime from {path:?}: {message}")
            }
            Self::Symbol { path, symbol, message } => {
                write!(f, "{path:?} is not a usable HSA runtime: it lacks `{symbol}`: {message}")
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// The library [`HsaLib::load`] opens: the value of [`LIBRARY_ENV`] if set and not empty, else
/// [`DEFAULT_LIBRARY`].
pub fn library_path() -> OsString {
    library_path_from(std::env::var_os(LIBRARY_ENV))
}

/// [`library_path`] with the environment variable's value passed in (`None`: unset).
pub fn library_path_from(env_value: Option<OsString>) -> OsString {
    env_value.filter(|value| !value.is_empty()).unwrap_or_else(|| DEFAULT_LIBRARY.into())
}

macro_rules! hsa_functions {
    ($( $(#[$meta:meta])* $name:ident: fn($($arg:ident: $ty:ty),*) $(-> $ret:ty)?; )*) => {
        /// The HSA runtime's functions, resolved from a loaded library.
        ///
        /// Each field is the C function of the same name. The pointers are valid while this
        /// value lives (it keeps the library loaded): do not call a copy of one after dropping
        /// the `HsaLib` it came from. Calling them is `unsafe`: the caller upholds the HSA
        /// specification's contract for each (valid handles, valid out-pointers of the right
        /// size for the attribute, `hsa_init` succeeded before anything but `hsa_init` and
        /// `hsa_status_string`).
        pub struct HsaLib {
            $( $(#[$meta])* pub $name: unsafe extern "C" fn($($arg: $ty),*) $(-> $ret)?, )*
            /// `hsa_status_t hsa_system_get_major_extension_table(uint16_t extension, uint16_t
            /// version_major, size_t table_length, void* table)`, where the library has it (ROCr
            /// does; loading does not fail without it): the loader extension's table
            /// ([`crate::AmdLoaderTable`], [`crate::EXTENSION_AMD_LOADER`], version 1).
            pub hsa_system_get_major_extension_table: Option<crate::loader::GetMajorExtensionTable>,
            path: OsString,
            _library: Library,
        }

        impl HsaLib {
            /// The names of every function this struct resolves.
            pub const FUNCTIONS: &'static [&'static str] = &[$(stringify!($name)),*];

            fn resolve(library: Library, path: OsString) -> Result<Self, LoadError> {
                $(
                    // SAFETY: the field's type is the C prototype of this function in the ROCm
                    // 5.x headers (`hsa.h`, `hsa_ext_amd.h`); the pointer is stored next to the
                    // `Library`, which stays loaded as long as the pointer is reachable through
                    // `self`.
                    let $name = unsafe {
                        library.get::<unsafe extern "C" fn($($ty),*) $(-> $ret)?>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                    }
                    .map(|symbol| *symbol)
                    .map_err(|error| LoadError::Symbol {
                        path: path.to_string_lossy().into_owned(),
                        symbol: stringify!($name),
                        message: error.to_string(),
                    })?;
                )*
                // SAFETY: as above: the C prototype of `hsa_system_get_major_extension_table`
                // (`hsa.h`), kept next to the `Library`.
                let hsa_system_get_major_extension_table = unsafe {
                    library.get::<crate::loader::GetMajorExtensionTable>(b"hsa_system_get_major_extension_table\0")
                }
                .ok()
                .map(|symbol| *symbol);
                Ok(Self { $($name,)* hsa_system_get_major_extension_table, path, _library: library })
            }
        }
    };
}

hsa_functions! {
    /// `hsa_status_t hsa_init(void)`: initialises the runtime (reference counted).
    hsa_init: fn() -> HsaStatus;
    /// `hsa_status_t hsa_shut_down(void)`: drops one reference taken by `hsa_init`.
    hsa_shut_down: fn() -> HsaStatus;
    /// `hsa_status_t hsa_status_string(hsa_status_t, const char**)`: a static description.
    hsa_status_string: fn(status: HsaStatus, text: *mut *const c_char) -> HsaStatus;
    /// `hsa_status_t hsa_system_get_info(hsa_system_info_t, void*)`.
    hsa_system_get_info: fn(attribute: SystemInfo, value: *mut c_void) -> HsaStatus;
    /// `hsa_status_t hsa_iterate_agents(callback, void* data)`.
    hsa_iterate_agents: fn(callback: AgentCallback, data: *mut c_void) -> HsaStatus;
    /// `hsa_status_t hsa_agent_get_info(hsa_agent_t, hsa_agent_info_t, void*)`.
    hsa_agent_get_info: fn(agent: HsaAgent, attribute: AgentInfo, value: *mut c_void) -> HsaStatus;
    /// `hsa_status_t hsa_amd_agent_iterate_memory_pools(hsa_agent_t, callback, void* data)`.
    hsa_amd_agent_iterate_memory_pools: fn(agent: HsaAgent, callback: MemoryPoolCallback, data: *mut c_void) -> HsaStatus;
    /// `hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t, hsa_amd_memory_pool_info_t, void*)`.
    hsa_amd_memory_pool_get_info: fn(pool: AmdMemoryPool, attribute: AmdMemoryPoolInfo, value: *mut c_void) -> HsaStatus;
    /// `hsa_status_t hsa_amd_agent_memory_pool_get_info(hsa_agent_t, hsa_amd_memory_pool_t,
    /// hsa_amd_agent_memory_pool_info_t, void*)`.
    hsa_amd_agent_memory_pool_get_info: fn(agent: HsaAgent, pool: AmdMemoryPool, attribute: AmdAgentMemoryPoolInfo, value: *mut c_void) -> HsaStatus;
    /// `hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t, size_t, uint32_t flags, void** ptr)`.
    hsa_amd_memory_pool_allocate: fn(pool: AmdMemoryPool, size: usize, flags: u32, ptr: *mut *mut c_void) -> HsaStatus;
    /// `hsa_status_t hsa_amd_memory_pool_free(void*)`.
    hsa_amd_memory_pool_free: fn(ptr: *mut c_void) -> HsaStatus;
    /// `hsa_status_t hsa_amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
    /// const uint32_t* flags, const void* ptr)` (`flags` must be null).
    hsa_amd_agents_allow_access: fn(num_agents: u32, agents: *const HsaAgent, flags: *const u32, ptr: *const c_void) -> HsaStatus;
    /// `hsa_status_t hsa_amd_memory_fill(void* ptr, uint32_t value, size_t count)`: sets `count`
    /// `uint32_t`s from `ptr` (4-aligned) to `value`, from any agent's memory (device-local
    /// memory included, which the CPU may not reach); returns when done.
    hsa_amd_memory_fill: fn(ptr: *mut c_void, value: u32, count: usize) -> HsaStatus;
    /// `hsa_status_t hsa_signal_create(hsa_signal_value_t initial, uint32_t num_consumers,
    /// const hsa_agent_t* consumers, hsa_signal_t* signal)`.
    hsa_signal_create: fn(initial_value: SignalValue, num_consumers: u32, consumers: *const HsaAgent, signal: *mut HsaSignal) -> HsaStatus;
    /// `hsa_status_t hsa_signal_destroy(hsa_signal_t)`.
    hsa_signal_destroy: fn(signal: HsaSignal) -> HsaStatus;
    /// `hsa_signal_value_t hsa_signal_load_scacquire(hsa_signal_t)`.
    hsa_signal_load_scacquire: fn(signal: HsaSignal) -> SignalValue;
    /// `hsa_signal_value_t hsa_signal_load_relaxed(hsa_signal_t)`.
    hsa_signal_load_relaxed: fn(signal: HsaSignal) -> SignalValue;
    /// `void hsa_signal_store_screlease(hsa_signal_t, hsa_signal_value_t)`.
    hsa_signal_store_screlease: fn(signal: HsaSignal, value: SignalValue);
    /// `void hsa_signal_store_relaxed(hsa_signal_t, hsa_signal_value_t)`.
    hsa_signal_store_relaxed: fn(signal: HsaSignal, value: SignalValue);
    /// `void hsa_signal_add_screlease(hsa_signal_t, hsa_signal_value_t)`.
    hsa_signal_add_screlease: fn(signal: HsaSignal, value: SignalValue);
    /// `hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t, hsa_signal_condition_t,
    /// hsa_signal_value_t compare, uint64_t timeout_hint, hsa_wait_state_t)`: the timeout is in
    /// units of `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`; the wait may return early (spuriously).
    hsa_signal_wait_scacquire: fn(signal: HsaSignal, condition: SignalCondition, compare_value: SignalValue, timeout_hint: u64, wait_state: WaitState) -> SignalValue;
}

impl HsaLib {
    /// Loads the runtime from [`library_path`] (the [`LIBRARY_ENV`] override, else
    /// [`DEFAULT_LIBRARY`]; when the default is not found, [`ROCM_LIBRARY`] is tried too and the
    /// error reported is the default's).
    pub fn load() -> Result<Self, LoadError> {
        let overridden = std::env::var_os(LIBRARY_ENV).is_some_and(|value| !value.is_empty());
        match Self::load_from(library_path()) {
            Err(error @ LoadError::Open { .. }) if !overridden => {
                Self::load_from(ROCM_LIBRARY).map_err(|_| error)
            }
            result => result,
        }
    }

    /// Loads the runtime from `path` (a file path, or a bare name searched the way `dlopen`
    /// searches). The environment is not consulted.
    pub fn load_from(path: impl AsRef<OsStr>) -> Result<Self, LoadError> {
        let path = path.as_ref().to_os_string();
        // SAFETY: loading a shared library runs its initialisers. The path names the HSA runtime
        // (or what the user configured in its place); its initialisers only set up the runtime's
        // own state and are sound to run on any thread.
        let library = unsafe { Library::new(&path) }.map_err(|error| LoadError::Open {
            path: path.to_string_lossy().into_owned(),
            message: error.to_string(),
        })?;
        Self::resolve(library, path)
    }

    /// The path or name the library was loaded from.
    pub fn path(&self) -> &OsStr {
        &self.path
    }
}

impl fmt::Debug for HsaLib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsaLib").field("path", &self.path).finish_non_exhaustive()
    }
}
