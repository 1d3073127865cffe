//! LLVM libc's GPU RPC opcodes served on the host ([`hostcall_core::rpc`] is the wire): the
//! `'c'` namespace as LLVM's own server does it, ROCm clr's `'r'` namespace onto this crate's
//! hostcall services, an opcode group policy ([`RpcPolicy`]) and budgets ([`RpcLimits`]).
//!
//! [`RpcHost`] keeps, per port, the call in progress: each turn the port is the host's, it
//! does what LLVM's server does between two waits for ownership, then hands the port back. It
//! never waits on a device, so a client that stops mid-call holds only its own port's few
//! words of state (and at most [`RpcLimits::stream_bytes`] a lane, within the budgets below).
//!
//! # Budgets
//!
//! | bound | default | when exceeded |
//! | --- | --- | --- |
//! | one lane's stream ([`RpcLimits::stream_bytes`]) | 64 KiB | the lane is read to its end, dropped, answered failed ([`RpcCounters::over_limit_lanes`]) |
//! | bytes the calls in progress of one buffer hold ([`RpcLimits::max_held_bytes_per_buffer`]) | 64 MiB, as PRINTF's | a lane that would pass it is followed to its end and answered failed ([`RpcCounters::held_refused_lanes`], logged) |
//! | bytes the calls in progress of all RPC buffers of one registry hold ([`RpcLimits::max_held_bytes`]) | 256 MiB, as PRINTF's | as above |
//! | work of one poll on one buffer's calls ([`RpcLimits::poll_work_bytes`]) | 1 MiB | the turn waits for the next poll ([`RpcCounters::deferred_turns`]) |
//! | host files open ([`RpcLimits::open_files`]) | 64 | `fopen` answers null ([`RpcCounters::open_files_refused`]) |
//!
//! The held bytes are charged with the message assembler's mechanism (each stream at its
//! declared size when it begins, so what a lane keeps is known before it arrives); the work of a
//! poll bounds what answering many held calls at once costs the listener's other buffers: a
//! printf of many large lanes is answered lane by lane over several polls. Where LLVM's server
//! allocates whatever the device declares and answers every lane in one go, this host refuses
//! past the budget and spreads the answers; the details, and why, are in `budget.rs`.
//!
//! Served: every opcode of LLVM's server at [`hostcall_core::rpc::UPSTREAM`]: `NOOP`, the console
//! writes, the printf family (to stdout, stderr or an opened file), `MALLOC` and `FREE` (through
//! the DEVMEM service), the files (`fopen`, `fclose`, `fread`, `fgets`, the stream calls,
//! `remove`, `rename`: C stdio on the host, every path beneath the directory the host names,
//! `FILE`s as checked handles, see `files`), `EXIT` and `ABORT` (ending the host only where
//! [`crate::services::ending`] allows it), `HOST_CALL`, `SYSTEM`, and the `'r'` and `'h'` opcodes (through the buffer's
//! [`Dispatch`]); each group only as the buffer's [`RpcPolicy`] allows (a refused call is
//! followed to its end and answered with C's failure value, counted in
//! [`RpcCounters::refused_lanes`] and logged, rate-limited; so are a stream past
//! [`RpcLimits::stream_bytes`] and an `fopen` past [`RpcLimits::open_files`], each in its own
//! counter). Any other opcode is answered as
//! LLVM's server answers an opcode it has no handler for (the port is handed back untouched,
//! `RPC_UNHANDLED_OPCODE`), counted in [`RpcCounters::unhandled`] and logged (rate-limited).
//! A listener keeps one host per RPC buffer it serves ([`crate::threads::listener::BufferOptions`]).
//!
//! ```
//! use hostcall::services::printf::Streams;
//! use hostcall::services::rpc::{RpcHost, RpcLimits, RpcPolicy};
//! use hostcall_core::rpc::{opcode::libc, Client, Header, LaneBuffer, Parts, View};
//! use hostcall_core::sync::AtomicU32;
//! use hostcall_core::ServiceTable;
//!
//! let words = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
//! let (a, b, locks) = (words(1), words(1), words(1));
//! let (headers, buffers) = (vec![Header::default()], vec![LaneBuffer::default()]);
//! let parts = Parts { lanes: 1, host_mailbox: &a, device_mailbox: &b, headers: &headers, buffers: &buffers };
//! let view = View::from_parts(parts).unwrap();
//! let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
//! let mut sink = Streams { stdout: Vec::new(), stderr: Vec::new() };
//! let services = ServiceTable::<1>::new();
//!
//! let client = Client::new(view, &locks).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| {
//!         let mut port = client.try_open(libc::WRITE_TO_STDOUT_NEWLINE, 1, 0).unwrap();
//!         port.send_n(|_| b"hello from the device", &mut |_| true).unwrap();
//!         let mut written = 0;
//!         port.recv(|_, w| written = w[0], &mut |_| true).unwrap();
//!         port.close();
//!         assert_eq!(written, 22);
//!     });
//!     while host.counters().calls_done < 1 {
//!         host.drain(&view, &mut sink, &services);
//!     }
//! });
//! assert_eq!(sink.stdout, b"hello from the device\n");
//! ```

