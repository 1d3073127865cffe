//! The library's log for C hosts: [`hostcall_set_log_callback`], else stderr at the level of
//! `HOSTCALL_LOG` (default: warnings).
//!
//! The Rust crate logs through the `log` facade (lifecycle lines at info and debug, per-packet
//! lines at trace, every refusal that loses device output at warn, rate-limited, with the count
//! of suppressed lines). A C host has no `log` logger, so the first call into this library
//! installs one (unless the process already has one: a Rust program linking this crate keeps its
//! own). It sends each record to the callback if one is set and the record is at its level or
//! more severe, else to stderr if the record passes `HOSTCALL_LOG` (`off`, `error`, `warn`,
//! `info`, `debug`, `trace`; unset or unknown: `warn`), as `hostcall: LEVEL target: message`.
//!
//! When the callback runs, so that it may call back into the library:
//! - never inside an entry point: a line logged on a thread that is inside one (under the
//!   runtime's locks, or during its one-time set-up) waits in that thread's queue and is
//!   delivered when the outermost entry point is about to return, after every lock is released;
//! - on other threads (the listener's) at once;
//! - a line logged while this thread's callback runs (by the entry points it calls) waits until
//!   the callback returns, so the callback never runs inside itself.
//!
//! [`hostcall_set_log_callback`] returns only once no thread runs the replaced callback: each
//! delivery counts itself as running under the generation of the callback it read, and the swap
//! waits until no delivery of an older generation runs. Deliveries never wait for a swap (no
//! reader-writer lock whose waiting writer would hold new readers back, while the callback a
//! swap waits for might wait on a line another thread is delivering).
//! Called from inside a callback it would wait for itself, so there it changes nothing and
//! returns [`HOSTCALL_ERR_IN_LOG_CALLBACK`](crate::status::HOSTCALL_ERR_IN_LOG_CALLBACK).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CString};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once};

/// No log lines.
pub const HOSTCALL_LOG_OFF: c_int = 0;
/// Errors only.
pub const HOSTCALL_LOG_ERROR: c_int = 1;
/// Warnings and errors (the default).
pub const HOSTCALL_LOG_WARN: c_int = 2;
/// Lifecycle lines too (listener start and stop, buffers added and removed, the backend).
pub const HOSTCALL_LOG_INFO: c_int = 3;
/// Debug lines too (each enable and disable, the backend's probing).
pub const HOSTCALL_LOG_DEBUG: c_int = 4;
/// Everything: per-packet lines too (each call of a C service, each emulated call).
pub const HOSTCALL_LOG_TRACE: c_int = 5;

/// A log callback: `level` (`HOSTCALL_LOG_ERROR`..`HOSTCALL_LOG_TRACE`), the module that logged
/// (`target`) and the line, both NUL-terminated and valid for the call only, and the `user`
/// pointer given with it. Called on any thread of the library (the listener's included), one
/// record at a time per thread, never inside an entry point (see the module's docs): it may call
/// the library's functions, [`hostcall_set_log_callback`] excepted (refused there with
/// `HOSTCALL_ERR_IN_LOG_CALLBACK`); it must not unwind.
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

/// The callback and the deliveries running, by the generation of the callback they run.
struct Deliveries {
    callback: Option<Callback>,
    /// Counts the callbacks set.
    generation: u64,
    /// Deliveries in progress, by generation (absent: none).
    running: BTreeMap<u64, usize>,
}

/// The logger this library installs.
struct CLogger {
    /// Held only to read or change the state, never while a callback runs: a delivery never
    /// waits for a swap (which could wait for a callback that waits for that delivery's thread).
    deliveries: Mutex<Deliveries>,
    /// Notified when a delivery ends: [`hostcall_set_log_callback`] waits on it until no
    /// delivery of an older generation runs.
    delivery_ended: Condvar,
    /// The most verbose level anything listens to, as `log::LevelFilter as usize`: read by
    /// `enabled` without the lock (a thread inside a callback must not take it again while a
    /// swap waits for it).
    max_level: AtomicUsize,
    stderr_level: log::LevelFilter,
}

static LOGGER: std::sync::OnceLock<CLogger> = std::sync::OnceLock::new();

/// A record waiting for delivery on the thread that logged it.
struct Line {
    level: log::Level,
    target: String,
    message: String,
}

thread_local! {
    /// How many entry points this thread is inside ([`Inside`]).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Whether this thread is delivering lines (running the callback).
    static DELIVERING: Cell<bool> = const { Cell::new(false) };
    /// The lines logged on this thread, not yet delivered.
    static QUEUE: RefCell<VecDeque<Line>> = const { RefCell::new(VecDeque::new()) };
}

/// Marks this thread as inside an entry point for its life: lines logged meanwhile wait, and
/// the outermost one delivers them when dropped (after the entry point's body released its
/// locks). Made by `status::guard` around every body.
pub(crate) struct Inside(());

impl Inside {
    pub(crate) fn enter() -> Self {
        let _ = DEPTH.try_with(|d| d.set(d.get() + 1));
        Inside(())
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let outermost = DEPTH
            .try_with(|d| {
                d.set(d.get().saturating_sub(1));
                d.get() == 0
            })
            .unwrap_or(false);
        if outermost {
            deliver_queued();
        }
    }
}

