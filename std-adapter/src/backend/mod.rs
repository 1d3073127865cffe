//! The backends, one folder each (`host`, whose types are at the crate root, [`hsa`], and `cuda`
//! with the feature of that name),
//! each with its [`DeviceMemory`] and its [`Doorbell`] side by side, and choosing one at run time.
//!
//! [`choose`] picks a backend by name ([`MemoryChoice`]: auto, host, HSA or CUDA), or refuses
//! with the reason; the C ABI's memory choice goes through it.
//!
//! [`detect`] uses HSA when the runtime library loads, `hsa_init` succeeds, a GPU agent is found
//! and memory for it is set up where ROCm puts it ([`HsaMemory`] near the GPU for buffers,
//! [`HsaDeviceMemory`] in the GPU for the phase bitmap and DEVMEM, an [`HsaDoorbell`]);
//! otherwise it falls back to host memory ([`HostMemory`], [`ParkingDoorbell`]), which emulated
//! waves and embedded runtimes use. Either way [`Backend::reason`] says why, in words, and the
//! choice is logged at `info` level through the `log` facade. Detection never panics and never
//! aborts.
//!
//! A [`Backend`] holds one doorbell, for one listener (or pool) and every buffer it serves, as
//! ROCm has one signal per listener; [`Backend::new_doorbell`] makes another for another
//! listener. [`Backend::buffer`] allocates a buffer as ROCm does on that backend.
//!
//! With the default options (the stack protocol), a GPU whose link to host memory reports no
//! atomics is not used: the fallback reason is [`HsaError::NoPlatformAtomics`], which points to
//! the phase protocol; detect with [`AtomicsRequirement::NotRequired`] to use HSA memory for the
//! phase protocol there.
//!
//! ```
//! let options = hostcall::backend::DetectOptions::default()
//!     .with_library(Some("/nonexistent/libhsa-runtime64.so.1".into()));
//! let backend = hostcall::backend::detect_with(&options);
//! assert_eq!(backend.kind, hostcall::backend::BackendKind::Host);
//! println!("{}", backend.reason);
//! ```

mod choice;
#[cfg(feature = "cuda")]
pub mod cuda;
mod deferred;
pub(crate) mod host;
pub mod hsa;

use std::ffi::OsString;
use std::fmt;
use std::sync::Arc;

use self::host::{HostMemory, ParkingDoorbell};
use self::hsa::{
    AtomicsRequirement, HsaDeviceMemory, HsaDoorbell, HsaError, HsaMemory, HsaRuntime, Placement,
    PlatformAtomics,
};
use crate::buffer::{HostcallBuffer, Protocol};
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory};

pub use self::choice::{choose, MemoryChoice, MEMORY_ENV};
pub use self::deferred::{DeferredFree, DEFAULT_MAX_PENDING};

/// Which backend [`detect`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// HSA fine-grained memory and HSA signals: a GPU can reach the buffers.
    Hsa,
    /// Ordinary host memory and a parking doorbell: only host threads (emulated waves) can.
    Host,
    /// CUDA (feature `cuda`, `Backend::cuda`): buffers and the doorbell in pinned, mapped host
    /// memory, DEVMEM and the phase bitmaps in stream-ordered device memory.
    Cuda,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Hsa => "hsa",
            Self::Host => "host",
            Self::Cuda => "cuda",
        })
    }
}

/// How [`detect_with`] looks for HSA.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DetectOptions {
    /// The runtime library to load; `None`: `HOSTCALL_HSA_LIB`, else `libhsa-runtime64.so.1`.
    pub library: Option<OsString>,
    /// Whether CPU/GPU atomics must be mutually atomic ([`AtomicsRequirement::Required`] for the
    /// stack protocol, the default; `NotRequired` for the phase protocol).
    pub atomics: AtomicsRequirement,
    /// Which GPU agent, counting from 0 in the runtime's order: its memory is placed near it.
    pub gpu: usize,
}

setters!(DetectOptions {
    with_library: library: Option<OsString>,
    with_atomics: atomics: AtomicsRequirement,
    with_gpu: gpu: usize,
});

/// The chosen memory and doorbell, and why.
#[derive(Debug, Clone)]
pub struct Backend {
    /// Where buffers are allocated (memory host and device reach: HSA fine-grained memory).
    pub memory: Arc<dyn DeviceMemory>,
    /// Where device-local memory is allocated: the phase protocol's `occupied` bitmap, DEVMEM
    /// blocks (give it to [`Services::enable_devmem`](crate::Services::enable_devmem)). The GPU's
    /// own memory on HSA, host memory otherwise.
    pub device_memory: Arc<dyn DeviceMemory>,
    /// The doorbell of one listener (or pool) and of every buffer it serves (another listener:
    /// [`Backend::new_doorbell`]).
    pub doorbell: Arc<dyn Doorbell>,
    /// Which backend this is.
    pub kind: BackendKind,
    /// Why, in words (for logs and users).
    pub reason: String,
    /// Why HSA was not used, where it was not (typed).
    pub fallback: Option<HsaError>,
    /// The HSA runtime, for [`BackendKind::Hsa`].
    pub runtime: Option<Arc<HsaRuntime>>,
    /// Where the memory is, for [`BackendKind::Hsa`].
    pub placement: Option<Placement>,
}

