//! [`ParkingDoorbell`]: the host-memory doorbell, an [`AmdSignal`] that ROCm's device code can
//! ring, with a condition variable for a host that sleeps.

use crate::doorbell::signal::AmdSignal;
use crate::doorbell::{Doorbell, INIT};
use std::fmt;
use std::hint::spin_loop;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Loads of the value word [`Doorbell::wait`] spins through before it sleeps (one CPU pause
/// each: a few microseconds).
pub(crate) const WAIT_SPIN_LOADS: u32 = 128;
/// The first sleep of [`Doorbell::wait`] once the spin is over.
pub(crate) const WAIT_FIRST_NAP: Duration = Duration::from_micros(50);
/// The longest sleep of [`Doorbell::wait`] between two reads of the value word: the bound on how
/// late a waiting host notices a ring that woke nobody (a device's raw atomic add).
pub(crate) const WAIT_MAX_NAP: Duration = Duration::from_millis(1);

/// The host-memory doorbell: it owns a 64-byte, 64-aligned [`AmdSignal`] (a user signal, no
/// event mailbox) whose address is its [`Doorbell::handle`], so ROCm's device code, which treats
/// the handle as an `amd_signal_t`, rings it by its atomic add at +8.
///
/// **Ringing.** [`Doorbell::ring`] does what ROCm's device code does (the add at +8, release;
/// the mailbox store when one is set, see [`ParkingDoorbell::set_event_mailbox`]), then wakes a
/// sleeping host. The wake costs one load when nobody sleeps; the mutex is taken only to wake a
/// sleeper.
///
/// **Waiting.** Foreign device code adds to the value word and wakes nobody, so
/// [`Doorbell::wait`] polls the word: it first spins through `WAIT_SPIN_LOADS` loads, then
/// sleeps on a condition variable for `WAIT_FIRST_NAP`, doubling each time up to
/// `WAIT_MAX_NAP`, re-reading the word after each sleep. A [`Doorbell::ring`] wakes it at once;
/// a raw add is noticed within `WAIT_MAX_NAP` plus the OS's timer slack. A host waiting for
/// long thus wakes once per `WAIT_MAX_NAP`, where a wait that only slept until a wake-up would
/// miss device code's rings until its timeout.
///
/// **Napping.** [`Doorbell::nap`] (what a listener calls between polls) neither spins nor
/// re-reads: one sleep on the condition variable for the whole timeout, ended at once by a
/// [`Doorbell::ring`]; a raw add is seen when the nap ends (the listener's [`crate::WaitPolicy`]
/// bounds the nap). So an idle listener wakes once per nap, not once per `WAIT_MAX_NAP`.
///
/// ```
/// use hostcall::ParkingDoorbell;
/// use hostcall::{Doorbell, DOORBELL_INIT as INIT};
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use std::time::Duration;
///
/// let doorbell = ParkingDoorbell::new();
/// // What ROCm's device code does with the handle: an atomic add on the word at +8.
/// // SAFETY: the handle is the address of the doorbell's live, 64-aligned signal.
/// let value = unsafe { &*((doorbell.handle() + 8) as *const AtomicI64) };
/// value.fetch_add(1, Ordering::Release);
/// assert_eq!(doorbell.wait(INIT, Duration::from_secs(5)), INIT + 1);
/// ```
pub struct ParkingDoorbell {
    /// The signal device code rings; boxed, so its address (the handle) never moves.
    signal: Box<AmdSignal>,
    /// The mailbox address this host set (0: none): the only address [`Doorbell::ring`] stores
    /// to, whatever the shared word at +16 says.
    mailbox: AtomicU64,
    /// Whether a mailbox word that differs from `mailbox` has been reported.
    mailbox_warned: AtomicBool,
    /// Hosts inside `wait`'s sleep.
    sleepers: AtomicU32,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Default for ParkingDoorbell {
    fn default() -> Self {
        Self {
            signal: Box::new(AmdSignal::user(INIT as i64)),
            mailbox: AtomicU64::new(0),
            mailbox_warned: AtomicBool::new(false),
            sleepers: AtomicU32::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }
}

impl ParkingDoorbell {
    /// A doorbell at [`INIT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The signal object ([`Doorbell::handle`] is its address).
    pub fn signal(&self) -> &AmdSignal {
        &self.signal
    }

    /// Gives the signal an event mailbox, as an HSA interrupt signal has: after each add, ROCm's
    /// device code (and [`Doorbell::ring`]) stores `event_id` into the `u64` at `mailbox`.
    ///
    /// # Safety
    /// `mailbox` must be 8-aligned and valid for atomic writes of a `u64` until this doorbell is
    /// dropped, or until [`ParkingDoorbell::clear_event_mailbox`] has returned *and* every ring
    /// that may have begun before it (a [`Doorbell::ring`] on another thread, device code) has
    /// ended: the clear does not wait for rings in progress.
    pub unsafe fn set_event_mailbox(&self, mailbox: *const AtomicU64, event_id: u32) {
        // Relaxed: `store_mailbox` reads it only after its Acquire load of the shared word saw the
        // Release store below.
        self.mailbox.store(mailbox as u64, Ordering::Relaxed);
        // Relaxed: published by the Release store of the mailbox pointer below.
        self.signal.event_id.store(event_id, Ordering::Relaxed);
        // Release: pairs with the Acquire load in `ring` (device code reads the id after the
        // pointer, so the id must be visible first).
        self.signal.event_mailbox_ptr.store(mailbox as u64, Ordering::Release);
    }

    /// Removes the event mailbox: rings that begin after this store nowhere.
    pub fn clear_event_mailbox(&self) {
        // Release: pairs with the Acquire load in `store_mailbox`.
        self.signal.event_mailbox_ptr.store(0, Ordering::Release);
        // Relaxed: a ring that still reads the old shared word and then this 0 skips the store
        // (and reports a mismatch once); either way it stores nowhere new.
        self.mailbox.store(0, Ordering::Relaxed);
    }

    /// Step 2 of ROCm's ring: the mailbox store, if a mailbox is set.
    fn store_mailbox(&self) {
        // Acquire: pairs with the Release store in `set_event_mailbox`, so `event_id` is current.
        let mailbox = self.signal.event_mailbox_ptr.load(Ordering::Acquire);
        if mailbox == 0 {
            return;
        }
        // The host never trusts shared memory: device code could write any address at +16, so
        // the store goes only to the mailbox this host set.
        // Relaxed: ordered after `set_event_mailbox`'s stores by the Acquire load above.
        if mailbox != self.mailbox.load(Ordering::Relaxed) {
            // Relaxed: a once-only log flag, ordered with nothing.
            if !self.mailbox_warned.swap(true, Ordering::Relaxed) {
                log::warn!(
                    "doorbell {:#x}: mailbox word {mailbox:#x} was not set by this host; ignored",
                    self.handle()
                );
            }
            return;
        }
        let event_id = self.signal.event_id.load(Ordering::Relaxed); // Relaxed: see the Acquire above
                                                                     // SAFETY: `mailbox` is the address given to `set_event_mailbox`, whose contract keeps it
                                                                     // valid and 8-aligned until it is cleared.
        let word = unsafe { &*(mailbox as *const AtomicU64) };
        // Release: as ROCm's device code stores it (whoever reads the mailbox sees the add).
        word.store(u64::from(event_id), Ordering::Release);
    }

    fn wake_sleepers(&self) {
        // SeqCst fence: with the one in `sleep`, either the sleeper sees the new value before it
        // sleeps, or we see its `sleepers` increment here (the store-load pattern needs SeqCst).
        fence(Ordering::SeqCst);
        // Relaxed: ordered after the value's change by the fence above.
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            // Taking the lock orders the notify after the sleeper's check of the value (it checks
            // under the lock), so the wake cannot fall between its check and its sleep.
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.wake.notify_all();
        }
    }

    /// The sleeping part of `wait` and `nap`: naps on the condition variable from `first_nap`,
    /// doubling up to `WAIT_MAX_NAP` (or `first_nap` if longer), reading the value word after
    /// each, until it differs from `last_seen` or `deadline` passes.
    fn sleep(&self, last_seen: u64, deadline: Instant, first_nap: Duration) -> u64 {
        // Relaxed: ordered against `wake_sleepers`' load by the SeqCst fences.
        self.sleepers.fetch_add(1, Ordering::Relaxed);
        // SeqCst fence: pairs with the fence in `wake_sleepers` (see there).
        fence(Ordering::SeqCst);
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let (mut nap, longest) = (first_nap, first_nap.max(WAIT_MAX_NAP));
        let seen = loop {
            let now = self.value();
            let left = deadline.saturating_duration_since(Instant::now());
            if now != last_seen || left.is_zero() {
                break now;
            }
            guard = self.wake.wait_timeout(guard, nap.min(left)).unwrap_or_else(|p| p.into_inner()).0;
            nap = (nap * 2).min(longest);
        };
        drop(guard);
        // Relaxed: a stale count only costs a ring an unneeded lock and notify.
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        seen
    }
}

impl Doorbell for ParkingDoorbell {
    fn handle(&self) -> u64 {
        self.signal.handle()
    }

    fn ring(&self) {
        // Step 1 of ROCm's ring. Release: pairs with the Acquire load in `value`. (The packet
        // itself is published by the ready-stack push; the doorbell only says "look".)
        self.signal.value.fetch_add(1, Ordering::Release);
        self.store_mailbox();
        self.wake_sleepers();
    }

    fn value(&self) -> u64 {
        // Acquire: pairs with the Release add in `ring` (and with a device's release add).
        self.signal.value.load(Ordering::Acquire) as u64
    }

    fn wait(&self, last_seen: u64, timeout: Duration) -> u64 {
        let now = self.value();
        if now != last_seen || timeout.is_zero() {
            return now;
        }
        let deadline = Instant::now() + timeout;
        for _ in 0..WAIT_SPIN_LOADS {
            spin_loop();
            let now = self.value();
            if now != last_seen {
                return now;
            }
        }
        self.sleep(last_seen, deadline, WAIT_FIRST_NAP)
    }

    fn nap(&self, last_seen: u64, timeout: Duration) -> u64 {
        let now = self.value();
        if now != last_seen || timeout.is_zero() {
            return now;
        }
        self.sleep(last_seen, Instant::now() + timeout, timeout)
    }
}

impl fmt::Debug for ParkingDoorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParkingDoorbell")
            .field("handle", &format_args!("{:#x}", self.handle()))
            .field("value", &self.value())
            .finish()
    }
}
