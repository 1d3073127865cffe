//! Where a refusal is counted: the registry and buffer of the packet being served, found through
//! a thread-local set for the time a service runs.
//!
//! A lane handler sees only its lane's words, and the built-in services are written without a
//! handle on the registry that dispatches them; so the dispatcher enters a [`Scope`] around each
//! service call, and [`count`] (from anywhere in the service, on the same thread) adds to that
//! packet's counters. Outside a scope (a service called directly, in a test) a count goes
//! nowhere.

use super::buffers::BufferTally;
use super::reason::{Reason, ReasonTally};
use std::cell::Cell;
use std::ptr;

/// The counters a refusal on this thread goes to while a packet is served. A listener thread's
/// dispatcher keeps one and points it at each packet's buffer ([`Sink::set_buffer`]), so that
/// entering a scope is a pointer swap, nothing built.
#[derive(Debug)]
pub(crate) struct Sink<'a> {
    /// The registry's (every listener that dispatches through it).
    registry: &'a ReasonTally,
    /// The packet's buffer's, null if its listener did not register it: valid for every use of
    /// the sink until the next `set_buffer` (its contract).
    buffer: Cell<*const BufferTally>,
}

impl<'a> Sink<'a> {
    /// A sink of `registry` and `buffer`.
    pub(crate) fn new(registry: &'a ReasonTally, buffer: Option<&'a BufferTally>) -> Self {
        Self { registry, buffer: Cell::new(buffer.map_or(ptr::null(), ptr::from_ref)) }
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

    fn add(&self, reason: Reason, n: u64) {
        self.registry.add(reason, n);
        if let Some(buffer) = self.buffer() {
            buffer.reasons.add(reason, n);
        }
    }
}

thread_local! {
    /// The sink of the scope this thread is in, null outside any. Only [`Scope`] writes it, and
    /// it restores the previous value when dropped, so the pointer is valid while it is set.
    static CURRENT: Cell<*const Sink<'static>> = const { Cell::new(ptr::null()) };
}

/// While alive, [`count_n`] on this thread adds to its sink (tied to the borrow of the sink).
pub(crate) struct Scope<'s> {
    previous: *const Sink<'static>,
    _sink: std::marker::PhantomData<&'s Sink<'s>>,
}

impl<'s> Scope<'s> {
    /// Enters the scope of `sink`, until the returned guard is dropped.
    #[inline]
    pub(crate) fn enter(sink: &'s Sink<'s>) -> Self {
        let erased = (sink as *const Sink<'s>).cast::<Sink<'static>>();
        let previous = CURRENT.with(|current| current.replace(erased));
        Self { previous, _sink: std::marker::PhantomData }
    }
}

impl Drop for Scope<'_> {
    #[inline]
    fn drop(&mut self) {
        // Restores the outer scope's sink (or null), also when the service panicked.
        let _ = CURRENT.try_with(|current| current.set(self.previous));
    }
}

/// Whether this thread is inside a scope (a service call of a dispatcher): the panic filter
/// (`dispatch/panics.rs`) keeps quiet about a panic there.
pub(crate) fn inside() -> bool {
    CURRENT.try_with(|current| !current.get().is_null()).unwrap_or(false)
}

/// Counts `n` of `reason` in the counters of the packet being served on this thread (its
/// registry's and its buffer's); nothing outside a service call.
pub(crate) fn count_n(reason: Reason, n: u64) {
    let _ = CURRENT.try_with(|current| {
        let sink = current.get();
        if !sink.is_null() {
            // SAFETY: a non-null pointer was set by `Scope::enter` from a live borrow, and the
            // guard of that borrow resets it before the borrow ends.
            unsafe { &*sink }.add(reason, n);
        }
    });
}

/// Counts one log line suppressed by the rate limit in the registry of the packet being served.
pub(crate) fn count_suppressed_log() {
    let _ = CURRENT.try_with(|current| {
        let sink = current.get();
        if !sink.is_null() {
            // SAFETY: as in `count_n`.
            unsafe { &*sink }.registry.suppressed_log();
        }
    });
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
