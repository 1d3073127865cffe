//! A watchdog for tests that check "this returns": the call runs on a thread of its own, and the
//! test fails with a clear message if it has not returned within the limit, instead of hanging.
//! (The stuck thread is left behind; the test binary exits after reporting the failure.)

use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Runs `f` on a thread; returns its result and how long it took, or fails the test if it has
/// not returned within `limit` (re-raising its panic if it panicked).
pub fn returns_within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (done, finished) = channel();
    let started = Instant::now();
    let thread = std::thread::Builder::new()
        .name(format!("watched: {what}"))
        .spawn(move || {
            let result = f();
            let _ = done.send(started.elapsed());
            result
        })
        .expect("spawn the watched thread");
    match finished.recv_timeout(limit) {
        Ok(took) => (thread.join().expect("the watched thread"), took),
        Err(RecvTimeoutError::Disconnected) => match thread.join() {
            Ok(_) => unreachable!("the watched thread ended without reporting"),
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(RecvTimeoutError::Timeout) => {
            panic!("watchdog: {what} did not return within {limit:?} (it hangs)")
        }
    }
}

/// Waits for `child` to exit, looking every millisecond; kills it and fails the test if it has
/// not exited within `limit`.
pub fn exits_within(
    child: &mut std::process::Child,
    what: &str,
    limit: Duration,
) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("watchdog: {what} did not exit within {limit:?} (it hangs)");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
