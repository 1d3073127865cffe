//! The CPU time of a process's threads by name, from `/proc/self/task`.

use std::time::Duration;

/// The CPU time so far of every thread of this process whose name starts with `prefix` (Linux's
/// names are cut to 15 bytes): the first field of `schedstat` (nanoseconds on a CPU), else
/// `stat`'s user and system ticks. `None` where `/proc` cannot be read. Threads that have ended
/// are not counted.
pub(crate) fn cpu_time(prefix: &str) -> Option<Duration> {
    let prefix = &prefix[..prefix.len().min(15)];
    let mut total = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path = task.path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else { continue };
        if !name.trim_end().starts_with(prefix) {
            continue;
        }
        total += schedstat(&path).or_else(|| stat(&path)).unwrap_or_default();
    }
    Some(total)
}

fn schedstat(task: &std::path::Path) -> Option<Duration> {
    let text = std::fs::read_to_string(task.join("schedstat")).ok()?;
    Some(Duration::from_nanos(text.split_whitespace().next()?.parse().ok()?))
}

/// `utime + stime` (fields 14 and 15 of `stat`, after the parenthesised name), at 100 ticks a
/// second (Linux's `USER_HZ`).
fn stat(task: &std::path::Path) -> Option<Duration> {
    let text = std::fs::read_to_string(task.join("stat")).ok()?;
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}
