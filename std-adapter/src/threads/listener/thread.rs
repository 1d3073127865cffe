//! The listener thread: the poll loop and its doorbell waits, then the bounded shutdown (serve
//! for the grace, answer the rest with the shutdown error). Each thread serves one [`Seat`]; one
//! abandoned inside a stuck call hands its buffer back and ends (`relay.rs`).

use super::relay::{self, Seat};
use super::wait;
use super::watch::Watched;
use super::Shared;
use crate::dispatch::registry::{reply_error_all, ThreadDispatch};
use crate::observe::Reason;
use crate::threads::affinity;
use hostcall_core::{Dispatch, DrainError, DrainReport, ErrorCode, OwnWork, PacketRequest, PollSession};
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

thread_local! {
    /// The id of the listener this thread serves (0: none).
    static LISTENER: Cell<u64> = const { Cell::new(0) };
}

/// The id of the listener whose thread this is (0 on any other thread).
pub(crate) fn listener_of_this_thread() -> u64 {
    LISTENER.with(Cell::get)
}

/// Not inlined: the bench's callgrind mode (`--through listener`) collects in it by name.
#[inline(never)]
fn poll<const N: usize>(
    session: &mut PollSession<'_, N>,
    dispatch: &ThreadDispatch<'_>,
    watched: &Watched<'_, '_>,
) -> DrainReport {
    dispatch.poll_started();
    let report = session.poll_once(watched);
    if report.packets == 0 {
        dispatch.empty_scan();
    }
    report
}

/// Starts the thread of `seat`.
pub(super) fn spawn(shared: Arc<Shared>, seat: Arc<Seat>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(seat.thread_name.clone()).spawn(move || run(&shared, &seat))
}

/// Starts the thread of `seat`, which waits for `gate`: `true` to run, `false` (or a closed
/// gate) to end at once.
pub(super) fn spawn_gated(
    shared: Arc<Shared>,
    seat: Arc<Seat>,
    gate: mpsc::Receiver<bool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(seat.thread_name.clone()).spawn(move || {
        if gate.recv() == Ok(true) {
            run(&shared, &seat);
        }
    })
}

fn run(shared: &Shared, seat: &Arc<Seat>) {
    let config = &shared.config;
    LISTENER.with(|l| l.set(shared.id));
    if !config.cpus.is_empty() && !affinity::pin_current_thread(&config.cpus) {
        log::warn!("{}: could not pin to CPUs {:?}; running unpinned", seat.name, config.cpus);
    }
    log::info!("{}: listener thread started", seat.name);
    let dispatch = shared.services.dispatcher();
    let returned = |service, buffer| relay::returned(seat, service, buffer);
    let watched = Watched::new(&dispatch, &seat.watch, &returned);
    // The session of polls, held while the thread polls and dropped before it naps (or ends), so
    // that a `remove` from another thread waits for one poll at most, never for a nap.
    let mut session = None;
    let mut last_seen = shared.doorbell.value();
    // The generation read before the policy: a change in between is seen again at the first
    // check, never lost.
    let mut generation = 0;
    let mut policy = shared.wait.changed(&mut generation).unwrap_or_else(|| shared.wait.get());
    wait::apply_timer_slack(&policy, &seat.name);
    let mut naps = 0u32;
    let mut idle_polls = 0u32;
    // Acquire: pairs with the Release store in `shutdown_timeout`.
    while !shared.stop.load(Ordering::Acquire) {
        if session.is_none() {
            session = seat.poller.session();
        }
        // Only this thread polls its seat's poller, so the session is there; if it were not,
        // the loop goes on as after an empty poll.
        let served = session.as_mut().map_or(0, |polls| poll(polls, &dispatch, &watched).packets);
        if served > 0 {
            if watched.abandoned() {
                break;
            }
            idle_polls = 0;
            naps = 0;
            continue;
        }
        if watched.abandoned() {
            break;
        }
        if let Some(changed) = shared.wait.changed(&mut generation) {
            policy = changed;
            wait::apply_timer_slack(&policy, &seat.name);
            (idle_polls, naps) = (0, 0);
        }
        if idle_polls < policy.spin_polls {
            idle_polls += 1;
            std::hint::spin_loop();
            continue;
        }
        session = None; // a remover waits for no nap
        let now = shared.doorbell.nap(last_seen, policy.nap(naps));
        let rung = now != last_seen;
        dispatch.services().events().woke(rung);
        if rung {
            (idle_polls, naps) = (0, 0);
        } else {
            naps = naps.saturating_add(1); // idle: the next nap as the policy says; a poll first
        }
        last_seen = now;
    }
    drop(session); // `hand_back` removes buffers from this poller
    if watched.abandoned() && !relay::hand_back(shared, seat) {
        log::info!("{}: gave its buffer back after a stuck call; thread ends", seat.name);
        return;
    }
    loop {
        // A fresh watch (an abandoned one would stop every poll before its first buffer).
        let closing = Watched::new(&dispatch, &seat.watch, &returned);
        finish(shared, seat, &closing);
        if !closing.abandoned() {
            break;
        }
        // Stuck in a call during the grace: the other buffers went to a new thread; what is left
        // here is the stuck call's buffer, answered by the next round.
        relay::hand_back(shared, seat);
    }
    relay::release(shared, seat);
}

