//! Where the built-in services are installed on a registry: one `enable_*` method of
//! [`Services`] for each, the service itself in its own module.

use std::sync::Arc;

use hostcall_core::{DEVMEM, FUNCTION_CALL, PRINTF, SANITIZER};

use super::devmem::{DevMem, DevMemLimits};
use super::function_call::call_host_function;
use super::message::{MessageLimits, MessageService, SharedMessageService};
use super::printf::{printf_reply, PrintfSink};
use super::sanitizer::{SanitizerConfig, SanitizerService};
use crate::dispatch::registry::Services;
use crate::error::Error;
use crate::memory::DeviceMemory;

impl Services {
    /// Registers FUNCTION_CALL (id 1): `slot[0]` is the address of a host function
    /// `extern "C" fn(out: *mut [u64; 2], in: *const [u64; 7])`, `slot[1..8]` its inputs.
    ///
    /// # Safety
    /// The listener will call whatever address a device sends. Every device that can reach a
    /// buffer of this listener must be trusted to send only addresses of functions of exactly that
    /// signature, valid for the life of the listener. A null address is refused with
    /// [`ErrorCode::BadRequest`](hostcall_core::ErrorCode::BadRequest); nothing else can be
    /// checked.
    pub unsafe fn enable_function_calls(&self) -> Result<(), Error> {
        self.register_lane(FUNCTION_CALL, "function-call", |request| {
            // SAFETY: the caller of `enable_function_calls` promised that every non-null address
            // a device sends is a function of this signature.
            unsafe { call_host_function(request) }
        })
    }

    /// Registers PRINTF (id 2): message streams assembled per lane, each message bound to the
    /// buffer and lane that began it, within `limits` (see [`crate::services::message`]),
    /// formatted like C's printf within the default
    /// [`PrintfLimits`](super::printf::PrintfLimits) and written to `sink` (`printf::StdStreams` for the process's stdout and
    /// stderr). Each lane's END is answered with the number of bytes printed, or -1.
    pub fn enable_printf(
        &self,
        sink: impl PrintfSink + Send + 'static,
        limits: MessageLimits,
    ) -> Result<(), Error> {
        let mut sink = sink;
        let service =
            SharedMessageService::new(MessageService::with_limits(limits, move |message: &[u64]| {
                printf_reply(message, &mut sink)
            }));
        self.register_packet(PRINTF, "printf", service)
    }

    /// Registers DEVMEM (id 3): `slot[0] = 0` allocates `slot[1]` bytes of `memory` and answers the
    /// device address in reply word 0; `slot[0] != 0` frees that address (reply `[0, 0]`). Blocks
    /// are aligned as ROCm's device allocator needs, within `limits`; every failure answers a
    /// null address (see [`crate::services::devmem`]).
    pub fn enable_devmem(&self, memory: Arc<dyn DeviceMemory>, limits: DevMemLimits) -> Result<(), Error> {
        self.register_packet(DEVMEM, "devmem", DevMem::new(memory, limits))
    }

    /// Registers SANITIZER (id 4) with `config`. [`Error::ServiceTaken`] if id 4 is registered.
    pub fn enable_sanitizer(&self, config: SanitizerConfig) -> Result<(), Error> {
        self.register_packet(SANITIZER, "sanitizer", SanitizerService::new(config))
    }
}
