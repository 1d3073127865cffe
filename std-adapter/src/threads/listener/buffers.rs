//! The listener's add/remove API: which buffers it serves, each held (claimed process-wide,
//! counted in the registry's lane capacity) while it is served.

use super::{BufferOptions, Listener};
use crate::buffer::HostcallBuffer;
use crate::error::Error;
use crate::threads::claims;
use hostcall_core::Protocol;
use std::sync::Arc;

impl Listener {
    /// Starts serving `buffer` (while running is fine). Its packets report the buffer's
    /// [`device_ordinal`](HostcallBuffer::device_ordinal) to services. Refused with
    /// [`Error::AlreadyServed`] if another listener serves it (or memory of it), whichever API
    /// added it there.
    pub fn add_buffer(&self, buffer: Arc<HostcallBuffer>) -> Result<(), Error> {
        self.add_buffer_with(buffer, &BufferOptions::default())
    }

    /// [`Listener::add_buffer`], served as `options` say (an LLVM-RPC buffer's policy, budgets
    /// and output: [`BufferOptions::rpc`]).
    pub fn add_buffer_with(&self, buffer: Arc<HostcallBuffer>, options: &BufferOptions) -> Result<(), Error> {
        let mut owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_shut_down() {
            return Err(Error::ShutDown);
        }
        let claim = claims::claim_whole(buffer.as_ptr() as usize, buffer.len(), self.shared.id)?;
        let (base, n) = (buffer.as_ptr(), buffer.num_packets());
        let served = self.shared.hold(claim, buffer.protocol(), base, n, n);
        // SAFETY: `owned` keeps the buffer alive until `remove_buffer` has removed it from the
        // poller; a `HostcallBuffer` is accessed only atomically.
        unsafe {
            let (base, len, n) = (buffer.as_ptr(), buffer.len(), buffer.num_packets());
            self.shared.poller.add_on_device(buffer.protocol(), base, len, n, buffer.device_ordinal())
        }?;
        self.shared.note_served(buffer.as_ptr(), served, buffer.protocol(), n, options);
        owned.insert(buffer.as_ptr() as usize, buffer);
        Ok(())
    }

    /// Starts serving only the packets `range` of the phase- or line-protocol buffer `buffer`
    /// ([`Protocol::range_capable`]), so that
    /// several listeners (threads) can share one buffer, each serving its own disjoint range
    /// ([`crate::threads::pool::ListenerPool`] does the split). The caller makes sure no other listener
    /// serves an index of `range`, and that every packet of the buffer is served by some
    /// listener. The stack protocol cannot be split ([`Error::Unsupported`]). Refused with
    /// [`Error::AlreadyServed`] if another listener serves the buffer whole, or a range of it
    /// overlapping `range`.
    pub fn add_buffer_range(
        &self,
        buffer: Arc<HostcallBuffer>,
        range: std::ops::Range<u32>,
    ) -> Result<(), Error> {
        self.add_buffer_range_with(buffer, range, &BufferOptions::default())
    }

    /// [`Listener::add_buffer_range`], served as `options` say. An LLVM-RPC buffer's range is
    /// a range of ports, whose calls this listener's host of the buffer follows.
    pub fn add_buffer_range_with(
        &self,
        buffer: Arc<HostcallBuffer>,
        range: std::ops::Range<u32>,
        options: &BufferOptions,
    ) -> Result<(), Error> {
        if !buffer.protocol().range_capable() {
            return Err(Error::Unsupported(
                "only a phase-, line- or RPC-protocol buffer can be split between listeners".into(),
            ));
        }
        let mut owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_shut_down() {
            return Err(Error::ShutDown);
        }
        let claim =
            claims::claim_range(buffer.as_ptr() as usize, buffer.len(), range.clone(), self.shared.id)?;
        let packets = u64::from(range.end.saturating_sub(range.start));
        let (base, n) = (buffer.as_ptr(), buffer.num_packets());
        let served = self.shared.hold(claim, buffer.protocol(), base, packets, n);
        // SAFETY: `owned` keeps the buffer alive until `remove_buffer` has removed it from the
        // poller; a `HostcallBuffer` is accessed only atomically; the caller keeps the ranges of
        // the listeners serving this buffer disjoint (see above).
        unsafe {
            let (base, len, n) = (buffer.as_ptr(), buffer.len(), buffer.num_packets());
            let (protocol, device) = (buffer.protocol(), buffer.device_ordinal());
            self.shared.poller.add_range_on_device(protocol, base, len, n, range, device)
        }?;
        self.shared.note_served(buffer.as_ptr(), served, buffer.protocol(), n, options);
        owned.insert(buffer.as_ptr() as usize, buffer);
        Ok(())
    }

