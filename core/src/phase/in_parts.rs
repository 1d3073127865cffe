//! A phase buffer allocated in parts, initialised: what the phase tests and the loom models run
//! on (loom's atomics cannot view raw memory, so the models allocate the structs themselves). The
//! one allocation of it: the core's sequential tests and the `loom-tests` crate (through
//! `__internal::PhaseBuffer`) both use this type.

extern crate std;
use super::layout::occupied_len;
use super::{Header, Parts, Prefix, View};
use crate::lane::Payload;
use crate::sync::AtomicU32;
use std::boxed::Box;

/// A phase buffer of `n` packets in separate allocations, one per array of [`Parts`].
#[derive(Debug)]
pub struct PhaseBuffer {
    pub(crate) prefix: Prefix,
    pub(crate) device_phase: Box<[AtomicU32]>,
    pub(crate) host_phase: Box<[AtomicU32]>,
    pub(crate) occupied: Box<[AtomicU32]>,
    pub(crate) headers: Box<[Header]>,
    pub(crate) payloads: Box<[Payload]>,
}

impl PhaseBuffer {
    /// `n` packets, initialised ([`View::init`] with address and doorbell 0): every one free.
    pub fn new(n: usize) -> Self {
        let words = |k: usize| (0..k).map(|_| AtomicU32::new(0)).collect();
        let buffer = Self {
            prefix: Prefix::default(),
            device_phase: words(n),
            host_phase: words(n),
            occupied: words(occupied_len(n)),
            headers: (0..n).map(|_| Header::default()).collect(),
            payloads: (0..n).map(|_| Payload::default()).collect(),
        };
        buffer.view().init(0, 0);
        buffer
    }

    /// The arrays, for [`View::from_parts`] (tests shorten one to see it refused).
    pub fn parts(&self) -> Parts<'_> {
        Parts {
            prefix: &self.prefix,
            device_phase: &self.device_phase,
            host_phase: &self.host_phase,
            occupied: &self.occupied,
            headers: &self.headers,
            payloads: &self.payloads,
        }
    }

    /// A view of the buffer.
    pub fn view(&self) -> View<'_> {
        View::from_parts(self.parts()).expect("the arrays of PhaseBuffer::new fit together")
    }

    /// An address unique to the buffer (its prefix's), to register it under (for the models: the
    /// unit tests reach the fields).
    #[cfg_attr(test, allow(dead_code))]
    pub fn base(&self) -> *mut u8 {
        &self.prefix as *const Prefix as *mut u8
    }

    /// Packet `index`'s payload (for the models, like [`PhaseBuffer::base`]).
    #[cfg_attr(test, allow(dead_code))]
    pub fn payload(&self, index: usize) -> &Payload {
        &self.payloads[index]
    }
}
