//! A capturing logger for tests that check what the host logs: every line at warning level or
//! above, of the whole process (a test binary that installs it should not let other tests spend
//! the rate limits it checks).

use std::sync::{Mutex, MutexGuard, Once};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }
    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            lines().push(record.args().to_string());
        }
    }
    fn flush(&self) {}
}

/// Installs the capturing logger (once per process).
pub fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
    });
}

/// The lines captured so far (clear them to start over).
pub fn lines() -> MutexGuard<'static, Vec<String>> {
    LINES.lock().unwrap_or_else(|p| p.into_inner())
}
