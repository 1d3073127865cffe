//! Latency rows: the ping-pong floor, hostcall round trips (core, listener, `Wave`) and
//! crossbeam request/response.

use crate::measure::{no_backoff, pinned_pair, round_trips, Sample};
use crate::options::Options;
use crate::{echo, request, ECHO};
use crossbeam_channel as channel;
use hostcall::prelude::*;
use hostcall::{HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol, Wave};
use hostcall_core::line::Incomplete;
use hostcall_core::{AnyStateMut, HostScratch};
use hostcall_core::{AnyView, ClaimedPacket, CompletedPacket, PacketRequest, SubmittedPacket, SLOT_WORDS};
use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

/// One cache line, alone in its 128 bytes (the adjacent-line prefetcher pairs 64-byte lines).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Line(pub(crate) AtomicU64);

pub(crate) fn floor_ping_pong(o: &Options) -> Sample {
    const STOP: u64 = u64::MAX;
    let ping = Arc::new(Line::default());
    let pong = Arc::new(Line::default());
    let peer = pinned_pair(o, || {
        let (ping, pong) = (ping.clone(), pong.clone());
        thread::spawn(move || {
            let mut seen = 0;
            loop {
                // Acquire/Release: the pair each way is what a request/response protocol needs.
                let v = ping.0.load(Ordering::Acquire);
                if v == seen {
                    spin_loop();
                    continue;
                }
                if v == STOP {
                    return;
                }
                pong.0.store(v, Ordering::Release);
                seen = v;
            }
        })
    });
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        ping.0.store(i, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != i {
            spin_loop();
        }
    });
    ping.0.store(STOP, Ordering::Release);
    peer.join().unwrap();
    sample
}

pub(crate) fn start_listener(config: ListenerConfig, packets: u64) -> (Listener, Arc<HostcallBuffer>) {
    start_listener_with(config, packets, Protocol::Stack)
}

pub(crate) fn start_listener_with(
    config: ListenerConfig,
    packets: u64,
    protocol: Protocol,
) -> (Listener, Arc<HostcallBuffer>) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), config).expect("start a listener");
    listener.services().register_lane(ECHO, "echo", |r| Ok(echo(r))).unwrap();
    let memory = Arc::new(HostMemory);
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(memory, packets, doorbell, protocol).expect("buffer"));
    listener.add(buffer.clone()).unwrap();
    (listener, buffer)
}

/// One lane's round trip through the real listener (its poller, registry and doorbell). The
/// device side is the core's producer path, as a GPU wave runs it: claim, fill, submit, ring the
/// doorbell, spin on READY, read the reply, release.
pub(crate) fn hostcall_round_trip(o: &Options, config: ListenerConfig, protocol: Protocol) -> Sample {
    let (listener, buffer) = pinned_pair(o, || start_listener_with(config, 2, protocol));
    let view = buffer.view();
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        one_lane_call(&view, i, || buffer.doorbell().ring());
    });
    listener.shutdown();
    sample
}

/// Call `i` of the core's producer path on lane 0 of any buffer: claim, fill, submit,
/// `after_submit` (a doorbell ring, or nothing), spin on the answer, check it, release.
fn one_lane_call(view: &AnyView<'_>, i: u64, after_submit: impl FnOnce()) {
    let mut claimed = view.claim(0).expect("a sound buffer").expect("a free packet");
    claimed.write_lane(0, &request(i, 0));
    let submitted = claimed.submit(ECHO, 1);
    after_submit();
    let done = submitted.wait(no_backoff);
    assert_eq!(done.reply(0), echo(&request(i, 0)));
}

/// As [`hostcall_round_trip`] with a spinning listener, the device side being the emulated
/// [`Wave`] (`with_spin_wait`): what the emulation adds (it builds a 64-lane `Reply` per call).
pub(crate) fn wave_round_trip(o: &Options) -> Sample {
    let (listener, buffer) = pinned_pair(o, || start_listener(ListenerConfig::spinning(), 2));
    let wave = Wave::new(buffer, 1).with_spin_wait();
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        let reply = wave.call(ECHO, |lane| request(i, lane)).expect("hostcall");
        assert_eq!(reply.lane(0), echo(&request(i, 0)));
    });
    listener.shutdown();
    sample
}