mod beneath;
mod budget;
mod call;
pub mod client;
mod console;
mod counters;
mod file_calls;
#[cfg(test)]
mod file_tests;
mod files;
mod gather;
mod memory;
mod options;
mod packet_turn;
mod policy;
mod printf;
mod stream_file;
#[cfg(test)]
mod tests;

pub use counters::RpcCounters;
pub use options::{
    RpcLimits, RpcOptions, SharedSink, DEFAULT_OPEN_FILES, DEFAULT_POLL_WORK_BYTES, DEFAULT_STREAM_BYTES,
};
pub use policy::{OpcodeGroup, RpcPolicy};

use call::Call;
pub(crate) use call::Context;

use crate::services::held::HeldAccount;
use crate::services::printf::{PrintfSink, Stream};
use budget::{Held, PollWork};
use console::Write;
use hostcall_core::rpc::opcode::libc;
use hostcall_core::rpc::{serve_as_packet, service_of, Turn, View};
use hostcall_core::{Dispatch, DrainHandler, PacketRequest, Payload};
use printf::Printf;
use std::sync::Arc;

/// The work a turn's packet costs, a lane (its 64 bytes read or written).
const PACKET_WORK: usize = 64;

/// The host of one LLVM-RPC buffer: the call in progress on each port, the policy and budgets,
/// the counters.
#[derive(Debug)]
pub struct RpcHost {
    policy: RpcPolicy,
    limits: RpcLimits,
    calls: Vec<Option<Call>>,
    counters: RpcCounters,
    /// Where `'r'` opcodes' lanes are copied for the hostcall services (host memory, never the
    /// shared buffer).
    scratch: Box<Payload>,
    /// The files the buffer's device opened (closed when the last host of the buffer goes).
    files: files::SharedFiles,
    /// What the calls hold, charged to the buffer's and all buffers' budgets.
    held: Held,
    /// The work budget of the drain in progress.
    work: PollWork,
    /// Whether the last turn counted a refusal.
    refused: bool,
}

impl RpcHost {
    /// The host of a buffer of `ports` ports (its held bytes on budgets of its own: "all
    /// buffers" is this host's alone).
    pub fn new(ports: u32, policy: RpcPolicy, limits: RpcLimits) -> Self {
        let files = files::SharedFiles::new(limits.open_files, policy.files_scope());
        Self::with_shared(ports, policy, limits, files, Arc::default(), Arc::default())
    }

