//! [`MemoryChoice`] and [`choose`]: which backend's memory a runtime serves with.

use super::{try_hsa, Backend, DetectOptions};
use crate::error::Error;
use std::fmt;
use std::str::FromStr;

/// The environment variable that picks the memory of the process-wide runtime when the program
/// has not chosen: `auto`, `host`, `hsa` or `cuda`.
pub const MEMORY_ENV: &str = "HOSTCALL_MEMORY";

/// Which memory a runtime serves with, asked for by name (the C ABI's `hostcall_set_memory`,
/// the `HOSTCALL_MEMORY` environment variable) or found ([`MemoryChoice::Auto`]).
///
/// | choice | memory | where it does not fit |
/// | --- | --- | --- |
/// | `Auto` | HSA where it finds a GPU; else CUDA where a CUDA device is found (feature `cuda`); else host memory | never refused: the reason says why host memory, and a CUDA driver present in a build without the `cuda` feature is warned about |
/// | `Host` | host memory (emulated waves, runtimes with host-only devices) | never refused |
/// | `Hsa` | [`Backend::hsa_for_gpu`] on GPU 0 | refused: the HSA error |
/// | `Cuda` | `Backend::cuda` on device 0 | refused: no `cuda` feature in this build, no driver or device, no stream-ordered allocator |
///
/// ```
/// use hostcall::backend::{choose, BackendKind, MemoryChoice};
/// assert_eq!("cuda".parse::<MemoryChoice>(), Ok(MemoryChoice::Cuda));
/// assert_eq!(choose(MemoryChoice::Host).unwrap().kind, BackendKind::Host);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryChoice {
    /// The platform's device-reachable memory: HSA, else CUDA, else host memory.
    #[default]
    Auto,
    /// Host memory.
    Host,
    /// HSA memory, or an error.
    Hsa,
    /// CUDA memory, or an error.
    Cuda,
}

impl MemoryChoice {
    /// The choice [`MEMORY_ENV`] names; `Auto` when it is unset; an error naming the value
    /// otherwise.
    pub fn from_env() -> Result<Self, Error> {
        match std::env::var(MEMORY_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(Self::Auto),
            Err(std::env::VarError::NotUnicode(value)) => {
                Err(Error::Unsupported(format!("{MEMORY_ENV}={value:?}: expected auto, host, hsa or cuda")))
            }
            Ok(value) => value.parse().map_err(|()| {
                Error::Unsupported(format!("{MEMORY_ENV}={value:?}: expected auto, host, hsa or cuda"))
            }),
        }
    }
}

impl FromStr for MemoryChoice {
    type Err = ();

    fn from_str(name: &str) -> Result<Self, ()> {
        match name.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "host" => Ok(Self::Host),
            "hsa" => Ok(Self::Hsa),
            "cuda" => Ok(Self::Cuda),
            _ => Err(()),
        }
    }
}

impl fmt::Display for MemoryChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Host => "host",
            Self::Hsa => "hsa",
            Self::Cuda => "cuda",
        })
    }
}

/// The backend `choice` picks, or why it does not fit (logged at `info` like [`super::detect`]).
pub fn choose(choice: MemoryChoice) -> Result<Backend, Error> {
    let backend = match choice {
        MemoryChoice::Host => Backend::host("host memory, as asked for", None),
        MemoryChoice::Hsa => try_hsa(&DetectOptions::default()).map_err(|e| {
            Error::Unsupported(format!("HSA memory was asked for, but HSA is unusable here: {e}"))
        })?,
        MemoryChoice::Cuda => cuda_backend()
            .map_err(|why| Error::Unsupported(format!("CUDA memory was asked for, but {why}")))?,
        MemoryChoice::Auto => auto(),
    };
    log::info!("hostcall backend ({choice}): {}: {}", backend.kind, backend.reason);
    Ok(backend)
}

/// HSA, else CUDA, else host memory with the reasons.
fn auto() -> Backend {
    let hsa = match try_hsa(&DetectOptions::default()) {
        Ok(backend) => return backend,
        Err(e) => e,
    };
    let cuda = match cuda_backend() {
        Ok(backend) => return backend,
        Err(why) => why,
    };
    if !cfg!(feature = "cuda") && cuda_driver_present() {
        log::warn!(
            "hostcall: a CUDA driver is present, but this build has no `cuda` feature: \
             serving with host memory, which CUDA devices cannot reach"
        );
    }
    Backend::host(
        format!(
            "no device memory fits, using host memory (for emulated waves): HSA: {}; CUDA: {cuda}",
            super::brief_hsa_reason(&hsa)
        ),
        Some(hsa),
    )
}

#[cfg(feature = "cuda")]
fn cuda_backend() -> Result<Backend, String> {
    super::cuda::probe()?;
    Backend::cuda(0).map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> Result<Backend, String> {
    let driver = if cuda_driver_present() { "a CUDA driver is present, but " } else { "" };
    Err(format!("{driver}this build of hostcall has no `cuda` feature (build it, or the C library, with --features cuda)"))
}

/// Whether `libcuda.so.1` can be loaded (it is closed again at once).
fn cuda_driver_present() -> bool {
    #[cfg(unix)]
    {
        // SAFETY: a NUL-terminated name; the handle, if any, is closed at once and never used.
        unsafe {
            let handle = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if handle.is_null() {
                return false;
            }
            libc::dlclose(handle);
            true
        }
    }
    #[cfg(not(unix))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::BackendKind;

    #[test]
    fn names_parse_and_print() {
        for choice in [MemoryChoice::Auto, MemoryChoice::Host, MemoryChoice::Hsa, MemoryChoice::Cuda] {
            assert_eq!(choice.to_string().parse::<MemoryChoice>(), Ok(choice));
        }
        assert_eq!(" CUDA ".parse::<MemoryChoice>(), Ok(MemoryChoice::Cuda));
        assert_eq!("".parse::<MemoryChoice>(), Ok(MemoryChoice::Auto));
        assert_eq!("gpu".parse::<MemoryChoice>(), Err(()));
    }

    /// Here (no GPU): CUDA asked for is refused with the reason, auto picks host memory and says
    /// why, naming both HSA and CUDA.
    #[test]
    #[cfg_attr(feature = "cuda", ignore = "a CUDA device may be present")]
    fn without_a_gpu_cuda_is_refused_and_auto_says_why_host_memory() {
        let Err(Error::Unsupported(why)) = choose(MemoryChoice::Cuda) else {
            panic!("CUDA must be refused here")
        };
        assert!(why.starts_with("CUDA memory was asked for, but"), "{why}");
        assert!(why.contains("no `cuda` feature"), "{why}");
        if std::env::var_os("HOSTCALL_HSA_LIB").is_none() {
            let backend = choose(MemoryChoice::Auto).unwrap();
            if backend.kind == BackendKind::Host {
                assert!(backend.reason.contains("using host memory"), "{}", backend.reason);
                assert!(
                    backend.reason.contains("HSA: ") && backend.reason.contains("CUDA: "),
                    "{}",
                    backend.reason
                );
            }
        }
    }
}
