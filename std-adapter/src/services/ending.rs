//! Whether a device may end the host process: one decision, off by default, for every way a
//! device can ask for it.
//!
//! A device can ask the host to end: LLVM libc's `exit()` and `abort()` over RPC (`EXIT`,
//! `ABORT`, [`OpcodeGroup::Exit`](super::rpc::OpcodeGroup::Exit)), and an AddressSanitizer
//! report marked as aborting, which reaches the SANITIZER service on every protocol (a stack,
//! phase or line packet of service 4, or RPC's `'r'` / `'h'` opcodes of it). All of them consult
//! [`device_may_end_process`], and nothing else: until the embedder calls
//! [`allow_device_to_end_process`]`(true)`, none of them ends the process. What happens instead:
//!
//! - `exit(status)` and `abort()` are answered as refused, counted (`RpcCounters::refused_lanes`)
//!   and logged, rate-limited; the device's side ends its own program as it does after the call;
//! - an aborting sanitizer report is printed (through the process's ASan runtime, which is then
//!   called with `is_abort = false`, or this project's own report) and counted in the SANITIZER
//!   service's statistics, with a line saying the abort was refused, and the host goes on.
//!
//! Where this differs from ROCm on purpose: ROCm's runtime ends the process on an aborting report
//! (it calls ASan with the device's `is_abort`, and ASan dies), and LLVM's server ends it on
//! `exit` and `abort`. Here a device's bytes do not end the host unless the embedder says so: one
//! kernel, or one stray store into a shared buffer, must not take down a process that serves many.
//! An embedder that wants ROCm's and LLVM's behaviour (a test runner that should stop at the first
//! device error) turns it on once, for the whole process: ending the process is an authority over
//! the whole process, so it is one switch, not one per buffer or per service. (C:
//! `hostcall_allow_device_to_end_process`.)
//!
//! ```
//! use hostcall::services::ending::{allow_device_to_end_process, device_may_end_process};
//! assert!(!device_may_end_process()); // the default
//! allow_device_to_end_process(true);
//! assert!(device_may_end_process());
//! allow_device_to_end_process(false);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

static DEVICE_MAY_END_PROCESS: AtomicBool = AtomicBool::new(false);

/// Lets devices end the host process (`true`), or not (`false`, the default), from now on. See
/// the [module docs](self).
pub fn allow_device_to_end_process(allowed: bool) {
    // Relaxed: the flag is the only datum; nothing else is published with it, and a call being
    // served meanwhile may see either value.
    DEVICE_MAY_END_PROCESS.store(allowed, Ordering::Relaxed);
}

/// Whether devices may end the host process now ([`allow_device_to_end_process`]).
pub fn device_may_end_process() -> bool {
    // Relaxed: pairs with nothing; see `allow_device_to_end_process`.
    DEVICE_MAY_END_PROCESS.load(Ordering::Relaxed)
}
