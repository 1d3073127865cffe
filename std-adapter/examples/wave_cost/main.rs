//! The emulated wave's own cost a call, for callgrind: one [`Wave`] of one lane calling an echo
//! service `N` times, the host served on the wave's own thread by a doorbell whose ring polls the
//! buffer once (so the wave never waits). The device side of a call is the whole `wave_loop` less
//! the inclusive `serve_inline`:
//!
//! ```text
//! cargo build --release -p hostcall --example wave_cost
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*wave_loop*' \
//!   --callgrind-out-file=/tmp/wave.out target/release/examples/wave_cost stack 10000
//! grep -E '^(summary|totals):' /tmp/wave.out
//! callgrind_annotate --inclusive=yes /tmp/wave.out | grep serve_inline
//! ```
//!
//! Arguments: the protocol (`stack`, `phase` or `line`) and the number of calls.

use hostcall::{Doorbell, HostMemory, HostcallBuffer, Protocol, Services, Wave};
use hostcall_core::line::Incomplete;
use hostcall_core::{AnyState, Poller, Registration};
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const ECHO: u32 = 100;

/// A doorbell whose ring serves the buffer at once, on the ringing thread.
#[derive(Debug, Default)]
struct ServeOnRing {
    host: OnceLock<(Poller<1>, Services)>,
}

impl Doorbell for ServeOnRing {
    fn handle(&self) -> u64 {
        0
    }
    fn ring(&self) {
        if let Some((poller, services)) = self.host.get() {
            serve_inline(poller, services);
        }
    }
    fn value(&self) -> u64 {
        0
    }
    fn wait(&self, last_seen: u64, _timeout: Duration) -> u64 {
        last_seen
    }
}

/// One poll of the buffer (not inlined: callgrind's inclusive count of it is the host's share).
#[inline(never)]
fn serve_inline(poller: &Poller<1>, services: &Services) {
    poller.poll_once(&services.dispatcher());
}

/// `calls` calls of `wave`; the replies' checksum (not inlined: callgrind's toggle names it).
#[inline(never)]
fn wave_loop(wave: &Wave, calls: u64) -> u64 {
    (0..calls)
        .map(|i| wave.call(ECHO, |lane| [i, lane as u64, 2, 3, 4, 5, 6, 7]).expect("served on the ring"))
        .fold(0, |sum, reply| sum.wrapping_add(reply.lane(0)[0]))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let protocol = match args.next().as_deref() {
        Some("phase") => Protocol::Phase,
        Some("line") => Protocol::Line,
        Some("stack") | None => Protocol::Stack,
        Some(other) => panic!("protocol {other:?}: stack, phase or line"),
    };
    let calls: u64 = args.next().map_or(10_000, |n| n.parse().expect("a number of calls"));
    let bell = Arc::new(ServeOnRing::default());
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 2, bell.clone(), protocol).unwrap());
    // The line host's memory of incomplete requests (leaked: it lives as long as the process).
    let incomplete = NonNull::from(Box::leak(vec![Incomplete::default(); 2].into_boxed_slice()));
    // SAFETY: the buffer is removed from the poller (below) before the wave, its last owner, drops
    // it, and is accessed only through views; `incomplete` is never freed.
    let base = buffer.as_ptr();
    let registration = unsafe {
        Registration::new(protocol, buffer.as_ptr(), buffer.len(), 2)
            .unwrap()
            .with_state(AnyState::Line(incomplete))
    };
    let poller = Poller::new();
    poller.add(registration).unwrap();
    let services = Services::new();
    services.register_lane(ECHO, "echo", |request| Ok([request[0] + 1, 0])).unwrap();
    bell.host.set((poller, services)).expect("set once");
    let wave = Wave::new(buffer, 1).with_spin_wait();
    let checksum = wave_loop(&wave, calls);
    bell.host.get().expect("set above").0.remove(base).expect("registered above");
    assert_eq!(checksum, (1..=calls).sum::<u64>(), "every call answered");
    println!("wave_cost: protocol={protocol:?} calls={calls} checksum={checksum}");
}
