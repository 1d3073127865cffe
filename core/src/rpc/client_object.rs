//! The client object device code expects (`rpc::Client`, the device global
//! [`CLIENT_SYMBOL`](super::CLIENT_SYMBOL)): built by the host over the buffer's *device*
//! address and copied into the symbol before the first launch, as LLVM's loader, the offload
//! plugin and ROCm clr do.

use super::layout::Layout;
use super::version::{CLIENT_OBJECT_SIZE, CLIENT_SYMBOL};
use crate::view::GeometryError;
use core::fmt;

/// Byte offsets inside the client object (`rpc::Process<false>` on every target: `port_count`,
/// padding, four pointers, the lock words).
pub mod offsets {
    /// `port_count: u32`.
    pub const PORT_COUNT: usize = 0;
    /// `inbox: *const u32` (the host's mailbox).
    pub const INBOX: usize = 8;
    /// `outbox: *mut u32` (the client's mailbox).
    pub const OUTBOX: usize = 16;
    /// `header: *mut Header`.
    pub const HEADER: usize = 24;
    /// `packet: *mut Buffer`.
    pub const PACKET: usize = 32;
    /// `lock: u32[LOCK_WORDS]` (zero: no port held).
    pub const LOCK: usize = 40;
}

/// The client object's bytes for a buffer of `ports` ports at device address `device_base`
/// (the lane count does not enter: it is the device's warp width).
///
/// ```
/// use hostcall_core::rpc::{client_object, CLIENT_OBJECT_SIZE};
/// let object = client_object(64, 0x7000_0000).unwrap();
/// assert_eq!(object.len(), CLIENT_OBJECT_SIZE);
/// assert_eq!(u32::from_le_bytes(object[0..4].try_into().unwrap()), 64);
/// assert_eq!(u64::from_le_bytes(object[16..24].try_into().unwrap()), 0x7000_0000 + 4 * 64);
/// ```
pub fn client_object(ports: u32, device_base: u64) -> Result<[u8; CLIENT_OBJECT_SIZE], GeometryError> {
    let layout = Layout::new(ports, 1)?;
    let mut object = [0u8; CLIENT_OBJECT_SIZE];
    object[offsets::PORT_COUNT..offsets::PORT_COUNT + 4].copy_from_slice(&ports.to_le_bytes());
    let pointers = [
        (offsets::INBOX, layout.host_mailbox),
        (offsets::OUTBOX, layout.device_mailbox),
        (offsets::HEADER, layout.headers),
        (offsets::PACKET, layout.buffers),
    ];
    for (at, offset) in pointers {
        let address = device_base.wrapping_add(offset as u64);
        object[at..at + 8].copy_from_slice(&address.to_le_bytes());
    }
    Ok(object)
}

/// The device symbol's size differs from [`CLIENT_OBJECT_SIZE`]: the device image was built
/// against another `rpc.h` (another port limit, or the older pointer symbol).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientSymbolMismatch {
    /// The symbol's size in the device image.
    pub symbol_size: u64,
}

impl fmt::Display for ClientSymbolMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "device symbol {CLIENT_SYMBOL} has {} bytes, this host builds {CLIENT_OBJECT_SIZE}: the device \
             code was built against another rpc.h",
            self.symbol_size
        )
    }
}

impl core::error::Error for ClientSymbolMismatch {}

/// Checks the size of the device's [`CLIENT_SYMBOL`] (as the runtime's symbol lookup reports
/// it) before the host copies its object there.
///
/// ```
/// use hostcall_core::rpc::check_client_symbol;
/// assert!(check_client_symbol(552).is_ok());
/// assert!(check_client_symbol(8).is_err()); // the older `__llvm_libc_rpc_client` pointer
/// ```
pub fn check_client_symbol(symbol_size: u64) -> Result<(), ClientSymbolMismatch> {
    if symbol_size == CLIENT_OBJECT_SIZE as u64 {
        Ok(())
    } else {
        Err(ClientSymbolMismatch { symbol_size })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(object: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(object[at..at + 8].try_into().unwrap())
    }

    /// The pointers as `rpc::Client(port_count, buffer)` computes them, for P = 4096 (the
    /// loader's geometry): inbox at 0, outbox at 4P, headers at 8P, packets at 24P.
    #[test]
    fn pointers_match_the_process_constructor() {
        let base = 0x7f00_0000_0000;
        let object = client_object(4096, base).unwrap();
        assert_eq!(u32::from_le_bytes(object[0..4].try_into().unwrap()), 4096);
        assert_eq!(&object[4..8], &[0; 4]);
        assert_eq!(word(&object, offsets::INBOX), base);
        assert_eq!(word(&object, offsets::OUTBOX), base + 4 * 4096);
        assert_eq!(word(&object, offsets::HEADER), base + 8 * 4096);
        assert_eq!(word(&object, offsets::PACKET), base + 24 * 4096);
        assert!(object[offsets::LOCK..].iter().all(|&b| b == 0));
        assert_eq!(offsets::LOCK + 4 * super::super::version::LOCK_WORDS, CLIENT_OBJECT_SIZE);
        assert_eq!(client_object(0, base), Err(GeometryError::PortCount(0)));
        assert_eq!(client_object(4097, base), Err(GeometryError::PortCount(4097)));
    }
}
