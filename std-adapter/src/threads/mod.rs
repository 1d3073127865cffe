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

// Sharing CPUs between GPUs (`share`, `core_of`) serves only the CUDA backend.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod affinity;
mod claims;
pub(crate) mod devices;
pub(crate) mod listener;
pub(crate) mod pool;
