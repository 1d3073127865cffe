//! Where a refusal is counted: the registry and buffer of the packet being served, found through
//! a thread-local set for the time a service runs.
//!
//! A lane handler sees only its lane's words, and the built-in services are written without a
//! handle on the registry that dispatches them; so the dispatcher enters a scope around each
//! service call, and [`count`] (from anywhere in the service, on the same thread) adds to that
//! packet's counters. Outside a scope (a service called directly, in a test) a count goes
//! nowhere.
//!
//! The thread-local points at a [`Sink`], and a sink counts only while a scope of it is open
//! (its `serving` count is above 0). A listener thread's dispatcher keeps one sink for its life
//! ([`OwnSink`]) and leaves the thread-local pointing at it between packets, so that a packet of
//! the same dispatcher as the last one enters its scope with one compare and an add, not a swap
//! of the thread-local kept on the stack and restored (the swap is what a [`Scope`] does, and
//! what an own sink does when another sink took the thread-local since its last packet).
//!
//! [`count`]: super::count

use super::buffers::BufferTally;
use super::reason::{Reason, ReasonTally};
use std::cell::Cell;
use std::ptr;

/// The counters a refusal on this thread goes to while a packet is served. A listener thread's
/// dispatcher keeps one and points it at each packet's buffer ([`Sink::set_buffer`]), so that
/// entering a scope builds nothing.
#[derive(Debug)]
pub(crate) struct Sink<'a> {
    /// The registry's (every listener that dispatches through it).
    registry: &'a ReasonTally,
    /// The packet's buffer's, null if its listener did not register it: valid for every use of
    /// the sink until the next `set_buffer` (its contract).
    buffer: Cell<*const BufferTally>,
    /// How many scopes of this sink are open: the packets it is serving now (more than one: a
    /// service dispatched through the same dispatcher again). It counts only while above 0.
    serving: Cell<u32>,
}

impl<'a> Sink<'a> {
    /// A sink of `registry` and `buffer`.
    pub(crate) fn new(registry: &'a ReasonTally, buffer: Option<&'a BufferTally>) -> Self {
        Self { registry, buffer: Cell::new(buffer.map_or(ptr::null(), ptr::from_ref)), serving: Cell::new(0) }
    }

    /// The buffer's tally, if the packet's buffer is counted.
    #[inline]
    pub(crate) fn buffer(&self) -> Option<&BufferTally> {
        // SAFETY: null or valid for every use of the sink until the next `set_buffer`
        // (`new` takes a reference that outlives the sink; `set_buffer` states it).
        unsafe { self.buffer.get().as_ref() }
    }

    /// Points the sink at the tally `buffer` (null: the buffer is not counted).
    ///
    /// # Safety
    /// `buffer` is null or points to a tally that stays valid for every use of this sink (a
    /// scope entered with it, a reference [`Sink::buffer`] returns) until the next `set_buffer`;
    /// no reference `buffer` returned before this call is used after it.
    #[inline]
    pub(crate) unsafe fn set_buffer(&self, buffer: *const BufferTally) {
        self.buffer.set(buffer);
    }

    /// How many packets this sink is serving now (see `serving`).
    #[inline]
    pub(crate) fn serving(&self) -> u32 {
        self.serving.get()
    }

    fn add(&self, reason: Reason, n: u64) {
        self.registry.add(reason, n);
        if let Some(buffer) = self.buffer() {
            buffer.reasons.add(reason, n);
        }
    }
}

thread_local! {
    /// The sink of the scope this thread is in, or an own sink left here idle (`serving` 0)
    /// between its dispatcher's packets, or null. While a scope is open, this is the innermost
    /// one's sink: every scope entered saves what it replaced if that counts (its `serving` above
    /// 0) and puts it back when it ends. So a pointer here is valid: a scope's sink while the
    /// scope lives (restored before the borrow of it ends), an own sink until it is dropped
    /// (which takes it off), and a saved sink that counts is one whose scope, further down this
    /// thread's stack, is still open. A sink that does not count is only read for its
    /// `serving`, never saved.
    static CURRENT: Cell<*const Sink<'static>> = const { Cell::new(ptr::null()) };
}

