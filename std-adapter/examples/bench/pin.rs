//! Where the two threads of a latency pair run.
//!
//! Two spinning threads left to the scheduler of a busy machine sometimes share one CPU, and a
//! round trip then takes a time slice. So each pair is pinned: the peer (echo thread, listener,
//! channel server) to one CPU, the caller to another. Threads inherit the affinity of the thread
//! that starts them, so `start_peer` runs with the calling thread pinned to the peer's CPU.
//! Throughput rows run unpinned.

/// The CPUs this process may run on (all of them where affinity is not supported).
#[cfg(target_os = "linux")]
pub fn allowed() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data, valid when zeroed; `sched_getaffinity` writes at
    // most `size_of::<cpu_set_t>()` bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set)).collect()
    }
}

/// Restricts the calling thread to `cpus` (best effort: a failure leaves it as it was).
#[cfg(target_os = "linux")]
pub fn set(cpus: &[usize]) {
    // SAFETY: as in `allowed`; `sched_setaffinity` only reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(not(target_os = "linux"))]
pub fn allowed() -> Vec<usize> {
    Vec::new()
}

#[cfg(not(target_os = "linux"))]
pub fn set(_cpus: &[usize]) {}

/// [`allowed`] as it was at the first call (before any pinning).
pub fn allowed_at_start() -> &'static [usize] {
    static AT_START: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    AT_START.get_or_init(allowed)
}
