//! Dispatch: from a packet's service id to the code that answers it, on the host.
//!
//! - [`registry`]: [`Services`](registry::Services), from a service id to the code that answers it;
//! - [`unknown_ids`]: the registry's bounded record of unknown service ids;
//!
//! Nothing here starts a thread: the listener threads that call it are in [`crate::threads`].

pub(crate) mod panics;
pub mod registry;
pub mod unknown_ids;
