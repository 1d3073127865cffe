//! Long runs: a progress line on stderr every second, and Ctrl-C (SIGINT) caught so that a run
//! stops early with a partial summary and [`INTERRUPTED_EXIT`].
//!
//! The line is shown when stderr is a terminal (rewritten in place) or when asked for with
//! `--progress` (one line a second, for logs); runs shorter than a second show none.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The exit status of a run stopped by SIGINT: 128 + 2, as a shell reports a program killed by it.
pub(crate) const INTERRUPTED_EXIT: u8 = 130;

/// Set by the SIGINT handler; read by the runs.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_sigint(_: libc::c_int) {
    // Relaxed: a flag polled by the runs; a store to an atomic is async-signal-safe.
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// From now on SIGINT asks the run to stop (see [`interrupted`]) instead of killing the process.
pub(crate) fn catch_interrupts() {
    #[cfg(unix)]
    // SAFETY: `on_sigint` only stores to an atomic, which is async-signal-safe; `signal` with a
    // valid handler for SIGINT has no other precondition.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
}

/// Whether SIGINT arrived since [`catch_interrupts`].
pub(crate) fn interrupted() -> bool {
    // Relaxed: see `on_sigint`.
    INTERRUPTED.load(Ordering::Relaxed)
}

/// The progress line's thread, until [`Progress::finish`].
pub(crate) struct Progress {
    thread: Option<JoinHandle<()>>,
    finished: Arc<AtomicBool>,
}

/// Shows `done` out of `total` `unit` (and `errors`) every second, if stderr is a terminal or
/// `forced` (`--progress`).
pub(crate) fn start(
    forced: bool,
    unit: &'static str,
    total: u64,
    done: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
) -> Progress {
    let finished = Arc::new(AtomicBool::new(false));
    let terminal = std::io::stderr().is_terminal();
    if !terminal && !forced {
        return Progress { thread: None, finished };
    }
    let stop = finished.clone();
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        let mut next = Duration::from_secs(1);
        let mut shown = false;
        // Relaxed: flags and counters for display only.
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            let elapsed = started.elapsed();
            if elapsed < next {
                continue;
            }
            next += Duration::from_secs(1);
            let n = done.load(Ordering::Relaxed);
            let line = format!(
                "progress: {n}/{total} {unit} ({:.0}%), {:.0} {unit}/s, {} errors, {:.0} s",
                n as f64 * 100.0 / total.max(1) as f64,
                n as f64 / elapsed.as_secs_f64(),
                errors.load(Ordering::Relaxed),
                elapsed.as_secs_f64()
            );
            if terminal {
                eprint!("\r{line}");
            } else {
                eprintln!("{line}");
            }
            shown = true;
        }
        if shown && terminal {
            eprintln!();
        }
    });
    Progress { thread: Some(thread), finished }
}

impl Progress {
    /// Stops the line (ending it with a newline on a terminal).
    pub(crate) fn finish(self) {
        // Relaxed: see `start`.
        self.finished.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread {
            let _ = thread.join();
        }
    }
}
