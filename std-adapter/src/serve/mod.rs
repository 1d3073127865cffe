//! Serving buffers on host threads.
//!
//! - [`registry`]: [`Services`](registry::Services), from a service id to the code that answers it;
//! - [`listener`]: [`Listener`](listener::Listener), the thread that serves a set of buffers;
//! - [`pool`]: [`ListenerPool`](pool::ListenerPool), several listeners splitting the same buffers.

pub mod listener;
pub mod pool;
pub mod registry;