    /// A host of a buffer whose file table `files` and account of held bytes `buffer` other
    /// hosts (of other ports) share, `all` the account of every buffer of its registry.
    pub(crate) fn with_shared(
        ports: u32,
        policy: RpcPolicy,
        limits: RpcLimits,
        files: files::SharedFiles,
        buffer: Arc<HeldAccount>,
        all: Arc<HeldAccount>,
    ) -> Self {
        Self {
            policy,
            limits,
            calls: (0..ports).map(|_| None).collect(),
            counters: RpcCounters::default(),
            refused: false,
            scratch: Box::default(),
            files,
            held: Held::new(&limits, buffer, all),
            work: PollWork::new(limits.poll_work_bytes),
        }
    }

    /// Host files the buffer's device holds open.
    pub fn open_files(&self) -> usize {
        self.files.lock().open()
    }

    /// The buffer is no longer served: closes its files (also those other hosts of its ports
    /// share) and drops the calls in progress.
    pub(crate) fn retire(&mut self) {
        self.files.lock().close_all();
        self.calls.iter_mut().for_each(|call| *call = None);
        self.held.clear();
        self.counters.held_bytes = 0;
    }

    /// The counters so far.
    pub fn counters(&self) -> RpcCounters {
        self.counters
    }

    /// The counters so far, borrowed, and whether the last turn counted a refusal.
    pub(crate) fn counters_after_turn(&self) -> (&RpcCounters, bool) {
        (&self.counters, self.refused)
    }

    /// The most work one drain of this host's ports did so far, as counted against
    /// [`RpcLimits::poll_work_bytes`] (see the [budgets](self#budgets)).
    pub fn most_poll_work(&self) -> usize {
        self.work.most()
    }

    /// Ports with a call in progress (waiting for the device's next packet).
    pub fn calls_in_progress(&self) -> usize {
        self.calls.iter().flatten().count()
    }

    /// Bytes of device data the calls in progress hold, as charged to the budgets (streams at
    /// their declared size, a printf's walk of its format, bytes read): at most
    /// [`RpcLimits::max_held_bytes_per_buffer`], whatever the device sends (see the
    /// [budgets](self#budgets)).
    pub fn held_bytes(&self) -> usize {
        self.held.held()
    }

    /// Takes one turn on every port of `view` that is the host's; returns the turns taken.
    /// Console output goes to `sink`, `'r'` opcodes to `services`.
    pub fn drain<D: Dispatch + ?Sized>(
        &mut self,
        view: &View<'_>,
        sink: &mut dyn PrintfSink,
        services: &D,
    ) -> u32 {
        let ports = view.ports().min(self.calls.len() as u32);
        let mut turns = 0;
        for port in 0..ports {
            if let Some(turn) = view.turn(port) {
                self.serve(turn, sink, services);
                turns += 1;
            }
        }
        turns
    }

    /// Takes one turn: continues the port's call, or begins one from the header, then hands the
    /// port back.
    pub fn serve<D: Dispatch + ?Sized>(
        &mut self,
        mut turn: Turn<'_>,
        sink: &mut dyn PrintfSink,
        services: &D,
    ) {
        self.take_turn(&mut turn, sink, services);
        turn.finish();
    }

    /// [`RpcHost::serve`] without handing the port back (the caller finishes the turn, as a
    /// poller's drain does). Returns `false` when the turn was an opcode this host does not serve
    /// (the port is left untouched) or a port past this host's count.
    pub fn take_turn<D: Dispatch + ?Sized>(
        &mut self,
        turn: &mut Turn<'_>,
        sink: &mut dyn PrintfSink,
        services: &D,
    ) -> bool {
        let (mask, opcode) = turn.header();
        let mut packets = |p: &mut PacketRequest<'_>| services.dispatch(p);
        if let Some(service) = service_of(opcode) {
            if self.packet_turn(turn, mask, service, &mut packets).is_some() {
                return true;
            }
        }
        self.take_call_turn(turn, sink, &mut packets).is_some()
    }

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
                lanes = packet_turn::lane_count(mask);
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
            lanes = packet_turn::lane_count(call.mask());
            if done {
                self.held.release(call.charged());
                self.counters.calls_done += 1;
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
        let write =
            |target, newline| Some(Call::Write(Box::new(Write::new(mask, target, newline, allowed, limit))));
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
