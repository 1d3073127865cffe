//! The unknown service ids a registry has seen, in bounded memory.
//!
//! A device chooses the service id of every packet: 2^32 of them. The registry remembers the
//! first [`REMEMBERED_UNKNOWN_IDS`] distinct unknown ids (each with its packet count, logged once
//! when first seen) and counts the packets of every other unknown id together, without
//! remembering which (each is logged, rate-limited). So the bookkeeping is a few hundred bytes
//! whatever the device sends, and the log a few lines per window.

use crate::rate_limit::warn_limited;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// How many distinct unknown service ids a registry remembers (with their packet counts).
pub const REMEMBERED_UNKNOWN_IDS: usize = 32;

/// The remembered ids and the count of the rest. See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct UnknownIds {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// `(id, packets)`, at most `REMEMBERED_UNKNOWN_IDS` entries, in the order first seen.
    remembered: Vec<(u32, u64)>,
    /// Packets of ids that found the table full.
    others: u64,
}

impl UnknownIds {
    /// Counts one packet for `id`, logging it if it is new to the table or past it.
    pub(crate) fn record(&self, id: u32) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = table.remembered.iter_mut().find(|(known, _)| *known == id) {
            entry.1 += 1;
            return;
        }
        if table.remembered.len() < REMEMBERED_UNKNOWN_IDS {
            table.remembered.push((id, 1));
            drop(table);
            warn_limited!("unknown service id {id} (answered with an error; logged once per id)");
        } else {
            table.others += 1;
            drop(table);
            warn_limited!(
                "unknown service id {id} (answered with an error; {REMEMBERED_UNKNOWN_IDS} unknown ids \
                 are remembered already, this one is only counted)"
            );
        }
    }

    /// The remembered ids with their packet counts, and the packets of all other unknown ids.
    pub(crate) fn snapshot(&self) -> (BTreeMap<u32, u64>, u64) {
        let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        (table.remembered.iter().copied().collect(), table.others)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_stays_bounded_and_counts_the_rest() {
        let ids = UnknownIds::default();
        // Past the table's size either way; fewer ids under Miri, which interprets every step.
        let recorded = if cfg!(miri) { 3 * REMEMBERED_UNKNOWN_IDS as u32 } else { 10_000 };
        for id in 0..recorded {
            ids.record(id);
        }
        ids.record(3);
        let (remembered, others) = ids.snapshot();
        assert_eq!(remembered.len(), REMEMBERED_UNKNOWN_IDS);
        assert_eq!(remembered[&3], 2);
        assert_eq!(others, u64::from(recorded) - REMEMBERED_UNKNOWN_IDS as u64);
        assert!(ids.table.lock().unwrap().remembered.capacity() <= 2 * REMEMBERED_UNKNOWN_IDS);
    }
}