/// After shutdown was asked: serves normally for the grace, then answers whatever is still
/// submitted with the shutdown error (one last poll), and returns. The grace ends early once the
/// buffers have been quiet (no packet found) for `max_wait` (at most the grace): an idle
/// listener stops within about that, not the whole grace.
fn finish(shared: &Shared, seat: &Seat, dispatch: &Watched<'_, '_>) {
    // Relaxed: written before the Release store of `stop` that the caller's Acquire load saw.
    let grace = Duration::from_nanos(shared.grace_nanos.load(Ordering::Relaxed));
    let started = shared.stop_asked.get().copied().unwrap_or_else(Instant::now);
    let until = started.checked_add(grace).unwrap_or_else(|| started + Duration::from_secs(3600));
    let quiet = shared.config.wait.max_wait.min(grace);
    let closing = Closing { dispatch, until, refused: std::cell::Cell::new(0) };
    let mut last_packet = Instant::now();
    loop {
        let now = Instant::now();
        if now >= until || now.duration_since(last_packet) >= quiet || dispatch.abandoned() {
            break;
        }
        if seat.poller.poll_once(&closing).packets == 0 {
            std::thread::sleep(Duration::from_micros(50).min(quiet));
        } else {
            last_packet = Instant::now();
        }
    }
    if !dispatch.abandoned() {
        seat.poller.poll_once(&closing);
    }
    let name = &seat.name;
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
struct Closing<'d, 'w, 'a> {
    dispatch: &'d Watched<'w, 'a>,
    until: Instant,
    /// Packets answered with the shutdown error.
    refused: std::cell::Cell<u64>,
}

impl Closing<'_, '_, '_> {
    /// Serves `packet` with `serve` until `until`, then answers it with the shutdown error.
    fn serve_or_refuse(&self, packet: &mut PacketRequest<'_>, serve: impl FnOnce(&mut PacketRequest<'_>)) {
        if Instant::now() < self.until {
            serve(packet);
        } else {
            reply_error_all(packet, ErrorCode::ShuttingDown);
            let lanes = u64::from(packet.activemask().count_ones());
            self.dispatch.dispatch.services().count_refusal(Reason::ShuttingDown, lanes, packet.buffer());
            self.refused.set(self.refused.get() + 1);
        }
    }
}

impl Dispatch for Closing<'_, '_, '_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        self.serve_or_refuse(packet, |packet| self.dispatch.dispatch(packet));
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.dispatch.malformed(buffer, error);
    }

    /// A host's own work (an RPC buffer's host following its calls) goes on, watched as ever; the
    /// packets it makes are answered as above.
    fn own_work(&self, buffer: usize, name: u32, work: &mut OwnWork<'_>) {
        self.dispatch.own_work(buffer, name, &mut |serve| {
            work(&mut |packet| self.serve_or_refuse(packet, &mut *serve));
        });
    }

    fn proceed(&self) -> bool {
        self.dispatch.proceed()
    }
}
