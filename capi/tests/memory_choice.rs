//! The C ABI's memory choice on a machine without a GPU: CUDA or HSA asked for by name is
//! refused with `HOSTCALL_ERR_MEMORY` and a reason, nothing set up; `auto` serves with host memory
//! and says why (HSA and CUDA both named); once chosen, another memory is refused and the same
//! one accepted. One test: the choice is the process's.

use hostcall_capi::memory::*;
use hostcall_capi::status::{HOSTCALL_ERR_MEMORY, HOSTCALL_OK};
use hostcall_capi::{hostcall_last_error, hostcall_memory_reason, hostcall_set_memory};
use std::ffi::CStr;

fn last_error() -> String {
    // SAFETY: a NUL-terminated string, valid until the next call on this thread.
    unsafe { CStr::from_ptr(hostcall_last_error()) }.to_string_lossy().into_owned()
}

#[test]
fn named_memory_that_does_not_fit_is_refused_and_auto_says_why_host_memory() {
    if std::env::var_os("HOSTCALL_MEMORY").is_some() || std::env::var_os("HOSTCALL_HSA_LIB").is_some() {
        eprintln!("skipped: HOSTCALL_MEMORY or HOSTCALL_HSA_LIB is set for this run");
        return;
    }
    // The HSA runtime, where one is installed, must find no GPU here; a CUDA device neither.
    assert_eq!(hostcall_set_memory(7), HOSTCALL_ERR_MEMORY);
    assert_eq!(last_error(), "unknown memory kind 7");

    assert_eq!(hostcall_set_memory(HOSTCALL_MEMORY_CUDA), HOSTCALL_ERR_MEMORY);
    let why = last_error();
    assert!(why.contains("CUDA memory was asked for, but"), "{why}");
    if cfg!(feature = "cuda") {
        assert!(why.contains("CUDA"), "{why}");
    } else {
        assert!(why.contains("no `cuda` feature"), "{why}");
    }

    assert_eq!(hostcall_set_memory(HOSTCALL_MEMORY_HSA), HOSTCALL_ERR_MEMORY);
    assert!(last_error().contains("HSA memory was asked for, but HSA is unusable here"), "{}", last_error());

    // Nothing was set up by the refusals: auto still chooses, and says why host memory.
    let reason = hostcall_memory_reason();
    assert!(!reason.is_null(), "{}", last_error());
    // SAFETY: non-null, NUL-terminated, valid for the life of the process.
    let reason = unsafe { CStr::from_ptr(reason) }.to_string_lossy().into_owned();
    assert!(reason.starts_with("host: no device memory fits, using host memory"), "{reason}");
    assert!(reason.contains("HSA: ") && reason.contains("CUDA: "), "{reason}");

    assert_eq!(hostcall_set_memory(HOSTCALL_MEMORY_CUDA), HOSTCALL_ERR_MEMORY);
    assert!(last_error().contains("already uses host memory"), "{}", last_error());
    assert_eq!(hostcall_set_memory(HOSTCALL_MEMORY_HOST), HOSTCALL_OK);
    assert_eq!(hostcall_set_memory(HOSTCALL_MEMORY_AUTO), HOSTCALL_OK);
}
