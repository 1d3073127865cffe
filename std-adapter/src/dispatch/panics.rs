//! Panics in services: caught, counted and logged as one rate-limited record each, never printed
//! by the process's panic hook.
//!
//! A device chooses what a service is asked, so it may make one panic on every lane of every
//! packet. Rust's default panic hook prints each panic (and, with `RUST_BACKTRACE=1`, a backtrace
//! of dozens of lines) on stderr before `catch_unwind` sees it: 2,000 such packets printed
//! 195,001 lines, 162 MB with backtraces, and the listener served about 6 packets a second.
//!
//! So the first service call (or the first listener thread's dispatcher) installs, once per
//! process, a panic hook that filters: a panic on a thread inside a service call (inside
//! [`catch_service_panic`], a thread-local depth, or inside the refusal scope the dispatcher
//! enters around every packet, `observe/scope.rs`) is not printed; its message and location are kept for the catch site, which counts it
//! ([`Reason::HandlerPanic`](crate::observe::Reason)) and logs it through the rate limit (at most
//! [`WARNINGS_PER_WINDOW`](crate::rate_limit::WARNINGS_PER_WINDOW) lines per window, the rest
//! counted). Every other panic goes to the hook that was installed before, unchanged. A program
//! that sets its own hook after that replaces this one: then its hook sees
//! service panics too (they are still caught, counted and logged).

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe, PanicHookInfo};
use std::sync::Once;

/// The longest panic message kept for the log record (a service may format device data into it).
const MAX_MESSAGE: usize = 200;

thread_local! {
    /// How many service calls this thread is inside (a service may call another).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The last panic the filtering hook kept on this thread.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `call` (one service call) with its panic caught: `Err(description)` of the panic, which
/// the panic hook did not print.
#[inline]
pub(crate) fn catch_service_panic<R>(call: impl FnOnce() -> R) -> Result<R, String> {
    install_filter();
    DEPTH.with(|depth| depth.set(depth.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(call));
    DEPTH.with(|depth| depth.set(depth.get() - 1));
    outcome.map_err(|payload| caught(payload.as_ref()))
}

/// Runs `call` (a service call made inside a refusal scope, [`crate::observe::scope::Scope`],
/// after [`install_filter`]) with its panic caught, as [`catch_service_panic`] does: the filter
/// takes a thread inside a scope as inside a service call, so this path pays neither the depth
/// count nor the check that the hook is installed.
#[inline]
pub(crate) fn catch_in_scope<R>(call: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(call)).map_err(|payload| caught(payload.as_ref()))
}

/// The description of a caught panic: what the filter kept, or else its payload's text.
#[cold]
fn caught(payload: &(dyn std::any::Any + Send)) -> String {
    LAST.with(|last| last.borrow_mut().take())
        .unwrap_or_else(|| bounded(payload_text(payload).unwrap_or("a panic without a message")))
}

/// Installs the filtering hook, once per process, in front of the hook in place now (the first
/// service call does, and so does every listener thread's dispatcher when it is made).
pub(crate) fn install_filter() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // `try_with`: a panic while this thread's locals are being destroyed is no service's.
            if DEPTH.try_with(Cell::get).unwrap_or(0) > 0 || crate::observe::scope::inside() {
                let _ = LAST.try_with(|last| *last.borrow_mut() = Some(describe(info)));
            } else {
                previous(info);
            }
        }));
    });
}

/// "message at file:line", bounded.
fn describe(info: &PanicHookInfo<'_>) -> String {
    let message = bounded(payload_text(info.payload()).unwrap_or("a panic without a message"));
    match info.location() {
        Some(at) => format!("{message} at {}:{}", at.file(), at.line()),
        None => message,
    }
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// At most [`MAX_MESSAGE`] bytes of `text` (cut at a character boundary).
fn bounded(text: &str) -> String {
    let mut end = text.len().min(MAX_MESSAGE);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_panic_is_caught_with_its_message_and_location() {
        let error = catch_service_panic(|| -> u32 { panic!("lane {} is odd", 3) }).unwrap_err();
        assert!(error.starts_with("lane 3 is odd at "), "{error}");
        assert!(error.contains("panics.rs:"), "{error}");
        assert_eq!(catch_service_panic(|| 7), Ok(7));
        assert_eq!(DEPTH.with(Cell::get), 0);
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "é".repeat(300);
        let error = catch_service_panic(|| -> () { std::panic::panic_any(long.clone()) }).unwrap_err();
        assert!(error.len() < MAX_MESSAGE + 60 && error.starts_with("éé"), "{error}");
    }
}
