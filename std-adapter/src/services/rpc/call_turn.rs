//! A turn of any call but a whole hostcall packet's (`packet_turn.rs`): the call in progress
//! continued, or a call begun from the header.

use super::call::{Call, Context};
use super::console::Write;
use super::printf::Printf;
use super::{file_calls, gather, memory, OpcodeGroup, RpcHost, PACKET_WORK};
use crate::services::printf::{PrintfSink, Stream};
use hostcall_core::rpc::opcode::libc;
use hostcall_core::rpc::{serve_as_packet, service_of, Turn};
use hostcall_core::DrainHandler;

impl RpcHost {
    /// [`RpcHost::take_turn`] of any turn but a whole hostcall packet's call
    /// ([`RpcHost::packet_turn`], which a caller tries first), the packets its calls make served
    /// through `packets`. Returns the lanes served (0 for a deferred turn), `None` where
    /// `take_turn` returns `false`.
    pub(crate) fn take_call_turn(
        &mut self,
        turn: &mut Turn<'_>,
        sink: &mut dyn PrintfSink,
        packets: &mut (impl DrainHandler + ?Sized),
    ) -> Option<u32> {
        let port = turn.port();
        let Some(slot) = self.calls.get_mut(port as usize) else {
            self.counters.turns += 1;
            return None; // a port past this host's count: never served
        };
        if !self.work.admit(port) {
            turn.defer(); // this poll's work is spent: the next takes the port first
            self.counters.deferred_turns += 1;
            return Some(0);
        }
        let (refusals, unhandled) = (self.counters.refusals(), self.counters.unhandled);
        let mut lanes = 0;
        let call = match slot.take() {
            Some(call) => Some(call),
            None => {
                self.counters.calls += 1;
                let (mask, opcode) = turn.header();
                lanes = hostcall_core::lane_count(mask);
                self.begin(turn, mask, opcode, packets)
            }
        };
        if let Some(mut call) = call {
            let mut cx = Context {
                sink,
                counters: &mut self.counters,
                files: &self.files,
                console_allowed: self.policy.allows(OpcodeGroup::Console),
                files_allowed: self.policy.allows(OpcodeGroup::Files),
                limit: self.limits.stream_bytes,
                held: &mut self.held,
                work: &mut self.work,
            };
            let done = match &mut call {
                Call::Write(write) => write.turn(turn, &mut cx),
                Call::Printf(printf) => printf.turn(turn, &mut cx),
                Call::OnStream(opcode, mask) => {
                    file_calls::serve_stream_call(turn, *mask, *opcode, &mut cx);
                    true
                }
                Call::Read(read) => read.turn(turn, &mut cx),
                Call::Gather(gather) => gather.turn(turn, &mut cx),
                Call::Ending(ending) => ending.turn(turn, &mut cx),
            };
            lanes = hostcall_core::lane_count(call.mask());
            if done {
                self.held.release(call.charged());
                self.counters.calls_done += 1;
                if let Call::Write(write) = call {
                    if write.worth_keeping() {
                        self.spare_write = Some(write); // the next write's buffers
                    }
                }
            } else {
                if turn.is_deferred() {
                    self.work.ran_out(port);
                    self.counters.deferred_turns += 1;
                }
                self.calls[port as usize] = Some(call);
            }
        } else {
            self.counters.calls_done += 1;
        }
        self.work.spend(PACKET_WORK * lanes as usize);
        if !turn.is_deferred() {
            self.counters.turns += 1;
        }
        self.counters.held_bytes = self.held.held() as u64;
        self.refused = self.counters.refusals() != refusals;
        if self.refused {
            self.log_refusals(turn, refusals);
        }
        let lanes = if turn.is_deferred() { 0 } else { lanes };
        (self.counters.unhandled == unhandled).then_some(lanes)
    }

    /// The call an opcode begins, or `None` when this first turn is the whole call (`NOOP`,
    /// the `'r'` opcodes, an unhandled opcode).
    fn begin(
        &mut self,
        turn: &mut Turn<'_>,
        mask: u64,
        opcode: u32,
        packets: &mut (impl DrainHandler + ?Sized),
    ) -> Option<Call> {
        // The one-turn hostcall opcodes (`'r'`, `'h'`, all of the `Rocm` group) first (callers
        // that tried `packet_turn` first get here only with the group off).
        if let Some(service) = service_of(opcode) {
            if self.policy.allows(OpcodeGroup::Rocm) {
                serve_as_packet(turn, mask, service, &self.scratch, packets);
            } else {
                self.unhandled(turn, opcode);
            }
            return None;
        }
        let group = OpcodeGroup::of(opcode);
        let allowed = group.is_some_and(|g| self.policy.allows(g));
        let limit = self.limits.stream_bytes;
        let spare = &mut self.spare_write;
        let mut write =
            |target, newline| Some(Call::Write(Write::boxed(spare, mask, target, newline, allowed, limit)));
        match opcode {
            libc::NOOP => None,
            libc::MALLOC | libc::FREE => {
                let free = opcode == libc::FREE;
                memory::serve(turn, mask, free, allowed, &self.scratch, packets, &mut self.counters);
                None
            }
            libc::WRITE_TO_STDOUT => write(Some(Stream::Stdout), false),
            libc::WRITE_TO_STDERR => write(Some(Stream::Stderr), false),
            libc::WRITE_TO_STDOUT_NEWLINE => write(Some(Stream::Stdout), true),
            libc::WRITE_TO_STREAM => write(None, false),
            libc::CLOSE_FILE | libc::FEOF..=libc::UNGETC => Some(Call::OnStream(opcode, mask)),
            libc::READ_FROM_STREAM | libc::READ_FGETS => {
                Some(Call::Read(Box::new(file_calls::Read::new(mask, opcode == libc::READ_FGETS))))
            }
            libc::OPEN_FILE | libc::REMOVE | libc::RENAME | libc::SYSTEM | libc::HOST_CALL => {
                Some(Call::Gather(Box::new(gather::Gather::new(mask, opcode, allowed, limit))))
            }
            libc::EXIT | libc::ABORT => {
                Some(Call::Ending(gather::Ending::new(mask, opcode == libc::ABORT, allowed)))
            }
            libc::PRINTF_TO_STDOUT..=libc::PRINTF_TO_STREAM_PACKED => {
                let packed = opcode >= libc::PRINTF_TO_STDOUT_PACKED;
                let target = match (opcode - libc::PRINTF_TO_STDOUT) % 3 {
                    0 => Some(Stream::Stdout),
                    1 => Some(Stream::Stderr),
                    _ => None,
                };
                Some(Call::Printf(Box::new(Printf::new(mask, target, packed, allowed, limit))))
            }
            _ => {
                self.unhandled(turn, opcode);
                None
            }
        }
    }
}
