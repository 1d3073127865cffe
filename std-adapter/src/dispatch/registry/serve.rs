//! Serving one packet with a registered service, and the error replies: the panic guard around
//! handlers, and the counting of what was served (per service, per buffer).

use hostcall_core::serve_lanes_from;
use hostcall_core::{ErrorCode, LaneService, PacketRequest, Popcnt, SLOT_WORDS};
use std::cell::Cell;
use std::num::NonZeroU64;

use super::{Entry, Handler};
use crate::dispatch::panics::{catch_in_scope, catch_service_panic};
use crate::observe::counters::{Shard, Timing};
use crate::observe::histogram::ticks;
use crate::observe::Reason;
use crate::rate_limit::error_limited;

/// The reply words of an error for a lane of service `service`: `[ERROR_REPLY, code]`
/// ([`ErrorCode::reply`]), except for DEVMEM, `[0, code]`: ROCm's device allocator checks the
/// address for null and takes any other value, `u64::MAX` included, as memory it may use.
///
/// ```
/// use hostcall::error_reply;
/// use hostcall_core::{DEVMEM, PRINTF};
/// use hostcall_core::ErrorCode;
/// assert_eq!(error_reply(PRINTF, ErrorCode::Refused), [u64::MAX, 4]);
/// assert_eq!(error_reply(DEVMEM, ErrorCode::Refused), [0, 4]);
/// ```
pub fn error_reply(service: u32, code: ErrorCode) -> [u64; 2] {
    // The core's rule, which `PacketRequest::reply_error` (lane handlers' errors) applies too.
    code.reply_for(service)
}

/// Answers every active lane of `packet` with [`error_reply`] for its service, flagging the packet.
pub fn reply_error_all(packet: &mut PacketRequest<'_>, code: ErrorCode) {
    let reply = error_reply(packet.service(), code);
    for lane in packet.lanes() {
        packet.reply_with_error(lane, reply);
    }
}

/// Serves every active lane with `serve`: the core's [`serve_lanes_from`], with a panic guard
/// (a panic answers the lane it happened on with [`ErrorCode::ServicePanicked`] and the lanes
/// after it are served as usual; `name` names the service in the log). Returns the error count.
/// Lane handlers are served through it, and packet services that answer lane by lane (the
/// message services) use it too.
///
/// One guard a packet, not one a lane: the guard's set-up (the hook check and the thread's
/// service depth) is paid once, not by every lane (what it cost a lane is in
/// `docs/cache-lines.md`, "Measured"). After a panic the lanes from the next one on are served
/// under a fresh guard.
pub(crate) fn serve_lanes_guarded(
    name: &str,
    packet: &mut PacketRequest<'_>,
    mut serve: impl FnMut(usize, &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode>,
) -> u64 {
    let errors = Cell::new(0u64);
    // The lane being served: the one that panicked, when the guard catches a panic.
    let serving = Cell::new(0usize);
    let mut first = 0;
    loop {
        let served = catch_service_panic(|| {
            serve_lanes_from(packet, first, |lane, request| {
                serving.set(lane);
                let reply = serve(lane, request);
                errors.set(errors.get() + u64::from(reply.is_err()));
                reply
            })
        });
        let Err(panic) = served else { return errors.get() };
        let lane = serving.get();
        crate::observe::count(Reason::HandlerPanic);
        error_limited!("service {name} panicked on lane {lane} ({panic}); answered with an error");
        packet.reply_error(lane, ErrorCode::ServicePanicked);
        errors.set(errors.get() + 1);
        // Ends: every panic is at a lane from `first` on.
        first = lane + 1;
    }
}

/// Serves every active lane with `handler` (`entry`'s), as [`serve_lanes_guarded`] does, inside
/// the refusal scope `serve_entry` is called in (whose filter knows a panic here is a service's:
/// [`catch_in_scope`]). Returns the error count. Inlined into the dispatcher: the lane loop is
/// the service's own `serve_lanes` (one indirect call a packet), so what a function of its own
/// would keep apart is only its frame and a second call (16 instructions a packet; measured in
/// `docs/performance.md`, "The registry's serve, cut again").
#[inline(always)]
fn serve_lanes_in_scope(entry: &Entry, packet: &mut PacketRequest<'_>, handler: &dyn LaneService) -> u64 {
    // The lane being served: the one that panicked, when the guard catches a panic.
    let serving = Cell::new(0usize);
    let served = catch_in_scope(|| handler.serve_lanes(packet, 0, &serving));
    match served {
        Ok(errors) => u64::from(errors),
        // The entry, not its name and handler: one word the panic's landing pad keeps.
        Err(panic) => after_panic(entry, packet, serving.get(), panic),
    }
}

/// Lane `lane` of `packet` panicked (`panic`): answers it with [`ErrorCode::ServicePanicked`]
/// and serves the lanes after it under a fresh guard, as [`serve_lanes_guarded`] does. Returns
/// the packet's error count.
#[cold]
#[inline(never)]
fn after_panic(entry: &Entry, packet: &mut PacketRequest<'_>, mut lane: usize, mut panic: String) -> u64 {
    // Always a lane handler: only one is served lane by lane.
    let Handler::Lane(handler) = &entry.handler else { return u64::from(packet.error_lanes()) };
    let name = &entry.name;
    let serving = Cell::new(0usize);
    loop {
        crate::observe::count(Reason::HandlerPanic);
        error_limited!("service {name} panicked on lane {lane} ({panic}); answered with an error");
        packet.reply_error(lane, ErrorCode::ServicePanicked);
        // Ends: each round starts after the lane that panicked last, and stops past the last lane.
        let served = catch_in_scope(|| handler.serve_lanes(packet, lane + 1, &serving));
        match served {
            Ok(_) => return u64::from(packet.error_lanes()),
            // At least the lane after the last, so the loop ends even if `serving` were not moved
            // (the registry's lane services are closures, served by the trait's own body).
            Err(again) => (lane, panic) = (serving.get().max(lane + 1), again),
        }
    }
}

/// Where a packet is counted: a shard of its service's counters and one of its buffer's (none
/// when its buffer is not counted), with whether the caller adds to them alone
/// ([`ShardSlot::alone`](crate::observe::counters::ShardSlot::alone)), and `plain`: `Some` where
/// it does and the processor has `popcnt`, the case the counting tests for first (one test for
/// both, the lane count with no check of the feature word).
#[derive(Clone, Copy)]
pub(super) struct Shards<'a> {
    pub(super) service: &'a Shard,
    pub(super) buffer: Option<&'a Shard>,
    pub(super) alone: bool,
    pub(super) plain: Option<Popcnt>,
}

