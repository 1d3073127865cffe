//! The host threads that serve buffers, and where they run.
//!
//! - [`listener`]: [`Listener`](listener::Listener), the thread that serves a set of buffers;
//! - [`pool`]: [`ListenerPool`](pool::ListenerPool), several listeners splitting the same buffers;
//! - `claims`: the process-wide claims that keep one buffer on one listener at a time;
//! - [`affinity`]: CPU lists and pinning listener threads near their device;
//! - [`devices`]: [`DeviceListeners`](devices::DeviceListeners), one pool per device (several
//!   GPUs, one process).
//!
//! Each listener dispatches through a [`Services`](crate::dispatch::registry::Services) registry
//! ([`crate::dispatch`]).

pub mod affinity;
mod claims;
pub mod devices;
pub mod listener;
pub mod pool;
