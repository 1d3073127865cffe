//! The error replies ([`ERROR_REPLY`], [`ErrorCode`]) and the built-in service ids, on which one
//! of them depends (a DEVMEM caller's error reply is `[0, code]`).

use core::fmt;

/// Reserved: always answered with an error.
pub const RESERVED: u32 = 0;
/// Call a host function: `slot[0]` = `fn(out: *mut [u64; 2], in: *const [u64; 7])`, `slot[1..8]` its inputs.
pub const FUNCTION_CALL: u32 = 1;
/// printf through a message stream.
pub const PRINTF: u32 = 2;
/// Allocate (`slot[0] = 0`, `slot[1]` = bytes) or free (`slot[0]` = address) device-visible memory.
pub const DEVMEM: u32 = 3;
/// Address-sanitizer report, handled once per packet.
pub const SANITIZER: u32 = 4;

/// The first reply word of an error reply. The second word is the [`ErrorCode`].
pub const ERROR_REPLY: u64 = u64::MAX;

/// Why the host answered a lane with an error reply `[ERROR_REPLY, code]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum ErrorCode {
    /// No service is registered under the packet's id.
    UnknownService = 1,
    /// The service's handler panicked.
    ServicePanicked = 2,
    /// The request was malformed for its service.
    BadRequest = 3,
    /// The service refused the request (a limit, an unknown address, no memory).
    Refused = 4,
    /// The host is shutting down and answers without serving.
    ShuttingDown = 5,
}

impl ErrorCode {
    /// The reply words `[ERROR_REPLY, code]`.
    pub fn reply(self) -> [u64; 2] {
        [ERROR_REPLY, self as u64]
    }

    /// The error reply for a lane that called `service`: [`ErrorCode::reply`], except for
    /// [`DEVMEM`], whose device code (ROCm's device allocator) takes any non-zero word 0 as the
    /// address of its block and checks only for null: there it is `[0, code]`. Every error reply
    /// the host writes goes through here, so no failure (an unknown or unregistered service, a
    /// panic, a shutdown) ever hands a DEVMEM caller `ERROR_REPLY` as a pointer.
    ///
    /// ```
    /// use hostcall_core::{DEVMEM, PRINTF};
    /// use hostcall_core::ErrorCode;
    /// assert_eq!(ErrorCode::UnknownService.reply_for(DEVMEM), [0, 1]);
    /// assert_eq!(ErrorCode::UnknownService.reply_for(PRINTF), [u64::MAX, 1]);
    /// ```
    pub fn reply_for(self, service: u32) -> [u64; 2] {
        match service {
            DEVMEM => [0, self as u64],
            _ => self.reply(),
        }
    }

    /// Decodes a reply: `Some(code)` if it is an error reply this project writes.
    ///
    /// ```
    /// use hostcall_core::ErrorCode;
    /// assert_eq!(ErrorCode::from_reply(ErrorCode::Refused.reply()), Some(ErrorCode::Refused));
    /// assert_eq!(ErrorCode::from_reply([7, 3]), None);
    /// ```
    pub fn from_reply(reply: [u64; 2]) -> Option<Self> {
        if reply[0] != ERROR_REPLY {
            return None;
        }
        Some(match reply[1] {
            1 => Self::UnknownService,
            2 => Self::ServicePanicked,
            3 => Self::BadRequest,
            4 => Self::Refused,
            5 => Self::ShuttingDown,
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::UnknownService => "unknown service",
            Self::ServicePanicked => "service panicked",
            Self::BadRequest => "malformed request",
            Self::Refused => "request refused",
            Self::ShuttingDown => "host shutting down",
        })
    }
}
