//! The process-wide claims on served buffers: one buffer is served by one listener at a time,
//! whichever API adds it.
//!
//! Every path that hands a buffer to a listener takes a [`Claim`] on its address range first, in
//! [`Listener::add`](crate::threads::listener::Listener::add) (and through it
//! [`HostcallRuntime::enable`](crate::lifecycle::HostcallRuntime::enable)): a registration of the
//! whole buffer claims the whole range; one with a
//! [`range`](crate::threads::listener::BufferRegistration::range) claims that range of packets of
//! a phase, line or RPC buffer, which other listeners may share with claims on disjoint packet
//! ranges of the same buffer (how [`ListenerPool`](crate::threads::pool::ListenerPool) splits one).
//! A claim that overlaps another listener's is refused with [`Error::AlreadyServed`]. The claim is
//! released when the buffer is removed, or when its listener has shut down (its thread joined) or
//! is dropped.
//!
//! Two listeners draining one buffer each serve every packet they see: in the phase and line
//! protocols both write the per-packet host word and the reply words, and waves get replies meant
//! for others.

use crate::error::Error;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

/// What is claimed of one buffer.
enum Claimed {
    /// The whole buffer, by one listener.
    Whole { owner: u64 },
    /// Disjoint packet ranges of one phase or line buffer, each by its listener.
    Ranges(Vec<(u64, Range<u32>)>),
}

/// One claimed address range.
struct Entry {
    end: usize,
    claimed: Claimed,
}

/// Claims by base address.
static CLAIMS: Mutex<BTreeMap<usize, Entry>> = Mutex::new(BTreeMap::new());

fn claims() -> MutexGuard<'static, BTreeMap<usize, Entry>> {
    // Every update below leaves the map whole before anything that can panic: go on.
    CLAIMS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A listener's claim on a buffer (or a packet range of one); dropping it releases the claim.
#[derive(Debug)]
#[must_use = "the claim is released when dropped"]
pub(crate) struct Claim {
    base: usize,
    owner: u64,
}

/// The claimed entry overlapping `base..end`, if any, other than one at exactly `base..end`.
fn overlapping(map: &BTreeMap<usize, Entry>, base: usize, end: usize) -> Option<usize> {
    let before = map.range(..base).next_back().filter(|(_, e)| e.end > base).map(|(b, _)| *b);
    let after = map.range(base..end.max(base + 1)).next().map(|(b, _)| *b);
    before.or(after)
}

/// Claims the whole of `base..base + len` for listener `owner`.
pub(crate) fn claim_whole(base: usize, len: usize, owner: u64) -> Result<Claim, Error> {
    let end = base.saturating_add(len);
    let mut map = claims();
    if let Some(served) = overlapping(&map, base, end) {
        return Err(conflict(&map, base, served, owner));
    }
    map.insert(base, Entry { end, claimed: Claimed::Whole { owner } });
    Ok(Claim { base, owner })
}

/// Claims packets `range` of the phase or line buffer at `base..base + len` for listener `owner`: refused
/// if any other claim overlaps the buffer, unless it is a range claim on the same buffer with a
/// disjoint range.
pub(crate) fn claim_range(base: usize, len: usize, range: Range<u32>, owner: u64) -> Result<Claim, Error> {
    let end = base.saturating_add(len);
    let mut map = claims();
    if let Some(served) = overlapping(&map, base, end) {
        let shareable = served == base
            && map[&base].end == end
            && match &map[&base].claimed {
                Claimed::Ranges(ranges) => {
                    ranges.iter().all(|(o, r)| *o != owner && (r.end <= range.start || range.end <= r.start))
                }
                Claimed::Whole { .. } => false,
            };
        if !shareable {
            return Err(conflict(&map, base, served, owner));
        }
        if let Some(Entry { claimed: Claimed::Ranges(ranges), .. }) = map.get_mut(&base) {
            ranges.push((owner, range));
        }
        return Ok(Claim { base, owner });
    }
    map.insert(base, Entry { end, claimed: Claimed::Ranges(vec![(owner, range)]) });
    Ok(Claim { base, owner })
}

/// The error for a claim on `base` refused because of the claim at `served`: the poller's own
/// `AlreadyRegistered` when the same listener claimed the same buffer (what adding a buffer twice
/// to one poller answers).
fn conflict(map: &BTreeMap<usize, Entry>, base: usize, served: usize, owner: u64) -> Error {
    let mine = match &map[&served].claimed {
        Claimed::Whole { owner: o } => *o == owner,
        Claimed::Ranges(ranges) => ranges.iter().any(|(o, _)| *o == owner),
    };
    if mine && served == base {
        Error::Poller(hostcall_core::PollerError::AlreadyRegistered { base })
    } else {
        Error::AlreadyServed { buffer: base, served }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut map = claims();
        let Some(entry) = map.get_mut(&self.base) else { return };
        let empty = match &mut entry.claimed {
            Claimed::Whole { owner } => *owner == self.owner,
            Claimed::Ranges(ranges) => {
                if let Some(at) = ranges.iter().position(|(o, _)| *o == self.owner) {
                    ranges.swap_remove(at);
                }
                ranges.is_empty()
            }
        };
        if empty {
            map.remove(&self.base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Addresses no other test claims (the map is process-wide): far above any real allocation.
    const A: usize = 0x7f00_0000_0000_0000;

    #[test]
    fn whole_and_range_claims_exclude_each_other() {
        let whole = claim_whole(A, 100, 1).unwrap();
        assert_eq!(claim_whole(A, 100, 2).unwrap_err(), Error::AlreadyServed { buffer: A, served: A });
        assert_eq!(
            claim_whole(A, 100, 1).unwrap_err(),
            Error::Poller(hostcall_core::PollerError::AlreadyRegistered { base: A })
        );
        assert_eq!(
            claim_whole(A + 99, 10, 2).unwrap_err(),
            Error::AlreadyServed { buffer: A + 99, served: A }
        );
        assert_eq!(
            claim_whole(A - 10, 11, 2).unwrap_err(),
            Error::AlreadyServed { buffer: A - 10, served: A }
        );
        assert!(claim_range(A, 100, 0..4, 2).is_err());
        let next = claim_whole(A + 100, 10, 2).unwrap(); // adjacent is fine
        drop((whole, next));

        let low = claim_range(A, 100, 0..16, 1).unwrap();
        let high = claim_range(A, 100, 16..32, 2).unwrap();
        assert!(claim_range(A, 100, 8..24, 3).is_err(), "overlapping packet ranges");
        assert!(claim_range(A, 100, 32..48, 1).is_err(), "one listener, one range per buffer");
        assert!(claim_range(A, 90, 32..48, 3).is_err(), "another geometry");
        assert!(claim_whole(A, 100, 3).is_err());
        drop(low);
        assert!(claim_whole(A, 100, 3).is_err(), "a range is still claimed");
        drop(high);
        drop(claim_whole(A, 100, 3).unwrap());
    }
}
