//! `sanitizer`: `--reports` SANITIZER reports spread over the first second, on the adversary's
//! buffer, through the default SANITIZER service.

use crate::{Arena, Running};
use hostcall::services::sanitizer::SanitizerConfig;
use hostcall::Wave;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// SANITIZER's service id.
const SANITIZER: u32 = 4;

pub(crate) fn start(arena: &Arena<'_>) -> Running {
    let printed = Arc::new(AtomicU64::new(0));
    let sink = printed.clone();
    let config = SanitizerConfig::default()
        // Relaxed: a count for the output.
        .with_sink(Arc::new(move |_: &str| {
            sink.fetch_add(1, Ordering::Relaxed);
        }))
        .with_use_asan_runtime(false);
    arena.listener.services().enable_sanitizer(config).unwrap();
    let hsa = match std::env::var("HOSTCALL_HSA_LIB") {
        Ok(path) => format!("HSA runtime {path}"),
        Err(_) => "HOSTCALL_HSA_LIB not set: the code-object lookup uses whatever HSA runtime loads".into(),
    };
    let reports = arena.options.reports;
    let sent = Arc::new(AtomicU64::new(0));
    let wave = Wave::new(arena.buffer.clone(), 1);
    let thread = {
        let sent = sent.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            for k in 0..reports {
                let due = start + Duration::from_secs_f64(k as f64 / reports.max(1) as f64);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                // A "no abort" 8-byte read at a pc of its own (each pc has its own rate limit).
                let pc = 0x10_0000 + 0x40 * k;
                let _ = wave.call(SANITIZER, |_| [0xdead0, pc, 1, 0, 0, 3, 0xffff_ffff_0000_0000, 8]);
                // Relaxed: a count for the output.
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Relaxed loads: counts for a display line, ordered with nothing else.
    let note = move || {
        format!(
            "{} of {reports} reports sent, {} printed; {hsa}",
            sent.load(Ordering::Relaxed),
            printed.load(Ordering::Relaxed)
        )
    };
    Running { note: Box::new(note), threads: vec![thread] }
}
