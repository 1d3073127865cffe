//! The rate limit on reports that do not stop the process, per pc, in a bounded table.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::rate_limit::RateLimit;

/// Distinct pcs with a limit of their own; reports from further pcs share one limit.
pub const MAX_PCS: usize = 256;

/// A [`RateLimit`] per pc, for at most [`MAX_PCS`] pcs, and one shared by the pcs beyond.
#[derive(Debug)]
pub(super) struct PcLimits {
    per_window: u32,
    window: Duration,
    table: Mutex<HashMap<u64, RateLimit>>,
    beyond: RateLimit,
}

impl PcLimits {
    pub(super) fn new(per_window: u32, window: Duration) -> Self {
        Self {
            per_window,
            window,
            table: Mutex::new(HashMap::new()),
            beyond: RateLimit::new(per_window, window),
        }
    }

    /// Whether a report from `pc` is printed now: `Some(reports suppressed since the last one
    /// printed from this pc)`, or `None` (suppressed, counted).
    pub(super) fn admit(&self, pc: u64) -> Option<u64> {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if !table.contains_key(&pc) && table.len() >= MAX_PCS {
            drop(table);
            return self.beyond.admit();
        }
        table.entry(pc).or_insert_with(|| RateLimit::new(self.per_window, self.window)).admit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pc_has_its_own_limit_and_the_table_is_bounded() {
        let limits = PcLimits::new(2, Duration::from_secs(3600));
        assert_eq!(limits.admit(1), Some(0));
        assert_eq!(limits.admit(1), Some(0));
        assert_eq!(limits.admit(1), None);
        assert_eq!(limits.admit(2), Some(0), "another pc is not limited by the first");
        for pc in 3..MAX_PCS as u64 + 1 {
            assert_eq!(limits.admit(pc), Some(0));
        }
        // The table is full: new pcs share one limit.
        assert_eq!(limits.admit(10_000), Some(0));
        assert_eq!(limits.admit(10_001), Some(0));
        assert_eq!(limits.admit(10_002), None);
        assert_eq!(limits.table.lock().unwrap().len(), MAX_PCS);
    }
}
