//! Which memory the library serves with: [`hostcall_set_memory`] before the first enable, else
//! the `HOSTCALL_MEMORY` environment variable (`auto`, `host`, `hsa`, `cuda`; unset: `auto`), and
//! [`hostcall_memory_reason`] to learn which and why.
//!
//! The memory is what the library allocates for devices: DEVMEM blocks (ROCm's device `malloc`,
//! LLVM libc's `MALLOC` / `FREE`), the phase protocol's `occupied` bitmaps when none is passed in,
//! and the doorbell whose handle goes into every buffer. `auto` picks the platform's
//! device-reachable memory: HSA where it finds an AMD GPU; CUDA where it finds a CUDA device, in a
//! library built with the `cuda` feature (stream-ordered device memory whose calls never wait for
//! a running kernel, a doorbell in pinned, mapped host memory); else host memory, which only
//! emulated waves reach, with the reason saying why (and a warning where a CUDA driver is present
//! in a build without the feature). A choice by name that does not fit is refused with
//! [`HOSTCALL_ERR_MEMORY`] and a message saying why, and nothing is set up: the program can
//! choose again.

use crate::status::{guard, status, Failure, HOSTCALL_ERR_MEMORY};
use hostcall_rs::backend::MemoryChoice;
use hostcall_rs::HostcallRuntime;
use std::ffi::{c_char, c_int, CString};
use std::sync::OnceLock;

/// The platform's device-reachable memory (HSA, else CUDA, else host memory).
pub const HOSTCALL_MEMORY_AUTO: u32 = 0;
/// Host memory (emulated waves; devices that reach host memory).
pub const HOSTCALL_MEMORY_HOST: u32 = 1;
/// HSA memory (an AMD GPU through ROCm), or `HOSTCALL_ERR_MEMORY`.
pub const HOSTCALL_MEMORY_HSA: u32 = 2;
/// CUDA memory (device 0; a library built with the `cuda` feature), or `HOSTCALL_ERR_MEMORY`.
pub const HOSTCALL_MEMORY_CUDA: u32 = 3;

fn choice(kind: u32) -> Result<MemoryChoice, Failure> {
    Ok(match kind {
        HOSTCALL_MEMORY_AUTO => MemoryChoice::Auto,
        HOSTCALL_MEMORY_HOST => MemoryChoice::Host,
        HOSTCALL_MEMORY_HSA => MemoryChoice::Hsa,
        HOSTCALL_MEMORY_CUDA => MemoryChoice::Cuda,
        other => return Err(Failure::new(HOSTCALL_ERR_MEMORY, format!("unknown memory kind {other}"))),
    })
}

/// The process-wide runtime on the memory chosen (by [`hostcall_set_memory`], else by
/// `HOSTCALL_MEMORY`, else `auto`), created on first use; a choice that does not fit is a
/// [`HOSTCALL_ERR_MEMORY`] failure. Every entry point that enables a buffer goes through it.
pub(crate) fn runtime() -> Result<&'static HostcallRuntime, Failure> {
    let memory_error = |e: hostcall_rs::Error| Failure::new(HOSTCALL_ERR_MEMORY, e.to_string());
    let chosen = MemoryChoice::from_env().map_err(memory_error)?;
    // The runtime is there already (then `Auto` accepts it), or it is made on `chosen`.
    let choice = if HostcallRuntime::global_if_created().is_some() { MemoryChoice::Auto } else { chosen };
    HostcallRuntime::init_global(choice).map_err(memory_error)
}

/// Chooses the memory the library serves with (`HOSTCALL_MEMORY_*`), before the first enable.
/// Returns `HOSTCALL_OK`, or `HOSTCALL_ERR_MEMORY` with the reason in `hostcall_last_error()`
/// (nothing set up then): an unknown kind, memory this build or machine lacks, or a runtime
/// already serving with another memory. Choosing the memory already in use succeeds.
#[no_mangle]
pub extern "C" fn hostcall_set_memory(kind: u32) -> c_int {
    status(|| {
        let choice = choice(kind)?;
        HostcallRuntime::init_global(choice)
            .map(|_| ())
            .map_err(|e| Failure::new(HOSTCALL_ERR_MEMORY, e.to_string()))
    })
}

/// Which memory the library serves with and why, in words (e.g. `cuda: CUDA device 0 (...)`),
/// choosing it first as the first enable would if nothing chose it yet. NULL on failure (see
/// `hostcall_last_error()`: a `HOSTCALL_MEMORY` that does not fit). The string stays valid for
/// the life of the process.
#[no_mangle]
pub extern "C" fn hostcall_memory_reason() -> *const c_char {
    static REASON: OnceLock<CString> = OnceLock::new();
    guard(
        |_| std::ptr::null(),
        || {
            let runtime = runtime()?;
            let reason = REASON.get_or_init(|| {
                let (kind, why) = runtime.backend().expect("the global runtime is made on a backend");
                CString::new(format!("{kind}: {why}").replace('\0', " ")).unwrap_or_default()
            });
            Ok(reason.as_ptr())
        },
    )
}