/// What a scope entered in place of the thread-local's sink puts back when it ends: the sink it
/// replaced if that sink counts (its scope is open further down the stack), else null (an idle
/// own sink, which may be dropped while this scope is open, is not kept).
fn saved(replaced: *const Sink<'static>) -> *const Sink<'static> {
    // SAFETY: a pointer in `CURRENT` is valid (see there).
    match unsafe { replaced.as_ref() } {
        Some(sink) if sink.serving.get() > 0 => replaced,
        _ => ptr::null(),
    }
}

/// While alive, [`count_n`] on this thread adds to its sink (tied to the borrow of the sink).
pub(crate) struct Scope<'s> {
    sink: &'s Sink<'s>,
    previous: *const Sink<'static>,
}

impl<'s> Scope<'s> {
    /// Enters the scope of `sink`, until the returned guard is dropped.
    #[inline]
    pub(crate) fn enter(sink: &'s Sink<'s>) -> Self {
        sink.serving.set(sink.serving.get() + 1);
        let erased = ptr::from_ref(sink).cast::<Sink<'static>>();
        let previous = saved(CURRENT.with(|current| current.replace(erased)));
        Self { sink, previous }
    }
}

impl Drop for Scope<'_> {
    #[inline]
    fn drop(&mut self) {
        self.sink.serving.set(self.sink.serving.get() - 1);
        // Restores the outer scope's sink (or null), also when the service panicked.
        let _ = CURRENT.try_with(|current| current.set(self.previous));
    }
}

/// A dispatcher's sink for its life: boxed, so that the thread-local may keep pointing at it
/// between packets while the dispatcher is moved; taken off the thread-local when dropped. Not
/// `Send` (its sink holds a raw pointer): dropped on the thread whose thread-local it is in.
#[derive(Debug)]
pub(crate) struct OwnSink<'a>(Box<Sink<'a>>);

impl<'a> OwnSink<'a> {
    /// An own sink of `registry`, pointed at no buffer yet.
    pub(crate) fn new(registry: &'a ReasonTally) -> Self {
        Self(Box::new(Sink::new(registry, None)))
    }

    fn erased(&self) -> *const Sink<'static> {
        ptr::from_ref(&*self.0).cast::<Sink<'static>>()
    }

    /// Whether the thread-local points at this sink: then [`OwnSink::enter`] is all a packet's
    /// scope needs; else [`OwnSink::claim`] first.
    #[inline]
    pub(crate) fn is_current(&self) -> bool {
        CURRENT.with(|current| current.get() == self.erased())
    }

    /// Points the thread-local at this sink, until the returned guard is dropped: then the sink
    /// replaced is put back if it counts (an open scope's), else this one is left there (idle,
    /// for the next packet's [`OwnSink::is_current`]).
    #[cold]
    pub(crate) fn claim(&self) -> Claim {
        Claim(saved(CURRENT.with(|current| current.replace(self.erased()))))
    }

    /// Opens a scope of this sink (the thread-local points at it: [`OwnSink::is_current`], or
    /// inside a [`OwnSink::claim`]), until the returned guard is dropped, also by an unwind.
    #[inline]
    pub(crate) fn enter(&self) -> Serving<'_> {
        self.0.serving.set(self.0.serving.get() + 1);
        Serving(&self.0.serving)
    }
}

impl<'a> std::ops::Deref for OwnSink<'a> {
    type Target = Sink<'a>;
    fn deref(&self) -> &Sink<'a> {
        &self.0
    }
}

impl Drop for OwnSink<'_> {
    fn drop(&mut self) {
        let erased = self.erased();
        let _ = CURRENT.try_with(|current| {
            if current.get() == erased {
                current.set(ptr::null());
            }
        });
    }
}

/// The thread-local taken by an own sink ([`OwnSink::claim`]): puts back the sink it replaced
/// (null: leaves the own sink there) when dropped, also by an unwind.
pub(crate) struct Claim(*const Sink<'static>);

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.0.is_null() {
            let _ = CURRENT.try_with(|current| current.set(self.0));
        }
    }
}

/// An open scope of an own sink ([`OwnSink::enter`]): closed when dropped.
pub(crate) struct Serving<'s>(&'s Cell<u32>);

