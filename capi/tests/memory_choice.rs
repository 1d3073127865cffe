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

/// `HOSTCALL_MEMORY` names the memory when the program does not: run in a child process (the
/// choice is the process's) with `HOSTCALL_MEMORY=cuda` and with a bad value; each is refused at
/// the first call that needs the runtime (an enable), with the reason.
#[test]
fn hostcall_memory_names_the_memory_and_a_bad_one_is_refused_at_enable() {
    for (value, expected) in [("cuda", "CUDA memory was asked for, but"), ("gpu", "HOSTCALL_MEMORY=\"gpu\"")]
    {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "memory_env_child", "--nocapture"])
            .env("HOSTCALL_MEMORY", value)
            .output()
            .unwrap();
        let out =
            String::from_utf8_lossy(&child.stdout).into_owned() + &String::from_utf8_lossy(&child.stderr);
        assert!(child.status.success(), "HOSTCALL_MEMORY={value}: {out}");
        let refused = out.lines().find(|l| l.starts_with("refused: ")).unwrap_or_default();
        assert!(refused.contains(expected), "HOSTCALL_MEMORY={value}: {out}");
    }
}

/// The child of the test above: an enable under the environment's choice, which must be refused.
#[test]
#[ignore = "run by hostcall_memory_names_the_memory_and_a_bad_one_is_refused_at_enable, in a child process"]
fn memory_env_child() {
    let mut memory = vec![0u64; hostcall_capi::hostcall_buffer_size(4) / 8];
    static QUEUE: u8 = 0;
    // SAFETY: `memory` is the buffer's size, 8-aligned, and outlives the call (which is refused).
    let code = unsafe {
        hostcall_capi::hostcall_enable(memory.as_mut_ptr().cast(), 4, std::ptr::addr_of!(QUEUE).cast())
    };
    assert_eq!(code, HOSTCALL_ERR_MEMORY, "{}", last_error());
    assert!(hostcall_memory_reason().is_null());
    println!("refused: {}", last_error());
}
