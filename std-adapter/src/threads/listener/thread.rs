//! The listener thread: the poll loop and its doorbell waits, then the bounded shutdown (serve
//! for the grace, answer the rest with the shutdown error).

use super::Shared;
use crate::dispatch::registry::{reply_error_all, ThreadDispatch};
use crate::threads::affinity;
use hostcall_core::{Dispatch, DrainError, DrainReport, ErrorCode, PacketRequest};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn poll(shared: &Shared, dispatch: &ThreadDispatch<'_>) -> DrainReport {
    shared.poller.poll_once(dispatch)
}

pub(super) fn run(shared: &Shared) {
    let config = &shared.config;
    if !config.cpus.is_empty() && !affinity::pin_current_thread(&config.cpus) {
        log::warn!("{}: could not pin to CPUs {:?}; running unpinned", config.thread_name, config.cpus);
    }
    let dispatch = shared.services.dispatcher();
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
        if now == last_seen {
            wait = (wait * 2).min(config.max_wait); // idle: back off; the next poll happens anyway
        } else {
            wait = config.min_wait;
            idle_polls = 0;
        }
        last_seen = now;
    }
    finish(shared, &dispatch);
}

/// After shutdown was asked: serves normally for the grace, then answers whatever is still
/// submitted with the shutdown error (one last poll), and returns.
fn finish(shared: &Shared, dispatch: &ThreadDispatch<'_>) {
    // Relaxed: written before the Release store of `stop` that the caller's Acquire load saw.
    let grace = Duration::from_nanos(shared.grace_nanos.load(Ordering::Relaxed));
    let until =
        Instant::now().checked_add(grace).unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
    let closing = Closing { dispatch, until, refused: std::cell::Cell::new(0) };
    while Instant::now() < until {
        if shared.poller.poll_once(&closing).packets == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    shared.poller.poll_once(&closing);
    if closing.refused.get() > 0 {
        log::warn!(
            "listener shut down: {} packets still submitted after the grace of {grace:?} answered with \
             the shutdown error",
            closing.refused.get()
        );
    }
}

/// The dispatch of a listener shutting down: serves normally until `until`, then answers every
/// packet with [`ErrorCode::ShuttingDown`] (checked per packet, so one poll over many packets
/// does not stretch the grace).
struct Closing<'d, 'a> {
    dispatch: &'d ThreadDispatch<'a>,
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
            self.refused.set(self.refused.get() + 1);
        }
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.dispatch.malformed(buffer, error);
    }
}
