//! The listener's add/remove API: which buffers it serves, each held (claimed process-wide,
//! with its per-buffer counters in the registry) while it is served.

use super::registration::{BufferRegistration, Memory};
use super::state::HostState;
use super::{relay, BufferOptions, Listener, Shared, MAX_BUFFERS};
use crate::buffer::HostcallBuffer;
use crate::error::Error;
use crate::threads::claims::{self, Claim};
use hostcall_core::{AnyState, Poller, Protocol};
use std::sync::Arc;

impl Listener {
    /// Starts serving what `registration` says (while running is fine): a [`HostcallBuffer`]
    /// (`listener.add(buffer)`), or memory the caller manages ([`BufferRegistration::raw`]); all
    /// of it or a [`range`](BufferRegistration::range) of its packets; with its options.
    ///
    /// Refused with [`Error::AlreadyServed`] if another listener serves it (or memory of it, or
    /// for a range, a range overlapping this one), whichever API added it there;
    /// [`Error::Unsupported`] for a range of a protocol that cannot be split (the stack protocol),
    /// or a buffer given a device other than its own; [`Error::ShutDown`] once shut down; and as
    /// the poller refuses (a buffer it serves already, [`MAX_BUFFERS`] reached, a layout that does
    /// not fit).
    pub fn add(&self, registration: impl Into<BufferRegistration>) -> Result<(), Error> {
        let registration = registration.into();
        let (protocol, base, device) = (registration.protocol(), registration.base(), registration.device()?);
        let BufferRegistration { memory, range, options, .. } = registration;
        if range.is_some() && !protocol.range_capable() {
            return Err(Error::Unsupported(
                "only a phase-, line- or RPC-protocol buffer can be split between listeners".into(),
            ));
        }
        let (len, num_packets, owned_buffer) = match memory {
            Memory::Buffer(buffer) => (buffer.len(), buffer.num_packets(), Some(buffer)),
            Memory::Raw { len, num_packets, .. } => (len, num_packets, None),
        };
        let mut owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_shut_down() {
            return Err(Error::ShutDown);
        }
        let (claim, packets) = match &range {
            None => (claims::claim_whole(base, len, self.shared.id)?, num_packets),
            Some(range) => (
                claims::claim_range(base, len, range.clone(), self.shared.id)?,
                u64::from(range.end.saturating_sub(range.start)),
            ),
        };
        let registration = Registration { protocol, base, len, num_packets, range, device };
        // SAFETY: an owned buffer is kept alive by `owned` until `remove_buffer` has stopped
        // serving it (or the listener's threads, which hold `owned` through `Shared`, have
        // ended), and a `HostcallBuffer` is accessed only atomically; raw memory is kept so by
        // `BufferRegistration::raw`'s contract. For a range, the claim just taken keeps every
        // other listener off its packets.
        unsafe { self.shared.serve(claim, registration, packets, &options) }?;
        if let Some(buffer) = owned_buffer {
            owned.insert(base, buffer);
        }
        Ok(())
    }

    /// Stops serving `buffer`. When this returns the listener no longer touches it. It waits for
    /// the buffer's thread's next poll (a thread holds its buffers between polls and lets go
    /// before it naps), or, if that thread is inside a stuck call the listener could not relieve
    /// it of, until the call returns. Refused from the listener's own thread (a service), where it
    /// would wait for its own poll.
    pub fn remove_buffer(&self, buffer: &HostcallBuffer) -> Result<Arc<HostcallBuffer>, Error> {
        self.refuse_own_thread()?;
        let base = buffer.as_ptr() as usize;
        // Not under `owned`: the removal may wait for a stuck call of this buffer.
        self.shared.unserve(base)?;
        let mut owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        Ok(owned.remove(&base).expect("registered buffers are owned"))
    }

    /// The counters of the LLVM-RPC buffer at `base`'s host in this listener (`None`: not an
    /// RPC buffer served here). Its refusals are also in [`Listener::stats`], by reason.
    pub fn rpc_counters(&self, base: *const u8) -> Option<crate::services::rpc::RpcCounters> {
        let served = self.shared.served.lock().unwrap_or_else(|p| p.into_inner());
        served.get(&(base as usize)).and_then(|entry| entry.state.rpc_counters())
    }

    /// Stops serving memory added with a [`BufferRegistration::raw`]. Refused from the
    /// listener's own thread, as [`Listener::remove_buffer`].
    pub fn remove_raw(&self, base: *mut u8) -> Result<(), Error> {
        self.refuse_own_thread()?;
        self.shared.unserve(base as usize)
    }
}

/// What a served buffer holds (dropped when it is no longer served).
pub(super) struct Served {
    pub(super) claim: Claim,
    /// Its per-buffer counters in the registry.
    pub(super) counted: crate::observe::ServedBuffer,
    /// How to register it with a poller (again, on another seat).
    pub(super) registration: Registration,
    /// The seat whose thread serves it.
    pub(super) home: u64,
    /// Being removed: not handed to another seat.
    pub(super) leaving: bool,
    /// The buffer's host state, given to the poller that serves it (and to the next one, when a
    /// relief hands it on).
    pub(super) state: HostState,
}

impl Served {
    /// Registers the buffer with `poller`, with its host state.
    ///
    /// # Safety
    /// As for [`Registration::register`]; and no other poller drains the buffer from now on,
    /// this one's drains coming after the last drain of the poller that drained it before (the
    /// host state is the drains' alone: `rpc.rs`, "Why a turn needs no lock").
    pub(super) unsafe fn register(&self, poller: &Poller<MAX_BUFFERS>) -> Result<(), Error> {
        // SAFETY: forwarded from this function's contract; `self` keeps the state until the
        // buffer is no longer served (`let_go`, after its removal from this poller, or after its
        // thread ended).
        unsafe { self.registration.register(poller, self.state.any()) }
    }
}

