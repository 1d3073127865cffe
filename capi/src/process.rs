//! Whether a device may end the host process (`hostcall::services::ending`): one switch for the
//! whole process, off by default.

use std::ffi::c_int;

/// Lets devices end the host process (`allowed` non-zero) or not (zero, the default): LLVM libc's
/// `exit()` and `abort()` over RPC, and SANITIZER reports marked as aborting, on every protocol
/// and every buffer. While it is off, `exit` and `abort` are refused (counted, logged) and an
/// aborting sanitizer report is printed and counted and the process goes on. Returns
/// `HOSTCALL_OK`.
#[no_mangle]
pub extern "C" fn hostcall_allow_device_to_end_process(allowed: c_int) -> c_int {
    hostcall_rs::services::ending::allow_device_to_end_process(allowed != 0);
    crate::status::HOSTCALL_OK
}
