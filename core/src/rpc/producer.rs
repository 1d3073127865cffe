//! The hostcall producer path over LLVM-RPC ports ([`Claimed`], [`Submitted`], [`Completed`]):
//! what lets every emulated wave, listener, service and hostile-device test of the other
//! protocols run on an RPC buffer too. A claim opens a port; the submit writes the header with
//! the service's opcode ([`opcode_of`]) and sends the lanes as they were written; the wait is the
//! client's wait for the host's flip; releasing closes the port.

use super::client::{Client, ClientPort};
use super::packet::opcode_of;
use super::view::View;
use crate::host::ErrorCode;
use crate::lane::{lanes, ClaimedPacket, CompletedPacket, SubmittedPacket, REPLY_WORDS, SLOT_WORDS};

impl<'a> View<'a> {
    /// Producer: claims a port for a hostcall through the view's lock bits, as
    /// [`Client::claim`] does (each port tried once from `start`; `None` when every port is
    /// locked or still the host's).
    ///
    /// # Panics
    /// If the view has no lock bits ([`View::with_locks`]): a view the host serves has none, and
    /// claiming without them would let two waves take one port.
    #[inline(always)]
    pub fn claim(&self, start: u32) -> Option<Claimed<'a>> {
        let client = Client::of(*self)
            .expect("an RPC view without the client's lock bits cannot claim (View::with_locks)");
        client.claim(start)
    }
}

/// An open port, lanes being written. Dropping it closes the port unsent.
#[derive(Debug)]
#[must_use = "dropping a claimed port closes it unsent"]
pub struct Claimed<'a> {
    port: Option<ClientPort<'a>>,
}

impl<'a> Claimed<'a> {
    /// A claim of an open port.
    #[inline(always)]
    pub(super) fn new(port: ClientPort<'a>) -> Self {
        Self { port: Some(port) }
    }

    /// The port's index.
    pub fn port(&self) -> u32 {
        self.port.as_ref().map_or(u32::MAX, ClientPort::port)
    }
}

/// A sent call waiting for the host. Dropping it leaks the port (it stays locked: the host's
/// answer may still come, and no other call may take the port meanwhile).
#[derive(Debug)]
#[must_use = "wait for the reply"]
pub struct Submitted<'a> {
    port: Option<ClientPort<'a>>,
}

/// An answered call. Dropping it closes the port.
#[derive(Debug)]
#[must_use = "read the reply before releasing the port"]
pub struct Completed<'a> {
    port: Option<ClientPort<'a>>,
}

impl<'a> ClaimedPacket for Claimed<'a> {
    type Submitted = Submitted<'a>;

    #[inline(always)]
    fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]) {
        if let Some(port) = self.port.as_mut() {
            port.write_lane(lane as u32, words);
        }
    }

    #[inline(always)]
    fn submit(mut self, service: u32, activemask: u64) -> Submitted<'a> {
        let mut port = self.port.take();
        if let Some(port) = port.as_mut() {
            port.send_as(opcode_of(service), activemask);
        }
        Submitted { port }
    }
}

impl<'a> SubmittedPacket for Submitted<'a> {
    type Completed = Completed<'a>;

    #[inline(always)]
    fn wait_until(mut self, mut keep_waiting: impl FnMut(u32) -> bool) -> Result<Completed<'a>, Self> {
        let Some(port) = self.port.as_mut() else {
            return Err(self);
        };
        let mut polls = 0u32;
        loop {
            if port.poll() {
                return Ok(Completed { port: self.port.take() });
            }
            polls = polls.saturating_add(1);
            if !keep_waiting(polls) {
                return Err(self);
            }
            crate::sync::spin_hint();
        }
    }
}

impl CompletedPacket for Completed<'_> {
    #[inline(always)]
    fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        // Only the reply's words: the rest of the lane buffer may lie in a line of its own
        // (`ClientPort::recv_first`).
        self.port.as_ref().map_or([0; REPLY_WORDS], |port| port.read_first(lane as u32))
    }

    /// LLVM-RPC carries no error flag: as in the phase protocol, only the reply words say
    /// (whether some lane of the call has an error reply).
    #[inline(always)]
    fn host_error(&self) -> bool {
        let mask = self.port.as_ref().map_or(0, ClientPort::mask);
        lanes(mask).any(|lane| ErrorCode::from_reply(self.reply(lane)).is_some())
    }
}

impl Drop for Completed<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(port) = self.port.take() {
            port.close();
        }
    }
}

impl Drop for Claimed<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(port) = self.port.take() {
            port.close();
        }
    }
}