impl Backend {
    /// The host backend, with `reason` recorded.
    pub fn host(reason: impl Into<String>, fallback: Option<HsaError>) -> Self {
        Self {
            memory: Arc::new(HostMemory),
            device_memory: Arc::new(HostMemory),
            doorbell: Arc::new(ParkingDoorbell::new()),
            kind: BackendKind::Host,
            reason: reason.into(),
            fallback,
            runtime: None,
            placement: None,
        }
    }

    /// Sets up the HSA backend on an initialised runtime, for its first GPU agent.
    pub fn hsa(runtime: Arc<HsaRuntime>, atomics: AtomicsRequirement) -> Result<Self, HsaError> {
        Self::hsa_for_gpu(runtime, 0, atomics)
    }

    /// Sets up the HSA backend for GPU agent `gpu` (counting from 0): buffers in the
    /// fine-grained pool of the CPU agent nearest it, accessible to every GPU; device-local
    /// memory from its own pool; one signal as the doorbell.
    pub fn hsa_for_gpu(
        runtime: Arc<HsaRuntime>,
        gpu: usize,
        atomics: AtomicsRequirement,
    ) -> Result<Self, HsaError> {
        let gpus = runtime.gpu_agents()?;
        let agent = gpus.get(gpu).ok_or(HsaError::NoGpuAgent)?;
        let placement = runtime.placement(agent)?;
        let memory = HsaMemory::with_placement(runtime.clone(), placement.clone(), atomics)?;
        let device_memory = HsaDeviceMemory::new(runtime.clone(), &placement);
        let doorbell = HsaDoorbell::new(runtime.clone())?;
        let names: Vec<&str> = gpus.iter().map(|gpu| gpu.name.as_str()).collect();
        let reason = format!(
            "HSA runtime {:?}: {} GPU agent(s) ({}); for GPU {gpu} ({}): buffers in the fine-grained pool of \
             CPU agent {} (NUMA distance {}), device memory in its own pool, platform atomics: {:?}",
            runtime.library().path(),
            gpus.len(),
            names.join(", "),
            placement.gpu.name,
            placement.cpu.name,
            placement.distance,
            placement.atomics,
        );
        Ok(Self {
            memory: Arc::new(memory),
            device_memory: Arc::new(device_memory),
            doorbell: Arc::new(doorbell),
            kind: BackendKind::Hsa,
            reason,
            fallback: None,
            runtime: Some(runtime),
            placement: Some(placement),
        })
    }

    /// The CUDA backend for device `ordinal` (feature `cuda`): buffers in pinned, mapped host
    /// memory ([`cuda::CudaMemory`], what the GPU reaches over PCIe, as the CUDA headers and
    /// [`cuda::rpc_buffer`] use), its doorbell there ([`cuda::MappedDoorbell`]), and device
    /// memory for DEVMEM (so LLVM libc's `MALLOC` / `FREE` too) and the phase bitmaps from
    /// [`cuda::CudaDeviceMemory::for_services`]: stream-ordered device memory whose calls never
    /// wait for a kernel, its frees on a side thread. An error (never a panic) where there is
    /// no CUDA driver or device, or the device has no stream-ordered allocator.
    #[cfg(feature = "cuda")]
    pub fn cuda(ordinal: usize) -> Result<Self, Error> {
        let device = cuda::Cuda::new(ordinal)?;
        let memory = Arc::new(cuda::CudaMemory::new(device.clone()));
        let doorbell = cuda::MappedDoorbell::new(memory.clone())?;
        let device_memory = cuda::CudaDeviceMemory::for_services(device.clone())?;
        let reason = format!(
            "CUDA device {ordinal} ({}): buffers and the doorbell in pinned, mapped host memory, \
             DEVMEM and phase bitmaps in stream-ordered device memory (frees on a side thread)",
            device.name()
        );
        Ok(Self {
            memory,
            device_memory,
            doorbell: Arc::new(doorbell),
            kind: BackendKind::Cuda,
            reason,
            fallback: None,
            runtime: None,
            placement: None,
        })
    }