/// What a poller registration of a served buffer is made of.
#[derive(Clone, Debug)]
pub(super) struct Registration {
    protocol: Protocol,
    base: usize,
    len: usize,
    num_packets: u64,
    /// The packets served, for a buffer shared with other listeners.
    range: Option<std::ops::Range<u32>>,
    device: u32,
}

impl Registration {
    /// Registers the buffer with `poller`, with host state `state`.
    ///
    /// # Safety
    /// As for [`hostcall_core::Registration::new`]: the memory stays valid, accessed only
    /// atomically, until it is removed from `poller` or `poller` drains it no more; for a range,
    /// no other poller serves an index of it. And as for
    /// [`hostcall_core::Registration::with_state`] for `state`.
    pub(super) unsafe fn register(&self, poller: &Poller<MAX_BUFFERS>, state: AnyState) -> Result<(), Error> {
        let Self { protocol, base, len, num_packets, device, .. } = *self;
        let num_packets = protocol.packet_count(num_packets).map_err(|e| Error::Layout(e.into()))?;
        // SAFETY: forwarded from this function's contract.
        let registration =
            unsafe { hostcall_core::Registration::new(protocol, base as *mut u8, len, num_packets) }?
                .on_device(device);
        let registration = match self.range.clone() {
            Some(range) => registration.range(range),
            None => registration,
        };
        // SAFETY: forwarded from this function's contract.
        poller.add(unsafe { registration.with_state(state) }).map_err(Error::from)
    }
}

impl Shared {
    /// The seat serving the buffers now.
    pub(super) fn active(&self) -> Arc<relay::Seat> {
        self.crew.lock().unwrap_or_else(|p| p.into_inner()).active.clone()
    }

    /// Starts serving `registration` on the active seat, holding `claim` and the buffer's counters
    /// (`packets` of its packets served here) until it is removed.
    ///
    /// # Safety
    /// As for [`Registration::register`], until [`Shared::unserve`] for it returns or the
    /// listener's threads have ended.
    unsafe fn serve(
        &self,
        claim: Claim,
        registration: Registration,
        packets: u64,
        options: &BufferOptions,
    ) -> Result<(), Error> {
        let Registration { protocol, base, num_packets, .. } = registration;
        let counted = self.services.count_buffer(base, protocol, num_packets);
        let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
        // Under `served`: no relief moves buffers meanwhile.
        let active = self.active();
        // Owned by the entry and handed to the poller with the registration (`state.rs`).
        let state = HostState::new(protocol, base, num_packets, packets, options, &self.services);
        let entry = Served { claim, counted, registration, home: active.id, leaving: false, state };
        // SAFETY: forwarded from this function's contract; a new registration: no poller drains
        // it yet. On an error the entry (and its host state) is dropped: no poller has it.
        unsafe { entry.register(&active.poller) }?;
        log::info!("{}: serving buffer {base:#x} ({protocol:?}, {packets} packets)", self.config.thread_name);
        served.insert(base, entry);
        Ok(())
    }

    /// Stops serving the buffer at `base`: when this returns no thread of the listener touches it;
    /// its claim is released, its counters left. Waits for its thread's next poll (the thread
    /// keeps its poll session's pins between polls, and drops them before it naps); a buffer whose
    /// thread is inside a stuck call and was not relieved: until that call returns.
    fn unserve(&self, base: usize) -> Result<(), Error> {
        let not_registered = Error::Poller(hostcall_core::PollerError::NotRegistered { base });
        let seat = {
            let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
            let Some(entry) = served.get_mut(&base) else {
                // Let go of when its thread ended after a shutdown: removing it still works.
                let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner()).remove(&base);
                return if ended { Ok(()) } else { Err(not_registered) };
            };
            entry.leaving = true; // stays on its seat from here
            let crew = self.crew.lock().unwrap_or_else(|p| p.into_inner());
            let home = entry.home;
            let seat = std::iter::once(&crew.active).chain(&crew.stuck).find(|s| s.id == home).cloned();
            match seat {
                Some(seat) => seat,
                None => {
                    let entry = served.remove(&base); // its thread has ended
                    drop((crew, served));
                    self.let_go(entry);
                    return Ok(());
                }
            }
        };
        let removed = seat.poller.remove(base as *mut u8);
        let entry = self.served.lock().unwrap_or_else(|p| p.into_inner()).remove(&base);
        self.let_go(entry);
        log::info!("{}: no longer serving buffer {base:#x}", self.config.thread_name);
        removed.map_err(Error::from)
    }

    /// Lets go of what a buffer no longer served held (called without the listener's locks):
    /// when no listener of the registry serves it any more, the services forget it
    /// ([`PacketService::forget_buffer`](crate::dispatch::registry::PacketService::forget_buffer)),
    /// and then its claim is released (so a buffer added at its address later, here or by
    /// another listener, starts with nothing of it).
    pub(super) fn let_go(&self, entry: Option<Served>) {
        let Some(Served { claim, counted, registration, state, .. }) = entry else { return };
        // The host state first: an RPC buffer's files closed and calls dropped now.
        drop(state);
        if counted.release() {
            self.services.forget_buffer(registration.base);
        }
        drop(claim);
    }
}
