//! Status codes, the thread-local last error, and the guard every entry point runs in.

use hostcall_rs::core::LayoutError;
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

fn set_last_error(message: String) {
    // Interior NULs would truncate the C string: replace them.
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // `try_with`: during thread teardown the message is dropped rather than panicking.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = Some(message));
}

/// Runs an entry point's body: its value on success; on failure (an error or a caught panic)
/// records the message and returns `on_failure(code)`.
pub fn guard<T>(on_failure: impl FnOnce(c_int) -> T, body: impl FnOnce() -> Result<T, Failure>) -> T {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
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

/// The message of the last failed call on this thread (`""` if none failed yet). The string stays
/// valid until the next failing call on this thread.
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
        assert_eq!(status(|| Ok(())), HOSTCALL_OK);
        assert_eq!(last_error(), "internal panic: boom 42", "kept until the next failure");
        assert_eq!(guard(|_| 0usize, || Err(Failure::null("x\0y"))), 0);
        assert_eq!(last_error(), "x y is null");
    }

    #[test]
    fn every_error_has_its_code() {
        assert_eq!(code_of(&Error::Layout(LayoutError::Null)), HOSTCALL_ERR_NULL);
        assert_eq!(code_of(&Error::NotEnabled { buffer: 8 }), HOSTCALL_ERR_NOT_ENABLED);
        assert_eq!(code_of(&Error::ShutDown), HOSTCALL_ERR_OTHER);
    }
}