/// The protocol alone: the core producer path (claim, fill, submit, spin on the answer, release)
/// against a thread that spins on the protocol's drain (`AnyView::drain_scope`, its scope and
/// scratch kept as a poller keeps them) with an inline lane service. No listener, poller,
/// registry, doorbell or `Wave`: what the protocol's shared-memory traffic costs by itself, the
/// bound under the full `hostcall_1l_spinning` rows.
pub(crate) fn core_round_trip(o: &Options, protocol: Protocol) -> Sample {
    let (buffer, host) = core_host(o, protocol);
    let view = buffer.view();
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        one_lane_call(&view, i, || {});
    });
    host.stop();
    sample
}

/// As [`core_round_trip`] on a line buffer, the producer keeping its packet from call to call
/// (`line::Completed::keep`, what `keep_packet` does on a GPU): no `occupied` read-modify-write.
pub(crate) fn core_round_trip_line_kept(o: &Options) -> Sample {
    let (buffer, host) = core_host(o, Protocol::Line);
    let view = buffer.view().line().expect("a line buffer");
    let mut kept = None;
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        let mut claimed = kept.take().unwrap_or_else(|| view.claim(0).expect("a free packet"));
        claimed.write_lane(0, &request(i, 0));
        let done = claimed.submit(ECHO, 1).wait(no_backoff);
        assert_eq!(done.reply(0), echo(&request(i, 0)));
        kept = Some(done.keep());
    });
    drop(kept);
    host.stop();
    sample
}

/// A thread spinning on a buffer's drain, for the `core_*` rows.
struct CoreHost {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<()>,
}

impl CoreHost {
    fn stop(self) {
        // Relaxed: the flag carries no data.
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

/// A 2-packet buffer of `protocol` and a host thread (pinned as the pair's peer) serving it.
fn core_host(o: &Options, protocol: Protocol) -> (Arc<HostcallBuffer>, CoreHost) {
    let doorbell = Arc::new(ParkingDoorbell::new());
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 2, doorbell, protocol).expect("buffer"));
    let stop = Arc::new(AtomicBool::new(false));
    let thread = pinned_pair(o, || {
        let (buffer, stop) = (buffer.clone(), stop.clone());
        thread::spawn(move || {
            let view = buffer.view();
            // The host's state, kept across drains as a poller keeps it (the line protocol's
            // scratch payload is zeroed once, not per drain).
            let (mut scope, mut scratch) = (view.scope(), HostScratch::new());
            let mut incomplete = vec![Incomplete::default(); view.num_packets() as usize];
            // Relaxed: the flag carries no data.
            while !stop.load(Ordering::Relaxed) {
                view.drain_scope(
                    &mut scope,
                    &mut scratch,
                    AnyStateMut::Line(&mut incomplete),
                    &mut |packet: &mut PacketRequest<'_>| {
                        for lane in packet.lanes() {
                            let reply = echo(&packet.request(lane));
                            packet.reply(lane, reply);
                        }
                    },
                );
                spin_loop();
            }
        })
    });
    (buffer, CoreHost { stop, thread })
}

pub(crate) fn crossbeam_round_trip(o: &Options, spin: bool) -> Sample {
    let (request_tx, request_rx) = channel::bounded::<[u64; SLOT_WORDS]>(1);
    let (reply_tx, reply_rx) = channel::bounded::<[u64; 2]>(1);
    let server = pinned_pair(o, || {
        thread::spawn(move || loop {
            let Some(r) = receive(&request_rx, spin) else { return };
            reply_tx.send(echo(&r)).unwrap();
        })
    });
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        request_tx.send(request(i, 0)).unwrap();
        let reply = receive(&reply_rx, spin).expect("the server lives");
        assert_eq!(reply, echo(&request(i, 0)));
    });
    drop(request_tx);
    server.join().unwrap();
    sample
}

/// `recv`, or a `try_recv` spin. `None` once the sender is gone.
pub(crate) fn receive<T>(rx: &channel::Receiver<T>, spin: bool) -> Option<T> {
    if !spin {
        return rx.recv().ok();
    }
    loop {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(channel::TryRecvError::Empty) => spin_loop(),
            Err(channel::TryRecvError::Disconnected) => return None,
        }
    }
}
