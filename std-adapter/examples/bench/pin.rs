//! Where the two threads of a latency pair run.
//!
//! Two spinning threads left to the scheduler of a busy machine sometimes share one CPU, and a
//! round trip then takes a time slice. So each pair is pinned: the peer (echo thread, listener,
//! channel server) to one CPU, the caller to another. Threads inherit the affinity of the thread
//! that starts them, so `start_peer` runs with the calling thread pinned to the peer's CPU.
//! Throughput rows run unpinned.

use hostcall::{allowed_cpus, pin_current_thread};

/// Restricts the calling thread to `cpus` (best effort: a failure leaves it as it was).
pub fn set(cpus: &[usize]) {
    pin_current_thread(cpus);
}

/// The CPUs this process could run on at the first call (before any pinning).
pub fn allowed_at_start() -> &'static [usize] {
    static AT_START: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    AT_START.get_or_init(allowed_cpus)
}
