//! Status codes, the thread-local last error, and the guard every entry point runs in.

use hostcall_core::LayoutError;
use hostcall_rs::Error;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Success.
pub const HOSTCALL_OK: c_int = 0;
/// A null pointer where one is required.
pub const HOSTCALL_ERR_NULL: c_int = 1;
/// The buffer is not aligned to `hostcall_buffer_alignment()`.
pub const HOSTCALL_ERR_MISALIGNED: c_int = 2;
/// The packet count is refused (fewer than 2, or more than 2^24).
pub const HOSTCALL_ERR_PACKET_COUNT: c_int = 3;
/// The buffer is already enabled (for this or another queue).
pub const HOSTCALL_ERR_ALREADY_ENABLED: c_int = 4;
/// The buffer is enabled (or otherwise served) on another listener.
pub const HOSTCALL_ERR_OTHER_LISTENER: c_int = 5;
/// The buffer overlaps an enabled buffer.
pub const HOSTCALL_ERR_OVERLAPS: c_int = 6;
/// The queue already has a buffer.
pub const HOSTCALL_ERR_QUEUE_TAKEN: c_int = 7;
/// The buffer is not enabled.
pub const HOSTCALL_ERR_NOT_ENABLED: c_int = 8;
/// The buffer is enabled for another queue.
pub const HOSTCALL_ERR_WRONG_QUEUE: c_int = 9;
/// The buffer is enabled with another packet count.
pub const HOSTCALL_ERR_PACKET_COUNT_MISMATCH: c_int = 10;
/// Called from a listener thread (from a service).
pub const HOSTCALL_ERR_FROM_LISTENER: c_int = 11;
/// The service id is already registered.
pub const HOSTCALL_ERR_SERVICE_TAKEN: c_int = 12;
/// An emulated call timed out.
pub const HOSTCALL_ERR_TIMED_OUT: c_int = 13;
/// The listener thread could not be started.
pub const HOSTCALL_ERR_THREAD: c_int = 14;
/// An internal panic was caught.
pub const HOSTCALL_ERR_PANIC: c_int = 15;
/// Anything else (see `hostcall_last_error()`).
pub const HOSTCALL_ERR_OTHER: c_int = 16;
/// The options of `hostcall_enable_ex` are refused: a `size` out of range, an unknown protocol,
/// a field this library does not know set, or a bitmap given for the stack protocol; or a wait
/// policy (`hostcall_set_wait_policy`, `hostcall_set_wait_times`) is refused.
pub const HOSTCALL_ERR_OPTIONS: c_int = 17;
/// The device image's LLVM-RPC client symbol has another size than this library's client object
/// (built against another `rpc.h`).
pub const HOSTCALL_ERR_RPC_CLIENT_SIZE: c_int = 18;
/// The memory asked for (`hostcall_set_memory`, `HOSTCALL_MEMORY`) does not fit here: missing
/// from this build or this machine, or the runtime already uses another.
pub const HOSTCALL_ERR_MEMORY: c_int = 19;
/// No service is registered under the id (`hostcall_unregister_service`,
/// `hostcall_get_service_stats`).
pub const HOSTCALL_ERR_NOT_REGISTERED: c_int = 20;
/// Called from inside the log callback where that cannot work (`hostcall_set_log_callback`,
/// which would wait for the callback to return); nothing changed.
pub const HOSTCALL_ERR_IN_LOG_CALLBACK: c_int = 21;
/// Not a `HOSTCALL_REASON_*` this library counts (`hostcall_count_reason`).
pub const HOSTCALL_ERR_UNKNOWN_REASON: c_int = 22;

/// Why an entry point failed: a status code and the message for `hostcall_last_error`.
#[derive(Debug)]
pub struct Failure {
    /// One of the `HOSTCALL_ERR_*` codes.
    pub code: c_int,
    /// What happened.
    pub message: String,
}