    /// A new doorbell of this backend's kind, for another listener (one per listener, shared by
    /// all its buffers: a signal per buffer would leave the listener sleeping on the wrong one).
    ///
    /// On the CUDA backend, a `cuda::MappedDoorbell` in its mapped memory; a failure to
    /// allocate it is reported as an [`HsaError::Status`] naming the CUDA call.
    pub fn new_doorbell(&self) -> Result<Arc<dyn Doorbell>, HsaError> {
        #[cfg(feature = "cuda")]
        if self.kind == BackendKind::Cuda {
            return match cuda::MappedDoorbell::new(self.memory.clone()) {
                Ok(doorbell) => Ok(Arc::new(doorbell)),
                Err(e) => Err(HsaError::Status {
                    call: "cuMemHostAlloc (a CUDA doorbell)",
                    status: hsa_sys::HsaStatus::ERROR_OUT_OF_RESOURCES,
                    text: e.to_string(),
                }),
            };
        }
        Ok(match &self.runtime {
            Some(runtime) => Arc::new(HsaDoorbell::new(runtime.clone())?),
            None => Arc::new(ParkingDoorbell::new()),
        })
    }

    /// A buffer of `num_packets` packets as ROCm allocates it on this backend, ringing
    /// `doorbell` (the doorbell of the listener that will serve it): in [`Backend::memory`]; for
    /// the phase protocol on HSA, its `occupied` bitmap in [`Backend::device_memory`] (zeroed,
    /// owned by the buffer). A stack buffer where the platform has no atomics is refused
    /// ([`Error::Unsupported`]).
    ///
    /// ```
    /// use hostcall::backend::Backend;
    /// use hostcall::Protocol;
    /// let backend = Backend::host("an example", None);
    /// let buffer = backend.buffer(64, Protocol::Phase, backend.doorbell.clone()).unwrap();
    /// assert_eq!(buffer.doorbell().handle(), backend.doorbell.handle());
    /// ```
    pub fn buffer(
        &self,
        num_packets: u64,
        protocol: Protocol,
        doorbell: Arc<dyn Doorbell>,
    ) -> Result<HostcallBuffer, Error> {
        if let (Protocol::Stack, Some(Placement { atomics: PlatformAtomics::Missing { .. }, .. })) =
            (protocol, &self.placement)
        {
            return Err(Error::Unsupported(format!(
                "a stack-protocol buffer needs platform atomics, which this GPU lacks ({}); use the phase protocol",
                self.reason
            )));
        }
        let buffer = HostcallBuffer::with_protocol(self.memory.clone(), num_packets, doorbell, protocol)?;
        if protocol != Protocol::Phase || self.kind != BackendKind::Hsa {
            // Host memory: emulated waves claim through the bitmap inside the buffer.
            return Ok(buffer);
        }
        let bytes = buffer.num_packets().div_ceil(32) as usize * 4;
        let bitmap = DeviceAllocation::new(self.device_memory.clone(), bytes, 64)?;
        buffer.with_device_occupied(bitmap)
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
        Err(error) => Backend::host(format!("{}; using host memory", brief_hsa_reason(&error)), Some(error)),
    };
    log::info!("hostcall backend: {}: {}", backend.kind, backend.reason);
    backend
}

fn try_hsa(options: &DetectOptions) -> Result<Backend, HsaError> {
    let runtime = match &options.library {
        Some(path) => HsaRuntime::from_path(path)?,
        None => HsaRuntime::new()?,
    };
    Backend::hsa_for_gpu(Arc::new(runtime), options.gpu, options.atomics)
}

/// Why HSA is not used, in one line that says what happened (the whole error, with the
/// runtime's own text, stays in [`Backend::fallback`]): no GPU agent, or `hsa_init` failing as
/// ROCr's does where no GPU is found, is "no AMD GPU found"; a failed HSA call is named with its
/// status, without the runtime's description (several sentences for some statuses); other errors
/// as they print, on one line.
pub(crate) fn brief_hsa_reason(error: &HsaError) -> String {
    let status_name = |status: hsa_sys::HsaStatus| {
        format!("{} ({:#x})", status.c_name().unwrap_or("an unknown HSA status"), status.0)
    };
    match error {
        HsaError::NoGpuAgent => "no AMD GPU found (the HSA runtime lists CPU agents only)".to_owned(),
        HsaError::Status { call, status, .. } if error.is_no_gpu() => {
            format!(
                "no AMD GPU found ({call} failed with {}, as ROCr's does without one)",
                status_name(*status)
            )
        }
        HsaError::Status { call, status, .. } => {
            format!("HSA unavailable: {call} failed with {}", status_name(*status))
        }
        other => {
            format!("HSA unavailable: {}", other.to_string().split_whitespace().collect::<Vec<_>>().join(" "))
        }
    }
}
