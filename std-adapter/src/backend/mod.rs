//! Choosing the memory and doorbell backend at run time.
//!
//! [`detect`] uses HSA when the runtime library loads, `hsa_init` succeeds, a GPU agent is found
//! and fine-grained memory for it is set up ([`HsaMemory`], [`HsaDoorbell`]); otherwise it falls
//! back to host memory ([`HostMemory`], [`ParkingDoorbell`]), which emulated waves and embedded
//! runtimes use. Either way [`Backend::reason`] says why, in words, and the choice is logged at
//! `info` level through the `log` facade. Detection never panics and never aborts.
//!
//! With the default options (the stack protocol), a GPU whose link to host memory reports no
//! 64-bit atomics is not used: the fallback reason is [`HsaError::NoPlatformAtomics`], which
//! points to the phase protocol; detect with [`AtomicsRequirement::NotRequired`] to use HSA
//! memory for the phase protocol there.
//!
//! ```
//! let backend = hostcall::backend::detect_with(&hostcall::backend::DetectOptions {
//!     library: Some("/nonexistent/libhsa-runtime64.so.1".into()),
//!     ..Default::default()
//! });
//! assert_eq!(backend.kind, hostcall::backend::BackendKind::Host);
//! println!("{}", backend.reason);
//! ```

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod hsa;

use std::ffi::OsString;
use std::fmt;
use std::sync::Arc;

use self::hsa::{AtomicsRequirement, HsaDoorbell, HsaError, HsaMemory, HsaRuntime};
use crate::doorbell::{Doorbell, ParkingDoorbell};
use crate::memory::{DeviceMemory, HostMemory};

/// Which backend [`detect`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// HSA fine-grained memory and HSA signals: a GPU can reach the buffers.
    Hsa,
    /// Ordinary host memory and a parking doorbell: only host threads (emulated waves) can.
    Host,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Hsa => "hsa",
            Self::Host => "host",
        })
    }
}

/// How [`detect_with`] looks for HSA.
#[derive(Debug, Clone, Default)]
pub struct DetectOptions {
    /// The runtime library to load; `None`: `HOSTCALL_HSA_LIB`, else `libhsa-runtime64.so.1`.
    pub library: Option<OsString>,
    /// Whether CPU/GPU atomics must be mutually atomic ([`AtomicsRequirement::Required`] for the
    /// stack protocol, the default; `NotRequired` for the phase protocol).
    pub atomics: AtomicsRequirement,
}

/// The chosen memory and doorbell, and why.
#[derive(Debug, Clone)]
pub struct Backend {
    /// Where buffers are allocated.
    pub memory: Arc<dyn DeviceMemory>,
    /// A doorbell for a buffer (more from [`Backend::new_doorbell`]).
    pub doorbell: Arc<dyn Doorbell>,
    /// Which backend this is.
    pub kind: BackendKind,
    /// Why, in words (for logs and users).
    pub reason: String,
    /// Why HSA was not used, where it was not (typed).
    pub fallback: Option<HsaError>,
    /// The HSA runtime, for [`BackendKind::Hsa`].
    pub runtime: Option<Arc<HsaRuntime>>,
}

impl Backend {
    /// The host backend, with `reason` recorded.
    pub fn host(reason: impl Into<String>, fallback: Option<HsaError>) -> Self {
        Self {
            memory: Arc::new(HostMemory),
            doorbell: Arc::new(ParkingDoorbell::new()),
            kind: BackendKind::Host,
            reason: reason.into(),
            fallback,
            runtime: None,
        }
    }

    /// Sets up the HSA backend on an initialised runtime.
    pub fn hsa(runtime: Arc<HsaRuntime>, atomics: AtomicsRequirement) -> Result<Self, HsaError> {
        let gpus = runtime.gpu_agents()?;
        if gpus.is_empty() {
            return Err(HsaError::NoGpuAgent);
        }
        let memory = HsaMemory::new(runtime.clone(), atomics)?;
        let doorbell = HsaDoorbell::new(runtime.clone())?;
        let names: Vec<&str> = gpus.iter().map(|gpu| gpu.name.as_str()).collect();
        let reason = format!(
            "HSA runtime {:?}: {} GPU agent(s) ({}), CPU fine-grained pool, platform atomics: {:?}",
            runtime.library().path(),
            gpus.len(),
            names.join(", "),
            memory.platform_atomics()
        );
        Ok(Self {
            memory: Arc::new(memory),
            doorbell: Arc::new(doorbell),
            kind: BackendKind::Hsa,
            reason,
            fallback: None,
            runtime: Some(runtime),
        })
    }

    /// A new doorbell of this backend's kind (one per buffer).
    pub fn new_doorbell(&self) -> Result<Arc<dyn Doorbell>, HsaError> {
        Ok(match &self.runtime {
            Some(runtime) => Arc::new(HsaDoorbell::new(runtime.clone())?),
            None => Arc::new(ParkingDoorbell::new()),
        })
    }
}

/// [`detect_with`] with default options (library from `HOSTCALL_HSA_LIB` or the default name;
/// platform atomics required).
pub fn detect() -> Backend {
    detect_with(&DetectOptions::default())
}

/// HSA if it loads, initialises, has a GPU agent and fine-grained memory; else host memory.
pub fn detect_with(options: &DetectOptions) -> Backend {
    let backend = match try_hsa(options) {
        Ok(backend) => backend,
        Err(error) => Backend::host(format!("HSA unavailable, using host memory: {error}"), Some(error)),
    };
    log::info!("hostcall backend: {}: {}", backend.kind, backend.reason);
    backend
}

fn try_hsa(options: &DetectOptions) -> Result<Backend, HsaError> {
    let runtime = match &options.library {
        Some(path) => HsaRuntime::from_path(path)?,
        None => HsaRuntime::new()?,
    };
    Backend::hsa(Arc::new(runtime), options.atomics)
}
