//! Serving buffers on host threads.
//!
//! - [`registry`]: [`Services`](registry::Services), from a service id to the code that answers it;
//! - [`listener`]: [`Listener`](listener::Listener), the thread that serves a set of buffers;
//! - [`pool`]: [`ListenerPool`](pool::ListenerPool), several listeners splitting the same buffers;
//! - [`capacity`]: [`LaneCapacity`](capacity::LaneCapacity), the lanes a registry's listeners
//!   serve (the bound on open messages);
//! - `claims`: the process-wide claims that keep one buffer on one listener at a time;
//! - [`unknown_ids`]: the registry's bounded record of unknown service ids;
//! - [`affinity`]: CPU lists and pinning listener threads near their device;
//! - [`devices`]: [`DeviceListeners`](devices::DeviceListeners), one pool per device (several
//!   GPUs, one process).

pub mod affinity;
pub mod capacity;
mod claims;
pub mod devices;
pub mod listener;
pub mod pool;
pub mod registry;
pub mod unknown_ids;
