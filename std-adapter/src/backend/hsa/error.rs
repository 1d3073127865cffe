//! [`HsaError`]: why an HSA call failed, with the runtime's own text for its status.

use std::ffi::{c_char, CStr};
use std::fmt;

use hsa_sys::{AmdLinkInfoType, HsaLib, HsaStatus, LoadError};

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
    /// No CPU agent has a global, fine-grained pool the runtime may allocate from and the GPU
    /// may reach.
    NoFineGrainedPool,
    /// The GPU has no global, coarse-grained pool the runtime may allocate from.
    NoDevicePool {
        /// The GPU agent's name.
        gpu: String,
    },
    /// A GPU agent can never access the CPU's fine-grained pool.
    NoAccess {
        /// The GPU agent's name.
        gpu: String,
    },
    /// A GPU reaches host memory over a link without atomics (hop 0 reports neither 32- nor
    /// 64-bit atomics), and the caller needs them.
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
    /// Whether this says the machine has no AMD GPU: no GPU agent, or `hsa_init` failing with
    /// `HSA_STATUS_ERROR_OUT_OF_RESOURCES`, as ROCr does where its driver finds no GPU (it then
    /// cannot start its threads, and its text says that instead).
    pub fn is_no_gpu(&self) -> bool {
        match self {
            Self::NoGpuAgent => true,
            Self::Status { call, status, .. } => {
                *call == "hsa_init" && *status == HsaStatus::ERROR_OUT_OF_RESOURCES
            }
            _ => false,
        }
    }

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
            Self::NoGpuAgent => f.write_str("no AMD GPU found: HSA agents are CPU only"),
            Self::NoFineGrainedPool => f.write_str(
                "no CPU agent has a global fine-grained memory pool that allows allocation and that the GPU may reach",
            ),
            Self::NoDevicePool { gpu } => {
                write!(f, "GPU agent {gpu:?} has no global coarse-grained memory pool that allows allocation")
            }
            Self::NoAccess { gpu } => {
                write!(f, "GPU agent {gpu:?} can never access the CPU's fine-grained memory pool")
            }
            Self::NoPlatformAtomics { gpu, hop, link } => write!(
                f,
                "GPU agent {gpu:?} reaches host memory over a {link:?} link (hop {hop}) without \
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
pub(super) fn status_text(lib: &HsaLib, status: HsaStatus) -> String {
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

pub(super) fn check(lib: &HsaLib, call: &'static str, status: HsaStatus) -> Result<(), HsaError> {
    if status.is_success() {
        Ok(())
    } else {
        Err(HsaError::Status { call, status, text: status_text(lib, status) })
    }
}