impl Failure {
    /// A failure with `code`.
    pub fn new(code: c_int, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// A null-pointer failure naming the argument.
    pub fn null(argument: &str) -> Self {
        Self::new(HOSTCALL_ERR_NULL, format!("{argument} is null"))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::new(code_of(&e), e.to_string())
    }
}

/// The status code of an error.
pub fn code_of(e: &Error) -> c_int {
    match e {
        Error::Layout(LayoutError::Null) => HOSTCALL_ERR_NULL,
        Error::Layout(LayoutError::Misaligned { .. }) => HOSTCALL_ERR_MISALIGNED,
        Error::Layout(LayoutError::Geometry(_)) => HOSTCALL_ERR_PACKET_COUNT,
        Error::AlreadyEnabled { .. } => HOSTCALL_ERR_ALREADY_ENABLED,
        Error::EnabledOnOtherListener { .. } | Error::AlreadyServed { .. } => HOSTCALL_ERR_OTHER_LISTENER,
        Error::Overlaps { .. } => HOSTCALL_ERR_OVERLAPS,
        Error::QueueTaken { .. } => HOSTCALL_ERR_QUEUE_TAKEN,
        Error::NotEnabled { .. } => HOSTCALL_ERR_NOT_ENABLED,
        Error::WrongQueue { .. } => HOSTCALL_ERR_WRONG_QUEUE,
        Error::PacketCountMismatch { .. } => HOSTCALL_ERR_PACKET_COUNT_MISMATCH,
        Error::CalledFromListener => HOSTCALL_ERR_FROM_LISTENER,
        Error::ServiceTaken(_) => HOSTCALL_ERR_SERVICE_TAKEN,
        Error::TimedOut => HOSTCALL_ERR_TIMED_OUT,
        Error::Thread(_) => HOSTCALL_ERR_THREAD,
        _ => HOSTCALL_ERR_OTHER,
    }
}

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Forgets this thread's last error: every call that succeeds does (see [`guard`]).
fn clear_last_error() {
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = None);
}

fn set_last_error(message: String) {
    // Interior NULs would truncate the C string: replace them.
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // `try_with`: during thread teardown the message is dropped rather than panicking.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = Some(message));
}

/// Runs an entry point's body: its value on success (this thread's last error cleared); on
/// failure (an error or a caught panic) records the message and returns `on_failure(code)`.
/// Installs the library's logger first ([`crate::logging`]); the lines logged meanwhile reach
/// the log callback after the body returned (its locks released) and before this thread's last
/// error is set, so a callback that calls the library leaves it as this call made it.
pub fn guard<T>(on_failure: impl FnOnce(c_int) -> T, body: impl FnOnce() -> Result<T, Failure>) -> T {
    let inside = crate::logging::Inside::enter();
    let result = catch_unwind(AssertUnwindSafe(|| {
        crate::logging::install();
        body()
    }));
    drop(inside); // delivers the lines queued by the body
    let failure = match result {
        Ok(Ok(value)) => {
            clear_last_error();
            return value;
        }
        Ok(Err(failure)) => failure,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Failure::new(HOSTCALL_ERR_PANIC, format!("internal panic: {what}"))
        }
    };
    let code = failure.code;
    set_last_error(failure.message);
    on_failure(code)
}

/// [`guard`] for entry points that return a status code.
pub fn status(body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    guard(|code| code, || body().map(|()| HOSTCALL_OK))
}

/// The message of the last call on this thread if it failed; `""` if it succeeded (every entry
/// point but this one and [`hostcall_status_string`] clears it on success) or none was made. The
/// string stays valid until the next call into the library on this thread.
#[no_mangle]
pub extern "C" fn hostcall_last_error() -> *const c_char {
    let fallback = c"".as_ptr();
    catch_unwind(|| {
        LAST_ERROR
            .try_with(|last| last.borrow().as_ref().map_or(fallback, |m| m.as_ptr()))
            .unwrap_or(fallback)
    })
    .unwrap_or(fallback)
}

