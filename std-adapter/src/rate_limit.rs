//! Rate-limited logging for what a device can trigger.
//!
//! A device decides how often the host finds something wrong: one store into a buffer's
//! ready-stack can make every poll find a thousand malformed packets, and a device that sends
//! unknown service ids or DEVMEM requests past its budget can do so a million times a second. Each
//! such warning goes through a [`RateLimit`], one per kind of warning (per call site of the
//! crate's `warn_limited!` and `error_limited!` macros): at most [`WARNINGS_PER_WINDOW`] lines
//! per [`WARNING_WINDOW`], the rest counted, and the next line logged after a quiet spell says how
//! many similar lines were suppressed before it ("... [suppressed 1024 similar warnings]").

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines logged per kind of device-triggered warning per [`WARNING_WINDOW`].
pub const WARNINGS_PER_WINDOW: u32 = 10;
/// The window of [`WARNINGS_PER_WINDOW`].
pub const WARNING_WINDOW: Duration = Duration::from_secs(10);

/// At most `per_window` admissions per `window`; the rest are counted. See the
/// [module docs](self).
#[derive(Debug)]
pub(crate) struct RateLimit {
    per_window: u32,
    window: Duration,
    state: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    /// When the current window began; `None` before the first admission.
    started: Option<Instant>,
    /// Lines admitted in the current window.
    admitted: u32,
    /// Lines refused since the last admitted one.
    suppressed: u64,
}

impl RateLimit {
    /// A limit of `per_window` lines per `window`.
    pub(crate) const fn new(per_window: u32, window: Duration) -> Self {
        Self { per_window, window, state: Mutex::new(Window { started: None, admitted: 0, suppressed: 0 }) }
    }

    /// The limit for device-triggered warnings: [`WARNINGS_PER_WINDOW`] per [`WARNING_WINDOW`].
    pub(crate) const fn for_device_warnings() -> Self {
        Self::new(WARNINGS_PER_WINDOW, WARNING_WINDOW)
    }

    /// Whether to log one more line now: `Some(k)` to log it (`k` lines were suppressed since the
    /// last one admitted), `None` to suppress it (it is counted).
    pub(crate) fn admit(&self) -> Option<u64> {
        self.admit_at(Instant::now())
    }

    /// [`RateLimit::admit`] at the time `now` (for tests).
    pub(crate) fn admit_at(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let expired =
            state.started.map_or(true, |started| now.saturating_duration_since(started) >= self.window);
        if expired {
            state.started = Some(now);
            state.admitted = 0;
        }
        if state.admitted >= self.per_window {
            state.suppressed = state.suppressed.saturating_add(1);
            return None;
        }
        state.admitted += 1;
        Some(std::mem::take(&mut state.suppressed))
    }

    /// Lines suppressed since the last one admitted.
    #[cfg(test)]
    pub(crate) fn suppressed(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).suppressed
    }
}

/// Logs `message` at `level` for `target` if `limit` admits it, with the count of what it
/// suppressed before. The message is formatted only when logged.
pub(crate) fn log_limited(
    limit: &RateLimit,
    level: log::Level,
    target: &str,
    message: std::fmt::Arguments<'_>,
) {
    if !log::log_enabled!(target: target, level) {
        return;
    }
    match limit.admit() {
        Some(0) => log::log!(target: target, level, "{message}"),
        Some(suppressed) => {
            log::log!(target: target, level, "{message} [suppressed {suppressed} similar warnings]")
        }
        None => crate::observe::scope::count_suppressed_log(),
    }
}

/// `log::warn!` through a [`RateLimit`] of its own (one per call site: one kind of warning), for
/// warnings a device can trigger.
macro_rules! warn_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::rate_limit::RateLimit = $crate::rate_limit::RateLimit::for_device_warnings();
        $crate::rate_limit::log_limited(&LIMIT, log::Level::Warn, module_path!(), format_args!($($arg)+))
    }};
}

/// `log::error!` through a [`RateLimit`] of its own, as [`warn_limited!`].
macro_rules! error_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::rate_limit::RateLimit = $crate::rate_limit::RateLimit::for_device_warnings();
        $crate::rate_limit::log_limited(&LIMIT, log::Level::Error, module_path!(), format_args!($($arg)+))
    }};
}

pub(crate) use {error_limited, warn_limited};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_window_logs_with_the_count_of_what_was_suppressed() {
        let limit = RateLimit::new(2, Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(limit.admit_at(start), Some(0)); // logged
        assert_eq!(limit.admit_at(start), Some(0)); // logged
        assert_eq!(limit.admit_at(start), None); // suppressed, counted
        assert_eq!(limit.admit_at(start), None);
        assert_eq!(limit.suppressed(), 2);
        assert_eq!(limit.admit_at(start + Duration::from_secs(10)), Some(2));
        assert_eq!(limit.suppressed(), 0);
    }

    #[test]
    fn a_burst_logs_the_first_lines_then_counts() {
        let limit = RateLimit::new(3, Duration::from_secs(1));
        let t = Instant::now();
        let admitted: Vec<_> = (0..1000).filter_map(|_| limit.admit_at(t)).collect();
        assert_eq!(admitted, [0, 0, 0]);
        assert_eq!(limit.suppressed(), 997);
        // Still inside the window: suppressed.
        assert_eq!(limit.admit_at(t + Duration::from_millis(999)), None);
        // The next window reports the count once, then starts from zero.
        assert_eq!(limit.admit_at(t + Duration::from_secs(1)), Some(998));
        assert_eq!(limit.admit_at(t + Duration::from_secs(1)), Some(0));
    }

    #[test]
    fn a_clock_that_goes_backwards_does_not_reopen_the_window() {
        let limit = RateLimit::new(1, Duration::from_secs(1));
        let t = Instant::now() + Duration::from_secs(5);
        assert_eq!(limit.admit_at(t), Some(0));
        assert_eq!(limit.admit_at(t - Duration::from_secs(3)), None);
    }
}