    /// Stops serving `buffer`. When this returns the listener no longer touches it. Refused from
    /// the listener's own thread (a service), where it would wait for its own poll.
    pub fn remove_buffer(&self, buffer: &HostcallBuffer) -> Result<Arc<HostcallBuffer>, Error> {
        self.refuse_own_thread()?;
        let mut owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        self.shared.poller.remove(buffer.as_ptr())?;
        self.shared.forget_served(buffer.as_ptr());
        Ok(owned.remove(&(buffer.as_ptr() as usize)).expect("registered buffers are owned"))
    }

    /// Starts serving a stack-protocol buffer in memory the caller manages (the C ABI's path).
    ///
    /// # Safety
    /// `base..base + len` must stay valid, and be accessed only atomically, until
    /// [`Listener::remove_raw`] for it returns or the listener is dropped.
    ///
    /// Refused with [`Error::AlreadyServed`] if another listener serves memory of it.
    pub unsafe fn add_raw(&self, base: *mut u8, len: usize, num_packets: u64) -> Result<(), Error> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.add_raw_on_device(base, len, num_packets, 0) }
    }

    /// [`Listener::add_raw`] for a buffer of device `device` (the ordinal its packets report to
    /// services, as [`HostcallBuffer::with_device_ordinal`]).
    ///
    /// # Safety
    /// As for [`Listener::add_raw`].
    pub unsafe fn add_raw_on_device(
        &self,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        device: u32,
    ) -> Result<(), Error> {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            self.add_raw_protocol(Protocol::Stack, base, len, num_packets, device, &BufferOptions::default())
        }
    }

    /// [`Listener::add_raw_on_device`] for a buffer of any protocol, initialised for it, served
    /// as `options` say (an LLVM-RPC buffer's policy, budgets and output).
    ///
    /// # Safety
    /// As for [`Listener::add_raw`].
    pub unsafe fn add_raw_protocol(
        &self,
        protocol: Protocol,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        device: u32,
        options: &BufferOptions,
    ) -> Result<(), Error> {
        let _owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_shut_down() {
            return Err(Error::ShutDown);
        }
        let claim = claims::claim_whole(base as usize, len, self.shared.id)?;
        let served = self.shared.hold(claim, protocol, base, num_packets, num_packets);
        // SAFETY: forwarded from this function's contract.
        unsafe { self.shared.poller.add_on_device(protocol, base, len, num_packets, device) }?;
        self.shared.note_served(base, served, protocol, num_packets, options);
        Ok(())
    }

    /// The counters of the LLVM-RPC buffer at `base`'s host in this listener (`None`: not an
    /// RPC buffer served here). Its refusals are also in [`Listener::stats`], by reason.
    pub fn rpc_counters(&self, base: *const u8) -> Option<crate::services::rpc::RpcCounters> {
        self.shared.rpc.counters(base as usize)
    }

    /// Stops serving a buffer added with [`Listener::add_raw`]. Refused from the listener's own
    /// thread, as [`Listener::remove_buffer`].
    pub fn remove_raw(&self, base: *mut u8) -> Result<(), Error> {
        self.refuse_own_thread()?;
        self.shared.poller.remove(base)?;
        self.shared.forget_served(base);
        Ok(())
    }
}