/// Delivers this thread's queued lines, unless it is inside an entry point or delivering
/// already (then the delivery in progress, or the outermost entry point, takes them).
fn deliver_queued() {
    let inside = DEPTH.try_with(Cell::get).unwrap_or(0) > 0;
    let delivering = DELIVERING.try_with(Cell::get).unwrap_or(true);
    let Some(logger) = LOGGER.get() else { return };
    if inside || delivering {
        return;
    }
    let _ = DELIVERING.try_with(|d| d.set(true));
    while let Some(line) = QUEUE.try_with(|q| q.borrow_mut().pop_front()).ok().flatten() {
        // Counted as running while the callback runs: a swap waits until this delivery ends.
        let (callback, generation) = {
            let mut deliveries = logger.lock();
            let generation = deliveries.generation;
            *deliveries.running.entry(generation).or_insert(0) += 1;
            (deliveries.callback, generation)
        };
        logger.write(callback, &line);
        let mut deliveries = logger.lock();
        if let Some(running) = deliveries.running.get_mut(&generation) {
            *running -= 1;
            if *running == 0 {
                deliveries.running.remove(&generation);
            }
        }
        drop(deliveries);
        logger.delivery_ended.notify_all();
    }
    let _ = DELIVERING.try_with(|d| d.set(false));
}

/// Whether this thread is running the log callback.
fn in_callback() -> bool {
    DELIVERING.try_with(Cell::get).unwrap_or(false)
}

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

fn filter_from(value: usize) -> log::LevelFilter {
    [
        log::LevelFilter::Off,
        log::LevelFilter::Error,
        log::LevelFilter::Warn,
        log::LevelFilter::Info,
        log::LevelFilter::Debug,
        log::LevelFilter::Trace,
    ]
    .get(value)
    .copied()
    .unwrap_or(log::LevelFilter::Trace)
}

impl CLogger {
    fn lock(&self) -> MutexGuard<'_, Deliveries> {
        // Poisoned only by a panic between two plain stores; the state is whole: go on.
        self.deliveries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most verbose level anything listens to, with `callback` set.
    fn level_with(&self, callback: Option<Callback>) -> log::LevelFilter {
        callback.map_or(self.stderr_level, |c| c.min_level)
    }

    fn max_level(&self) -> log::LevelFilter {
        // Relaxed: a level, read alone; a record logged across a swap may be filtered by either
        // level, and delivery checks the callback's own level again, on the callback it read.
        filter_from(self.max_level.load(Ordering::Relaxed))
    }

    /// Sends one line to `callback` if it takes its level, else to stderr if no callback is set
    /// and the line passes `HOSTCALL_LOG`.
    fn write(&self, callback: Option<Callback>, line: &Line) {
        match callback {
            Some(callback) if line.level <= callback.min_level => {
                let text = |s: &str| CString::new(s.replace('\0', " ")).unwrap_or_default();
                let (target, message) = (text(&line.target), text(&line.message));
                // SAFETY: the function the caller registered, with its contract (documented at
                // `HostcallLogFn`); both strings live until it returns.
                unsafe {
                    (callback.function)(
                        level_code(line.level),
                        target.as_ptr(),
                        message.as_ptr(),
                        callback.user,
                    )
                };
            }
            Some(_) => {}
            None if line.level <= self.stderr_level => {
                let text = format!("hostcall: {} {}: {}\n", line.level, line.target, line.message);
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            }
            None => {}
        }
    }
}

impl log::Log for CLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = Line {
            level: record.level(),
            target: record.target().to_owned(),
            message: record.args().to_string(),
        };
        if QUEUE.try_with(|q| q.borrow_mut().push_back(line)).is_ok() {
            deliver_queued();
        }
    }

    fn flush(&self) {}
}

/// Installs the library's logger once, unless the process has a `log` logger already. Called by
/// every entry point (through `status::guard`).
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let stderr_level = env_level();
        let logger = LOGGER.get_or_init(|| CLogger {
            deliveries: Mutex::new(Deliveries { callback: None, generation: 0, running: BTreeMap::new() }),
            delivery_ended: Condvar::new(),
            max_level: AtomicUsize::new(stderr_level as usize),
            stderr_level,
        });
        if log::set_logger(logger).is_ok() {
            log::set_max_level(logger.max_level());
        }
    });
}

/// Sends the library's log lines at `min_level` (`HOSTCALL_LOG_*`) or more severe to `function`
/// with `user`, instead of stderr; `function` NULL goes back to stderr at `HOSTCALL_LOG`'s level.
/// Returns `HOSTCALL_OK` once no thread runs the callback it replaced (its `user` may be freed
/// then); `HOSTCALL_ERR_IN_LOG_CALLBACK` called from inside the callback (nothing changed: it
/// would wait for itself); `HOSTCALL_ERR_OTHER` if the process has a logger of its own (a Rust
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
        if in_callback() {
            return Err(crate::status::Failure::new(
                crate::status::HOSTCALL_ERR_IN_LOG_CALLBACK,
                "hostcall_set_log_callback called from inside the log callback; nothing changed",
            ));
        }
        let callback =
            function.map(|function| Callback { function, min_level: level_filter(min_level), user });
        let mut deliveries = logger.lock();
        deliveries.callback = callback;
        deliveries.generation += 1;
        let generation = deliveries.generation;
        let level = logger.level_with(callback);
        // Relaxed: see `max_level`.
        logger.max_level.store(level as usize, Ordering::Relaxed);
        log::set_max_level(level);
        // Every delivery that starts from here on runs the new callback; wait for those that
        // run an older one: afterwards no old callback runs again.
        while deliveries.running.range(..generation).next().is_some() {
            deliveries = logger.delivery_ended.wait(deliveries).unwrap_or_else(|p| p.into_inner());
        }
        Ok(())
    })
}
