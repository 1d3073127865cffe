//! The common turn, apart from the others: a whole call that is one hostcall packet (ROCm clr's
//! `'r'` opcodes, this project's `'h'`: the [`Rocm`](super::OpcodeGroup::Rocm) group) at a port
//! with no call in progress. It is the one turn of its call, begins and ends it, holds nothing
//! and is refused by nothing but its group's switch, so it needs none of the bookkeeping of a
//! call that spans turns: it is served straight through the drain's packet server, with the
//! same counts and the same work budget as any turn.

use super::{OpcodeGroup, RpcHost, PACKET_WORK};
use hostcall_core::rpc::{serve_as_packet, Turn};
use hostcall_core::DrainHandler;

impl RpcHost {
    /// Takes `turn` if it is a whole hostcall packet's call: a port of this host with no call in
    /// progress whose header (`mask`, an opcode of the `Rocm` group carrying hostcall service
    /// `service`) begins one, the group on. Its lanes are served as one packet through
    /// `packets` (or the turn is deferred, when the poll's work budget is spent) and counted as
    /// [`RpcHost::take_turn`] counts any turn. Returns the lanes served (0: deferred), or `None`,
    /// having done and counted nothing, for any other turn: the caller then takes it with
    /// `take_turn`.
    #[inline]
    pub(crate) fn packet_turn(
        &mut self,
        turn: &mut Turn<'_>,
        mask: u64,
        service: u32,
        packets: &mut (impl DrainHandler + ?Sized),
    ) -> Option<u32> {
        let port = turn.port();
        if !matches!(self.calls.get(port as usize), Some(None)) || !self.policy.allows(OpcodeGroup::Rocm) {
            return None; // past this host's ports, a call in progress, or the group off
        }
        self.refused = false;
        if !self.work.admit(port) {
            turn.defer(); // this poll's work is spent: the next takes the port first
            self.counters.deferred_turns += 1;
            return Some(0);
        }
        self.counters.calls += 1;
        serve_as_packet(turn, mask, service, &self.scratch, packets);
        let lanes = hostcall_core::lane_count(mask);
        self.work.spend(PACKET_WORK * lanes as usize);
        self.counters.calls_done += 1;
        self.counters.turns += 1;
        Some(lanes)
    }
}
