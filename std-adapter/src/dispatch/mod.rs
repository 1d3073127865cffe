//! Dispatch: from a packet's service id to the code that answers it, on the host.
//!
//! - [`registry`]: [`Services`](registry::Services), from a service id to the code that answers it;
//! - [`REMEMBERED_UNKNOWN_IDS`]: the bound on the registry's record of unknown service ids.
//!
//! Nothing here starts a thread: the listener threads that call it are in [`crate::threads`].

pub(crate) mod panics;
pub(crate) mod registry;
mod unknown_ids;

pub use unknown_ids::REMEMBERED_UNKNOWN_IDS;
