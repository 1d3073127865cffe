//! The listener's own cost per packet when another core wrote the requests: what requests that a
//! GPU wrote into host memory look like to the host (their lines are not in the listener core's
//! caches), next to the hot rows of `listener_cost.rs`, where the listener's own thread wrote them.

use crate::listener_cost::{low_lanes, CostLoop};
use crate::measure::{pinned_pair, Sample, Timed};
use crate::options::Options;
use crate::report::Spread;
use crate::{echo, request, ECHO};
use hostcall::Protocol;
use hostcall_core::{AnySubmitted, ClaimedPacket, CompletedPacket, SubmittedPacket};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

/// Packets per repetition: all of the buffer's.
pub(crate) const COLD_PACKETS: u32 = 256;

/// Repetitions per sample (after one untimed warm-up repetition).
fn repetitions(o: &Options) -> u64 {
    (o.cost_packets / 500).clamp(3, 41)
}

/// `listener_cold_<L>l_<protocol>`: per repetition, a producer thread (pinned to another CPU
/// than this one, unless `--no-pin`) claims every packet of a [`COLD_PACKETS`]-packet buffer,
/// fills `lanes` lanes of each and submits it, while this thread waits on a channel; then this
/// thread serves them all with one `Poller::poll_once` (drain, dispatch through
/// `Services::dispatcher`, the echo service, the answers), timed, and the producer checks every
/// reply and releases the packets. The sample is the median over the repetitions of the poll's
/// time per packet served.
pub(crate) fn listener_cold(o: &Options, lanes: u32, protocol: Protocol) -> Sample {
    let cost = CostLoop::with(protocol, u64::from(COLD_PACKETS));
    let repetitions = repetitions(o);
    let (filled_tx, filled_rx) = mpsc::channel::<()>();
    let (served_tx, served_rx) = mpsc::channel::<()>();
    let per_packet = thread::scope(|s| {
        let cost = &cost;
        let producer = pinned_pair(o, || {
            s.spawn(move || {
                for repetition in 0..=repetitions {
                    let submitted = fill(cost, repetition, lanes as usize);
                    filled_tx.send(()).expect("the host waits");
                    served_rx.recv().expect("the host answers");
                    check(submitted, repetition, lanes as usize);
                }
            })
        });
        let services = cost.services.dispatcher();
        let mut per_packet = Vec::new();
        for repetition in 0..=repetitions {
            filled_rx.recv().expect("the producer fills");
            let t = Instant::now();
            let report = cost.poller.poll_once(&services);
            let elapsed = t.elapsed();
            assert_eq!(report.packets, COLD_PACKETS, "one poll serves the whole buffer");
            if repetition > 0 {
                per_packet.push(elapsed.as_nanos() as f64 / f64::from(report.packets));
            }
            served_tx.send(()).expect("the producer waits");
        }
        producer.join().expect("the producer checked every reply");
        per_packet
    });
    let median = Spread::of(per_packet).expect("at least one repetition").median;
    Sample::Cost { ns_per_packet: median, lanes, timed: Timed::Cold { packets: COLD_PACKETS } }
}

/// The request of packet `k` of repetition `repetition`, lane `lane`.
fn cold_request(repetition: u64, k: usize, lane: usize) -> [u64; 8] {
    request(repetition << 16 | k as u64, lane)
}

/// Claims every packet of the buffer, fills `lanes` lanes of each and submits it.
fn fill(cost: &CostLoop, repetition: u64, lanes: usize) -> Vec<AnySubmitted<'_>> {
    let view = cost.buffer.view();
    (0..COLD_PACKETS as usize)
        .map(|k| {
            // A phase or line claim tries each index once from `k`: here the first is free.
            let mut claimed = view.claim(k).expect("a sound buffer").expect("a free packet");
            for lane in 0..lanes {
                claimed.write_lane(lane, &cold_request(repetition, k, lane));
            }
            claimed.submit(ECHO, low_lanes(lanes))
        })
        .collect()
}

/// Checks every reply of `submitted` (all served by the host's poll) and releases the packets.
fn check(submitted: Vec<AnySubmitted<'_>>, repetition: u64, lanes: usize) {
    for (k, packet) in submitted.into_iter().enumerate() {
        let Ok(done) = packet.wait_until(|_| false) else { panic!("packet {k} not served by the poll") };
        for lane in 0..lanes {
            assert_eq!(done.reply(lane), echo(&cold_request(repetition, k, lane)), "packet {k} lane {lane}");
        }
    }
}