/// What a status code means, as a static NUL-terminated string (`"unknown status code"` for a
/// code this library does not return). Leaves `hostcall_last_error()` as it is.
#[no_mangle]
pub extern "C" fn hostcall_status_string(code: c_int) -> *const c_char {
    let text: &'static std::ffi::CStr = match code {
        HOSTCALL_OK => c"success",
        HOSTCALL_ERR_NULL => c"a required pointer is null",
        HOSTCALL_ERR_MISALIGNED => c"a pointer is not aligned as its contract says",
        HOSTCALL_ERR_PACKET_COUNT => c"packet count refused (fewer than 2 or more than 2^24)",
        HOSTCALL_ERR_ALREADY_ENABLED => c"buffer already enabled",
        HOSTCALL_ERR_OTHER_LISTENER => c"buffer enabled or served on another listener",
        HOSTCALL_ERR_OVERLAPS => c"memory overlaps an enabled buffer or its bitmap",
        HOSTCALL_ERR_QUEUE_TAKEN => c"the queue already has a buffer",
        HOSTCALL_ERR_NOT_ENABLED => c"buffer not enabled",
        HOSTCALL_ERR_WRONG_QUEUE => c"buffer enabled for another queue",
        HOSTCALL_ERR_PACKET_COUNT_MISMATCH => c"buffer enabled with another packet count",
        HOSTCALL_ERR_FROM_LISTENER => c"called from a service on the listener thread",
        HOSTCALL_ERR_SERVICE_TAKEN => c"service id already registered",
        HOSTCALL_ERR_TIMED_OUT => c"an emulated call got no answer in time",
        HOSTCALL_ERR_THREAD => c"the listener thread could not start",
        HOSTCALL_ERR_PANIC => c"an internal error was caught",
        HOSTCALL_ERR_OTHER => c"other error (see hostcall_last_error())",
        HOSTCALL_ERR_OPTIONS => c"options refused",
        HOSTCALL_ERR_RPC_CLIENT_SIZE => c"the device's RPC client symbol has another size (another rpc.h)",
        HOSTCALL_ERR_MEMORY => c"the memory asked for does not fit here (see hostcall_last_error())",
        HOSTCALL_ERR_NOT_REGISTERED => c"no service is registered under that id",
        HOSTCALL_ERR_IN_LOG_CALLBACK => c"not allowed from inside the log callback",
        HOSTCALL_ERR_UNKNOWN_REASON => c"not a reason this library counts",
        _ => c"unknown status code",
    };
    text.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: a NUL-terminated string, valid until the next failure on this thread.
        unsafe { CStr::from_ptr(hostcall_last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        assert_eq!(last_error(), "");
        let code = status(|| panic!("boom {}", 42));
        assert_eq!(code, HOSTCALL_ERR_PANIC);
        assert_eq!(last_error(), "internal panic: boom 42");
        assert_eq!(last_error(), "internal panic: boom 42", "read twice");
        assert_eq!(status(|| Ok(())), HOSTCALL_OK);
        assert_eq!(last_error(), "", "cleared by a call that succeeds");
        assert_eq!(guard(|_| 0usize, || Err(Failure::null("x\0y"))), 0);
        assert_eq!(last_error(), "x y is null");
    }

    #[test]
    fn every_status_has_its_own_string() {
        let text = |code| {
            // SAFETY: a static NUL-terminated string.
            unsafe { std::ffi::CStr::from_ptr(hostcall_status_string(code)) }.to_str().unwrap().to_owned()
        };
        let texts: std::collections::BTreeSet<String> =
            (HOSTCALL_OK..=HOSTCALL_ERR_UNKNOWN_REASON).map(text).collect();
        assert_eq!(texts.len(), 23, "one distinct text per code");
        assert!(!texts.contains("unknown status code"));
        assert_eq!(text(-1), "unknown status code");
        assert_eq!(text(HOSTCALL_ERR_NULL), "a required pointer is null");
    }

    #[test]
    fn every_error_has_its_code() {
        assert_eq!(code_of(&Error::Layout(LayoutError::Null)), HOSTCALL_ERR_NULL);
        assert_eq!(code_of(&Error::NotEnabled { buffer: 8 }), HOSTCALL_ERR_NOT_ENABLED);
        assert_eq!(code_of(&Error::ShutDown), HOSTCALL_ERR_OTHER);
    }
}
