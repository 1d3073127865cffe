//! The library's log for C hosts: [`hostcall_set_log_callback`], else stderr at the level of
//! `HOSTCALL_LOG` (default: warnings).
//!
//! The Rust crate logs through the `log` facade (lifecycle lines at info and debug, every
//! refusal that loses device output at warn, rate-limited, with the count of suppressed lines).
//! A C host has no `log` logger, so the first call into this library installs one (unless the
//! process already has one: a Rust program linking this crate keeps its own). It sends each
//! record to the callback if one is set and the record is at its level or more severe, else to
//! stderr if the record passes `HOSTCALL_LOG` (`off`, `error`, `warn`, `info`, `debug`, `trace`;
//! unset or unknown: `warn`), as `hostcall: LEVEL target: message`.

use std::ffi::{c_char, c_int, c_void, CString};
use std::io::Write;
use std::sync::{Once, RwLock};

/// No log lines.
pub const HOSTCALL_LOG_OFF: c_int = 0;
/// Errors only.
pub const HOSTCALL_LOG_ERROR: c_int = 1;
/// Warnings and errors (the default).
pub const HOSTCALL_LOG_WARN: c_int = 2;
/// Lifecycle lines too (listener start and stop, buffers added and removed, the backend).
pub const HOSTCALL_LOG_INFO: c_int = 3;
/// Debug lines too.
pub const HOSTCALL_LOG_DEBUG: c_int = 4;
/// Everything.
pub const HOSTCALL_LOG_TRACE: c_int = 5;

/// A log callback: `level` (`HOSTCALL_LOG_ERROR`..`HOSTCALL_LOG_TRACE`), the module that logged
/// (`target`) and the line, both NUL-terminated and valid for the call only, and the `user`
/// pointer given with it. Called on any thread of the library (the listener's included), one
/// record at a time per thread; it must not unwind, and must not call
/// [`hostcall_set_log_callback`].
pub type HostcallLogFn =
    unsafe extern "C" fn(level: c_int, target: *const c_char, message: *const c_char, user: *mut c_void);

/// The callback, its level and its pointer.
#[derive(Clone, Copy)]
struct Callback {
    function: HostcallLogFn,
    min_level: log::LevelFilter,
    user: *mut c_void,
}

// SAFETY: `user` is the caller's, never dereferenced here: passed back to the callback, which the
// header documents as called on any thread.
unsafe impl Send for Callback {}
// SAFETY: as for `Send`.
unsafe impl Sync for Callback {}

/// The logger this library installs.
struct CLogger {
    callback: RwLock<Option<Callback>>,
    stderr_level: log::LevelFilter,
}

static LOGGER: std::sync::OnceLock<CLogger> = std::sync::OnceLock::new();

fn level_filter(level: c_int) -> log::LevelFilter {
    match level {
        i32::MIN..=0 => log::LevelFilter::Off,
        1 => log::LevelFilter::Error,
        2 => log::LevelFilter::Warn,
        3 => log::LevelFilter::Info,
        4 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    }
}

fn level_code(level: log::Level) -> c_int {
    match level {
        log::Level::Error => HOSTCALL_LOG_ERROR,
        log::Level::Warn => HOSTCALL_LOG_WARN,
        log::Level::Info => HOSTCALL_LOG_INFO,
        log::Level::Debug => HOSTCALL_LOG_DEBUG,
        log::Level::Trace => HOSTCALL_LOG_TRACE,
    }
}

/// The level `HOSTCALL_LOG` names (`warn` if unset or unknown).
fn env_level() -> log::LevelFilter {
    match std::env::var("HOSTCALL_LOG").unwrap_or_default().to_ascii_lowercase().as_str() {
        "off" | "none" => log::LevelFilter::Off,
        "error" => log::LevelFilter::Error,
        "info" => log::LevelFilter::Info,
        "debug" => log::LevelFilter::Debug,
        "trace" => log::LevelFilter::Trace,
        _ => log::LevelFilter::Warn,
    }
}

impl CLogger {
    fn callback(&self) -> Option<Callback> {
        *self.callback.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The most verbose level anything listens to.
    fn max_level(&self) -> log::LevelFilter {
        self.callback().map_or(self.stderr_level, |c| c.min_level)
    }
}

impl log::Log for CLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        match self.callback() {
            Some(callback) if record.level() <= callback.min_level => {
                let text = |s: String| CString::new(s.replace('\0', " ")).unwrap_or_default();
                let (target, message) = (text(record.target().to_owned()), text(record.args().to_string()));
                // SAFETY: the function the caller registered, with its contract (documented at
                // `HostcallLogFn`); both strings live until it returns.
                unsafe {
                    (callback.function)(
                        level_code(record.level()),
                        target.as_ptr(),
                        message.as_ptr(),
                        callback.user,
                    )
                };
            }
            Some(_) => {}
            None if record.level() <= self.stderr_level => {
                let line = format!("hostcall: {} {}: {}\n", record.level(), record.target(), record.args());
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }
            None => {}
        }
    }

    fn flush(&self) {}
}

/// Installs the library's logger once, unless the process has a `log` logger already. Called by
/// every entry point (through `status::guard`).
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let logger =
            LOGGER.get_or_init(|| CLogger { callback: RwLock::new(None), stderr_level: env_level() });
        if log::set_logger(logger).is_ok() {
            log::set_max_level(logger.max_level());
        }
    });
}

/// Sends the library's log lines at `min_level` (`HOSTCALL_LOG_*`) or more severe to `function`
/// with `user`, instead of stderr; `function` NULL goes back to stderr at `HOSTCALL_LOG`'s level.
/// Returns `HOSTCALL_OK`, or `HOSTCALL_ERR_OTHER` if the process has a logger of its own (a Rust
/// program that installed one: its logger keeps the lines).
///
/// # Safety
/// `function`, if not NULL, follows [`HostcallLogFn`]'s contract until it is replaced.
#[no_mangle]
pub unsafe extern "C" fn hostcall_set_log_callback(
    function: Option<HostcallLogFn>,
    min_level: c_int,
    user: *mut c_void,
) -> c_int {
    crate::status::status(|| {
        install();
        let ours = |l: &&CLogger| {
            (log::logger() as *const dyn log::Log).cast::<()>() == (*l as *const CLogger).cast::<()>()
        };
        let logger = LOGGER.get().filter(ours);
        let Some(logger) = logger else {
            return Err(crate::status::Failure::new(
                crate::status::HOSTCALL_ERR_OTHER,
                "the process has a log logger of its own; the library's lines go there",
            ));
        };
        let callback =
            function.map(|function| Callback { function, min_level: level_filter(min_level), user });
        *logger.callback.write().unwrap_or_else(|p| p.into_inner()) = callback;
        log::set_max_level(logger.max_level());
        Ok(())
    })
}