impl Drop for Serving<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Calls `count` with the sink counts go to now (the thread-local's, if it counts); whether
/// there was one.
#[inline]
fn with_counting(count: impl FnOnce(&Sink<'_>)) -> bool {
    let Ok(sink) = CURRENT.try_with(Cell::get) else { return false };
    // SAFETY: a pointer in `CURRENT` is valid (see there); the reference does not outlive this
    // call, made while the scope that makes the sink count is open.
    match unsafe { sink.as_ref() } {
        Some(sink) if sink.serving.get() > 0 => {
            count(sink);
            true
        }
        _ => false,
    }
}

/// Whether this thread is inside a scope (a service call of a dispatcher): the panic filter
/// (`dispatch/panics.rs`) keeps quiet about a panic there.
pub(crate) fn inside() -> bool {
    with_counting(|_| {})
}

/// Counts `n` of `reason` in the counters of the packet being served on this thread (its
/// registry's and its buffer's); nothing outside a service call.
pub(crate) fn count_n(reason: Reason, n: u64) {
    with_counting(|sink| sink.add(reason, n));
}

/// Counts one log line suppressed by the rate limit in the registry of the packet being served.
pub(crate) fn count_suppressed_log() {
    with_counting(|sink| sink.registry.suppressed_log());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_go_to_the_innermost_scope_and_nowhere_outside() {
        count_n(Reason::BadFree, 1); // no scope: nowhere
        let (outer, inner) = (ReasonTally::default(), ReasonTally::default());
        let outer_sink = Sink::new(&outer, None);
        {
            let _outer = Scope::enter(&outer_sink);
            count_n(Reason::BadFree, 1);
            {
                let inner_sink = Sink::new(&inner, None);
                let _inner = Scope::enter(&inner_sink);
                count_n(Reason::BadFree, 5);
                count_suppressed_log();
            }
            count_n(Reason::BadFree, 1);
        }
        count_n(Reason::BadFree, 1);
        assert_eq!(outer.snapshot().0.get(Reason::BadFree), 2);
        assert_eq!(
            inner.snapshot(),
            (
                {
                    let t = ReasonTally::default();
                    t.add(Reason::BadFree, 5);
                    t.snapshot().0
                },
                1
            )
        );
    }

    /// An own sink stays in the thread-local between its packets, counts only while it serves
    /// one, and gives the thread-local back to a scope open around its packet.
    #[test]
    fn an_own_sink_counts_only_while_serving_and_gives_back_an_open_scope() {
        let (mine, outer) = (ReasonTally::default(), ReasonTally::default());
        let own = OwnSink::new(&mine);
        assert!(!own.is_current());
        {
            let _claim = own.claim();
            let _serving = own.enter();
            assert!(inside());
            count_n(Reason::BadFree, 1);
        }
        assert!(own.is_current(), "left in place for the next packet");
        assert!(!inside());
        count_n(Reason::BadFree, 1); // idle: nowhere
        {
            let _serving = own.enter();
            count_n(Reason::BadFree, 2);
        }
        let outer_sink = Sink::new(&outer, None);
        {
            let _outer = Scope::enter(&outer_sink);
            assert!(!own.is_current());
            {
                let _claim = own.claim();
                let _serving = own.enter();
                count_n(Reason::BadFree, 4);
            }
            assert!(!own.is_current(), "the open scope's sink put back");
            count_n(Reason::BadFree, 8);
        }
        assert!(!inside(), "the idle own sink is not put back");
        count_n(Reason::BadFree, 1); // nowhere
        {
            let _claim = own.claim();
        }
        drop(own);
        assert!(CURRENT.with(Cell::get).is_null(), "a dropped own sink is taken off");
        assert_eq!(mine.snapshot().0.get(Reason::BadFree), 7);
        assert_eq!(outer.snapshot().0.get(Reason::BadFree), 8);
    }

    #[test]
    fn a_panic_inside_a_scope_restores_the_outer_one() {
        let tally = ReasonTally::default();
        let sink = Sink::new(&tally, None);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _scope = Scope::enter(&sink);
            panic!("service panicked");
        }));
        assert!(caught.is_err());
        count_n(Reason::HandlerPanic, 1);
        assert_eq!(tally.snapshot().0.total(), 0, "the scope ended with the panic");
    }
}
