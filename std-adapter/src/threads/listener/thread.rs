//! The listener thread: the poll loop and its doorbell waits, then the bounded shutdown (serve
//! for the grace, answer the rest with the shutdown error).

use super::rpc::ListenerDispatch;
use super::Shared;
use crate::dispatch::registry::reply_error_all;
use crate::observe::Reason;
use crate::threads::affinity;
use hostcall_core::{Dispatch, DrainError, DrainReport, ErrorCode, PacketRequest};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn poll(shared: &Shared, dispatch: &ListenerDispatch<'_>) -> DrainReport {
    dispatch.registry().poll_started();
    let report = shared.poller.poll_once(dispatch);
    if report.packets == 0 {
        dispatch.registry().services().events().empty_scan();
    }
    report
}

pub(super) fn run(shared: &Shared) {
    let config = &shared.config;
    if !config.cpus.is_empty() && !affinity::pin_current_thread(&config.cpus) {
        log::warn!("{}: could not pin to CPUs {:?}; running unpinned", config.thread_name, config.cpus);
    }
    log::info!("{}: listener started", config.thread_name);
    let dispatch = ListenerDispatch::new(shared.services.dispatcher(), &shared.rpc);
    let poll = |shared: &Shared| poll(shared, &dispatch);
    let mut last_seen = shared.doorbell.value();
    let mut wait = config.min_wait;
    let mut idle_polls = 0u32;
    // Acquire: pairs with the Release store in `shutdown_timeout`.
    while !shared.stop.load(Ordering::Acquire) {
        if poll(shared).packets > 0 {
            idle_polls = 0;
            wait = config.min_wait;
            continue;
        }
        if idle_polls < config.spin_polls {
            idle_polls += 1;
            std::hint::spin_loop();
            continue;
        }
        let now = shared.doorbell.wait(last_seen, wait);
        let rung = now != last_seen;
        dispatch.registry().services().events().woke(rung);
        if rung {
            wait = config.min_wait;
            idle_polls = 0;
        } else {
            wait = (wait * 2).min(config.max_wait); // idle: back off; the next poll happens anyway
        }
        last_seen = now;
    }
    finish(shared, &dispatch);
}

/// After shutdown was asked: serves normally for the grace, then answers whatever is still
/// submitted with the shutdown error (one last poll), and returns. The grace ends early once the
/// buffers have been quiet (no packet found) for `min_wait` (at most the grace): an idle
/// listener stops within about that, not the whole grace.
fn finish(shared: &Shared, dispatch: &ListenerDispatch<'_>) {
    // Relaxed: written before the Release store of `stop` that the caller's Acquire load saw.
    let grace = Duration::from_nanos(shared.grace_nanos.load(Ordering::Relaxed));
    let started = Instant::now();
    let until = started.checked_add(grace).unwrap_or_else(|| started + Duration::from_secs(3600));
    let quiet = shared.config.min_wait.min(grace);
    let closing = Closing { dispatch, until, refused: std::cell::Cell::new(0) };
    let mut last_packet = started;
    loop {
        let now = Instant::now();
        if now >= until || now.duration_since(last_packet) >= quiet {
            break;
        }
        if shared.poller.poll_once(&closing).packets == 0 {
            std::thread::sleep(Duration::from_micros(50).min(quiet));
        } else {
            last_packet = Instant::now();
        }
    }
    shared.poller.poll_once(&closing);
    let name = &shared.config.thread_name;
    if closing.refused.get() > 0 {
        log::warn!(
            "{name}: listener shut down: {} packets still submitted after the grace of {grace:?} answered \
             with the shutdown error",
            closing.refused.get()
        );
    }
    log::info!(
        "{name}: listener stopped after {:?} of its grace of {grace:?}; {} packets answered with the \
         shutdown error",
        started.elapsed(),
        closing.refused.get()
    );
}

/// The dispatch of a listener shutting down: serves normally until `until`, then answers every
/// packet with [`ErrorCode::ShuttingDown`] (checked per packet, so one poll over many packets
/// does not stretch the grace), counted as [`Reason::ShuttingDown`].
struct Closing<'d, 'a> {
    dispatch: &'d ListenerDispatch<'a>,
    until: Instant,
    /// Packets answered with the shutdown error.
    refused: std::cell::Cell<u64>,
}

impl Dispatch for Closing<'_, '_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        if Instant::now() < self.until {
            self.dispatch.dispatch(packet);
        } else {
            reply_error_all(packet, ErrorCode::ShuttingDown);
            let lanes = u64::from(packet.activemask().count_ones());
            self.dispatch.registry().services().count_refusal(Reason::ShuttingDown, lanes, packet.buffer());
            self.refused.set(self.refused.get() + 1);
        }
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.dispatch.malformed(buffer, error);
    }

    /// An RPC buffer's host goes on following its calls; the packets they make are answered as
    /// above (`packets` is the poller's wrapper of this dispatch).
    fn rpc_turn(
        &self,
        buffer: usize,
        turn: &mut hostcall_core::rpc::Turn<'_>,
        packets: &dyn Dispatch,
    ) -> Option<bool> {
        self.dispatch.rpc_turn(buffer, turn, packets)
    }
}
