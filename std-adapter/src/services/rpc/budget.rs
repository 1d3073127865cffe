//! The two budgets of the calls in progress: the bytes they hold ([`Held`]) and the work one
//! poll does for them ([`PollWork`]).
//!
//! # Held bytes
//!
//! A call keeps what its lanes send until it is answered: streams (a write's bytes, a path, a
//! printf's format, argument block and strings), a printf's walk of its format, the bytes a read
//! got. A port holds one call, but its lanes choose the sizes: 4,096 ports of 64 lanes, each lane
//! mid-way through a format at the stream limit, would be 16 GiB. So every byte a call keeps is
//! charged first, with the mechanism of the message assembler's budgets (`services/held.rs`),
//! to its buffer's account ([`RpcLimits::max_held_bytes_per_buffer`]) and to the account of all
//! RPC buffers served through the same registry ([`RpcLimits::max_held_bytes`]):
//!
//! - a stream is charged its declared size at its first packet (the lane's buffer is then
//!   reserved to exactly that), so what a lane keeps is known before it arrives;
//! - a printf's argument kinds and string addresses are charged when its format is walked, a
//!   read's bytes before the read.
//!
//! A lane the budget refuses is followed to the end of its call like any refused lane (its
//! bytes read and dropped, no more of them kept) and answered with the call's failure value (-1
//! for printf, 0 bytes for a write or a read, a null `FILE`, -1 for `remove`, ...), counted in
//! [`RpcCounters::held_refused_lanes`](super::RpcCounters::held_refused_lanes) (and
//! [`Reason::HeldBytes`](crate::observe::Reason::HeldBytes) on a listener) and logged,
//! rate-limited. Everything a call was charged comes back when it is answered (or its buffer
//! removed). Not charged: each port's own bookkeeping (a call's per-lane tables, a few KiB, fixed
//! by the buffer's port count, which the host chose), one lane's output while it is written, and
//! the one finished console write a host keeps so that its next allocates nothing (its buffers'
//! capacity, at most 64 KiB, `console.rs`).
//!
//! The shared accounts are atomic words; a host takes from them in quanta of [`QUANTUM`] bytes
//! and keeps at most one quantum it does not use, so most charges touch no shared word (a small
//! call's lanes never do after the first). Near a limit it takes exactly what it needs.
//!
//! # Work per poll
//!
//! When many held calls complete together (every lane's last packet in one scan), answering
//! them is formatting and writing up to the whole budget of held bytes; done in one poll, every
//! other buffer of the listener would wait for it. So the work of one drain of a host's ports is
//! bounded ([`RpcLimits::poll_work_bytes`]), in bytes: each turn costs 64 bytes a lane (the
//! packet it reads or writes), a printf's answer the bytes of its message and of its output, a
//! write's the bytes written, a read's the bytes read. A turn that finds the budget spent is
//! deferred ([`Turn::defer`](hostcall_core::rpc::Turn::defer)): the port stays the host's, the
//! next poll takes it again. A call's answer is given lane by lane, so a printf of 64 large
//! lanes is spread over several polls too (the answers written so far wait in the lane buffers
//! until the last lane's turn hands the port back). One drain does at most the budget plus one
//! lane's answer (its message and its output, each within the stream and printf limits) and one
//! turn's packet.
//!
//! The host sees no poll begin: ports are scanned in ascending order, so a turn on a port at or
//! below the one before begins a new drain. (Two drains whose ports all ascend read as one; the
//! second then gets what the first left, never more, and a drain that deferred anything leaves a
//! port pending that the next drain sees first, so the count starts afresh there.) Deferred
//! ports go first at the next drain: ports below the one where the budget ran out wait until the
//! scan has passed them, so a busy low port cannot starve a high one.

use super::options::RpcLimits;
use crate::services::held::{charge_both, release_both, HeldAccount, OverBudget};
use std::sync::Arc;

/// Bytes a host takes from the shared accounts at once.
pub(super) const QUANTUM: usize = 64 << 10;

/// What one host's calls hold, charged to its buffer's account and to the one of all buffers.
#[derive(Debug)]
pub(super) struct Held {
    all: Arc<HeldAccount>,
    buffer: Arc<HeldAccount>,
    all_limit: usize,
    buffer_limit: usize,
    /// Bytes the host's calls hold (the sum of their charges).
    held: usize,
    /// Bytes taken from the shared accounts (at least `held`).
    taken: usize,
}