impl Shards<'_> {
    /// `plain` for a caller that adds alone or not (`alone`).
    pub(super) fn plain(alone: bool) -> Option<Popcnt> {
        if alone {
            Popcnt::get()
        } else {
            None
        }
    }

    /// Counts a packet of `lanes` lanes, `errors` of them answered with an error, in both shards
    /// (its timing in the service's), `alone` as the shards say.
    #[inline(always)]
    fn count(&self, lanes: u64, errors: u64, timing: Timing, alone: bool) {
        self.service.count(lanes, errors, Some(timing), alone);
        if let Some(buffer) = self.buffer {
            buffer.count(lanes, errors, None, alone);
        }
    }
}

/// [`Shards::count`] of a packet of the lanes in `mask` in the shards `counting` gives, where
/// their `plain` is `None` (shared shards, or a processor without `popcnt`). Not inlined, and
/// given what the counting needs in registers (`counting` is the caller's closure, a pointer or
/// two): the usual path then keeps nothing across a call of the lane count's feature check, and
/// builds nothing on the stack for this one.
#[inline(never)]
fn count_checked<'s>(
    counting: impl FnOnce() -> (Shards<'s>, Option<NonZeroU64>),
    mask: u64,
    errors: u64,
    service: u64,
    start: u64,
) {
    let (shards, poll_start) = counting();
    shards.count(lane_count(mask), errors, Timing { service, start, poll_start }, shards.alone);
}

/// Serves a packet with a registered service and counts it in the shards `counting` gives, after
/// the service returned: for the service (with its service time, and its queue wait since the
/// poll's start if `counting` knows it) and for its buffer. Called inside the refusal scope of
/// the packet's sink (the caller's), where refusals the service counts
/// ([`crate::observe::count`]) go to the registry's and the buffer's counters, and where the
/// panic filter knows a panic is a service's ([`catch_in_scope`]). Inlined: into a listener
/// thread's dispatcher, whose `counting` reads its shards and poll start where they are kept,
/// after the service (not before it, kept on the stack across the call).
#[inline(always)]
pub(super) fn serve_entry<'s>(
    entry: &Entry,
    packet: &mut PacketRequest<'_>,
    counting: impl Fn() -> (Shards<'s>, Option<NonZeroU64>),
) {
    let start = ticks();
    let errors = match &entry.handler {
        Handler::Lane(handler) => serve_lanes_in_scope(entry, packet, &**handler),
        Handler::Packet(service) => {
            // In the scope too (as the lane path): no hook check, no service depth a packet.
            if let Err(panic) = catch_in_scope(|| service.serve(packet)) {
                error_limited!("service {} panicked ({panic}); packet answered with errors", entry.name);
                reply_error_all(packet, ErrorCode::ServicePanicked);
                let lanes = lane_count(packet.activemask());
                crate::observe::scope::count_n(Reason::HandlerPanic, lanes);
                lanes
            } else {
                u64::from(packet.error_lanes())
            }
        }
    };
    let end = ticks();
    let (shards, poll_start) = counting();
    let service = end.wrapping_sub(start);
    match shards.plain {
        Some(popcnt) => {
            let lanes = popcnt.lane_count(packet.activemask());
            shards.count(lanes, errors, Timing { service, start, poll_start }, true);
        }
        None => count_checked(counting, packet.activemask(), errors, service, start),
    }
}

/// The lanes in `mask` ([`hostcall_core::lane_count`]: the processor's `popcnt` where it has
/// one).
#[inline]
fn lane_count(mask: u64) -> u64 {
    u64::from(hostcall_core::lane_count(mask))
}
