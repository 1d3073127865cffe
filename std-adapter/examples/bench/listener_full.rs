//! The callgrind loop through a real `Listener` thread (`--through listener`): what the listener
//! thread's dispatch adds to the poller's (the stuck-call watch around every packet, the RPC
//! buffers' hosts and their lock), which `--through poller` does not run.
//!
//! The listener blocks on its doorbell (no spinning, and timeouts far beyond the run), so each
//! packet costs one ring, one poll that serves it and one empty poll before the listener sleeps
//! again; the producer yields while it waits. Collect with `--toggle-collect='*poll_once*'`: the
//! inclusive `poll_once` count over N is one served poll and the empty polls; `--through
//! listener-rings-only` rings as often with no packet, so its count over its polls is one empty
//! poll, and a packet's own cost is (served run's count - its empty polls x that) / N. The polls
//! of a run are its `empty_polls` (printed), its N served ones, and shutdown's one last poll.

use crate::{echo, request, ECHO};
use hostcall::prelude::*;
use hostcall::{
    services::rpc::RpcOptions, BufferRegistration, HostMemory, HostcallBuffer, Listener, ListenerConfig,
    ParkingDoorbell, Protocol,
};
use hostcall_core::rpc::Client;
use hostcall_core::sync::AtomicU32;
use hostcall_core::{ClaimedPacket, CompletedPacket, SubmittedPacket};
use std::sync::Arc;
use std::time::Duration;

/// `packets` calls of `lanes` lanes (or, `rings_only`, as many rings with no packet) through a
/// listener serving one buffer of `protocol`; prints the listener's poll counts.
pub(crate) fn run_callgrind(packets: u64, lanes: u32, protocol: Protocol, rings_only: bool) {
    let long = Duration::from_secs(3600);
    let config = ListenerConfig::default()
        .with_spin_polls(0)
        .with_min_wait(long)
        .with_max_wait(long)
        .with_stuck_after(long)
        // No grace: shutdown polls once more (empty), not for a while.
        .with_shutdown_grace(Duration::ZERO);
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), config).expect("start a listener");
    listener.services().register_lane(ECHO, "echo", |r| Ok(echo(r))).unwrap();
    let ports = if matches!(protocol, Protocol::Rpc { .. }) { 1 } else { 2 };
    let buffer = Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), ports, doorbell.clone(), protocol)
            .expect("buffer"),
    );
    listener.add(buffer.clone()).unwrap();
    let view = buffer.view();
    let ring = || doorbell.ring();
    let checksum = if rings_only {
        for _ in 0..packets {
            ring();
            // Until the listener has polled and gone back to sleep (not exact: a yield may come
            // back before it polled; the count printed is what it did).
            std::thread::yield_now();
        }
        0
    } else {
        match view.rpc() {
            Some(rpc) => {
                let locks = [AtomicU32::new(0)];
                let client = Client::new(rpc, &locks).expect("one lock word");
                let claim = || client.claim(0).expect("the port is free between calls");
                calls(claim, ring, packets, lanes as usize)
            }
            None => {
                let claim = || view.claim(0).expect("a sound buffer").expect("a free packet");
                calls(claim, ring, packets, lanes as usize)
            }
        }
    };
    let events = listener.stats().events;
    listener.shutdown();
    println!(
        "callgrind-listener: through=listener{} protocol={protocol:?} packets={packets} lanes={lanes} \
         checksum={checksum} empty_polls={} doorbell_wakes={} timeout_polls={}",
        if rings_only { "-rings-only" } else { "" },
        events.empty_scans,
        events.doorbell_wakes,
        events.timeout_polls,
    );
}

/// `packets` times: claim, fill `lanes` lanes, submit, ring, yield until answered, read the
/// replies, release. Returns a checksum of the replies.
fn calls<C: ClaimedPacket>(claim: impl Fn() -> C, ring: impl Fn(), packets: u64, lanes: usize) -> u64 {
    let activemask = crate::listener_cost::low_lanes(lanes);
    let mut checksum = 0u64;
    for i in 0..packets {
        let mut claimed = claim();
        for lane in 0..lanes {
            claimed.write_lane(lane, &request(i, lane));
        }
        let submitted = claimed.submit(ECHO, activemask);
        ring();
        let done = submitted.wait(std::thread::yield_now);
        for lane in 0..lanes {
            checksum = checksum.wrapping_add(done.reply(lane)[0]);
        }
        drop(done); // releases the packet
    }
    checksum
}

/// `packets` RPC `puts` calls from one warp of `lanes` lanes (80 bytes a lane) through a listener
/// serving one port, output to `/dev/null`; prints the listener's poll counts.
pub(crate) fn run_callgrind_puts(packets: u64, lanes: u32) {
    let long = Duration::from_secs(3600);
    let config = ListenerConfig::default()
        .with_spin_polls(0)
        .with_min_wait(long)
        .with_max_wait(long)
        .with_stuck_after(long)
        .with_shutdown_grace(Duration::ZERO);
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), config).expect("start a listener");
    let protocol = Protocol::Rpc { lanes };
    let buffer = Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), 1, doorbell.clone(), protocol).expect("buffer"),
    );
    listener
        .add(
            BufferRegistration::new(buffer.clone())
                .with_rpc(RpcOptions::default().with_sink(crate::puts::dev_null_sink())),
        )
        .unwrap();
    let locks = [AtomicU32::new(0)];
    let client = Client::new(buffer.view().rpc().expect("an RPC buffer"), &locks).expect("one lock word");
    let lines: Vec<Vec<u8>> = (0..lanes).map(crate::puts::line).collect();
    for _ in 0..packets {
        // Each wait rings (the client has just flipped, or is still waiting) and yields.
        crate::puts::warp_puts_lanes(&client, lanes, &lines, &mut |_| {
            doorbell.ring();
            std::thread::yield_now();
            true
        });
    }
    let events = listener.stats().events;
    listener.shutdown();
    println!(
        "callgrind-listener: through=listener-puts lanes={lanes} calls={packets} empty_polls={} doorbell_wakes={} \
         timeout_polls={}",
        events.empty_scans, events.doorbell_wakes, events.timeout_polls,
    );
}