impl Held {
    /// A host's share of `buffer` (its buffer's account) and `all`, within `limits`.
    pub(super) fn new(limits: &RpcLimits, buffer: Arc<HeldAccount>, all: Arc<HeldAccount>) -> Self {
        Self {
            all,
            buffer,
            all_limit: limits.max_held_bytes,
            buffer_limit: limits.max_held_bytes_per_buffer,
            held: 0,
            taken: 0,
        }
    }

    /// Bytes the host's calls hold.
    pub(super) fn held(&self) -> usize {
        self.held
    }

    /// Charges `bytes`, if both accounts have room.
    pub(super) fn charge(&mut self, bytes: usize) -> Result<(), OverBudget> {
        let after = self.held.saturating_add(bytes);
        let need = after.saturating_sub(self.taken);
        if need > 0 {
            let accounts = ((&*self.all, self.all_limit), (&*self.buffer, self.buffer_limit));
            let quantum = need.div_ceil(QUANTUM).saturating_mul(QUANTUM);
            let took = match charge_both(accounts.0, accounts.1, quantum) {
                Ok(()) => quantum,
                Err(_) => charge_both(accounts.0, accounts.1, need).map(|()| need)?,
            };
            self.taken += took;
        }
        self.held = after;
        Ok(())
    }

    /// Gives back `bytes` charged before; returns to the accounts what is past one spare
    /// quantum.
    pub(super) fn release(&mut self, bytes: usize) {
        debug_assert!(bytes <= self.held, "released more than was charged");
        self.held -= bytes.min(self.held);
        let spare = self.taken - self.held;
        if spare > QUANTUM {
            self.give_back(spare - QUANTUM);
        }
    }

    /// Gives back everything (the calls were dropped).
    pub(super) fn clear(&mut self) {
        self.held = 0;
        self.give_back(self.taken);
    }

    fn give_back(&mut self, bytes: usize) {
        release_both(&self.all, &self.buffer, bytes);
        self.taken -= bytes;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The work one drain of a host's ports may do. See the [module docs](self#work-per-poll).
///
/// The drain's work is one running sum, `spent`: the budget is spent once it reaches `per_poll`
/// (a turn admitted below it may take the sum past it), and the sum is what [`PollWork::most`]
/// keeps. A turn that begins a drain resets the sum; every other turn compares, adds and stores.
#[derive(Debug)]
pub(super) struct PollWork {
    per_poll: usize,
    /// The work of the drain in progress.
    spent: usize,
    /// One past the port of the last turn (0 before the first): a port below it begins a new
    /// drain. Wider than a port, so that the last port's successor fits.
    next_port: u64,
    /// Ports below it wait this drain (where the last drain's budget ran out).
    start: u32,
    /// The first port this drain deferred for want of budget.
    ran_out_at: Option<u32>,
    /// The most work any drain before the one in progress did.
    most: usize,
}

impl PollWork {
    pub(super) fn new(per_poll: usize) -> Self {
        // `next_port` 0: the first turn continues this fresh drain, as a new one would begin.
        Self { per_poll, spent: 0, next_port: 0, start: 0, ran_out_at: None, most: 0 }
    }

    /// At the start of a turn on `port`: whether to take it now (else it is deferred).
    #[inline]
    pub(super) fn admit(&mut self, port: u32) -> bool {
        let port_wide = u64::from(port);
        if port_wide < self.next_port {
            self.begin_drain();
        }
        self.next_port = port_wide + 1;
        if port < self.start {
            return false;
        }
        if self.spent_out() {
            self.ran_out(port);
            return false;
        }
        true
    }

    /// A turn on a port at or below the last one's: the drain before is over.
    #[inline]
    fn begin_drain(&mut self) {
        self.start = self.ran_out_at.take().unwrap_or(0);
        self.most = self.most.max(self.spent);
        self.spent = 0;
    }

    /// Counts `bytes` of work.
    #[inline]
    pub(super) fn spend(&mut self, bytes: usize) {
        self.spent = self.spent.saturating_add(bytes);
    }

    /// Whether the drain's budget is spent.
    #[inline]
    pub(super) fn spent_out(&self) -> bool {
        self.spent >= self.per_poll
    }

    /// The turn on `port` was deferred for want of budget: the next drain begins there.
    pub(super) fn ran_out(&mut self, port: u32) {
        self.ran_out_at.get_or_insert(port);
    }

    /// The most work one drain did so far (the drain in progress included).
    pub(super) fn most(&self) -> usize {
        self.most.max(self.spent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(buffer_limit: usize, all: &Arc<HeldAccount>, buffer: &Arc<HeldAccount>) -> Held {
        let limits =
            RpcLimits::default().with_max_held_bytes(1 << 30).with_max_held_bytes_per_buffer(buffer_limit);
        Held::new(&limits, buffer.clone(), all.clone())
    }

    #[test]
    fn charges_take_quanta_and_near_the_limit_exactly_what_is_needed() {
        let (all, buffer) = (Arc::new(HeldAccount::default()), Arc::new(HeldAccount::default()));
        let mut a = held(QUANTUM + 100, &all, &buffer);
        a.charge(10).unwrap();
        assert_eq!((a.held(), buffer.held()), (10, QUANTUM));
        a.charge(QUANTUM).unwrap(); // a second quantum does not fit: exactly the rest
        assert_eq!((a.held(), buffer.held()), (QUANTUM + 10, QUANTUM + 10));
        assert_eq!(a.charge(91), Err(OverBudget::Buffer));
        a.charge(90).unwrap();
        a.release(QUANTUM + 100);
        assert_eq!((a.held(), buffer.held()), (0, QUANTUM), "one spare quantum is kept");
        drop(a);
        assert_eq!((all.held(), buffer.held()), (0, 0));
    }

    #[test]
    fn two_hosts_of_one_buffer_share_its_budget() {
        let (all, buffer) = (Arc::new(HeldAccount::default()), Arc::new(HeldAccount::default()));
        let (mut a, mut b) = (held(3 * QUANTUM, &all, &buffer), held(3 * QUANTUM, &all, &buffer));
        a.charge(2 * QUANTUM).unwrap();
        assert_eq!(b.charge(2 * QUANTUM), Err(OverBudget::Buffer));
        b.charge(QUANTUM).unwrap();
        a.release(2 * QUANTUM); // a keeps one quantum spare, gives the other back
        assert_eq!(b.charge(2 * QUANTUM), Err(OverBudget::Buffer));
        b.charge(QUANTUM).unwrap();
        a.charge(QUANTUM).unwrap(); // from its spare
        assert_eq!((a.held() + b.held(), buffer.held()), (3 * QUANTUM, 3 * QUANTUM));
    }

    #[test]
    fn a_drain_stops_when_its_work_is_spent_and_the_next_resumes_there() {
        let mut work = PollWork::new(100);
        let take = |work: &mut PollWork, ports: &[u32]| -> Vec<u32> {
            ports
                .iter()
                .copied()
                .filter(|&port| {
                    let taken = work.admit(port);
                    if taken {
                        work.spend(40);
                    }
                    taken
                })
                .collect()
        };
        assert_eq!(take(&mut work, &[0, 1, 2, 3, 4]), [0, 1, 2]);
        assert_eq!(take(&mut work, &[0, 1, 2, 3, 4]), [3, 4], "ports 0..3 wait for 3 and 4");
        assert_eq!(take(&mut work, &[0, 1, 2, 3, 4]), [0, 1, 2]);
        assert_eq!(work.most(), 120);
    }

    /// A turn admitted below the budget may take the drain past it: the next is deferred, the
    /// overrun counts in the most work, and the next drain starts from nothing at the deferred
    /// port. A budget of nothing defers every turn.
    #[test]
    fn a_drain_that_overran_its_budget_defers_the_rest_and_counts_the_overrun() {
        let mut work = PollWork::new(100);
        assert!(work.admit(0));
        work.spend(99);
        assert!(!work.spent_out(), "99 of 100 spent");
        assert!(work.admit(1));
        work.spend(50);
        assert!(work.spent_out());
        assert!(!work.admit(2), "the budget is spent");
        assert_eq!(work.most(), 149, "the overrun is the drain's work");
        assert!(!work.admit(0), "the next drain begins at the deferred port");
        assert!(work.admit(2) && !work.spent_out(), "and counts from nothing there");
        assert_eq!(work.most(), 149);
        let mut none = PollWork::new(0);
        assert!(!none.admit(0) && !none.admit(0));
        assert_eq!(none.most(), 0);
        let mut last = PollWork::new(100);
        assert!(last.admit(u32::MAX));
        last.spend(100);
        assert!(last.admit(0), "a turn after the last port's begins a drain");
    }
}
