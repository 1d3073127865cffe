//! FUNCTION_CALL (id 1, PROTOCOL.md section 3): the device sends the address of a host function
//! and its inputs; the listener calls it. Exists only after the `unsafe`
//! [`Services::enable_function_calls`].

use crate::error::Error;
use crate::serve::registry::Services;
use hostcall_core::dispatch::FUNCTION_CALL;
use hostcall_core::ErrorCode;

impl Services {
    /// Registers FUNCTION_CALL (id 1): `slot[0]` is the address of a host function
    /// `extern "C" fn(out: *mut [u64; 2], in: *const [u64; 7])`, `slot[1..8]` its inputs.
    ///
    /// # Safety
    /// The listener will call whatever address a device sends. Every device that can reach a
    /// buffer of this listener must be trusted to send only addresses of functions of exactly that
    /// signature, valid for the life of the listener. A null address is refused with
    /// [`ErrorCode::BadRequest`]; nothing else can be checked.
    pub unsafe fn enable_function_calls(&self) -> Result<(), Error> {
        self.register_lane(FUNCTION_CALL, "function-call", |request| {
            type HostFn = unsafe extern "C" fn(*mut [u64; 2], *const [u64; 7]);
            if request[0] == 0 {
                return Err(ErrorCode::BadRequest);
            }
            // SAFETY: the caller of `enable_function_calls` promised that every non-null address
            // a device sends is a function of this signature; null is refused above.
            let function: HostFn = unsafe { std::mem::transmute::<usize, HostFn>(request[0] as usize) };
            let mut out = [0u64; 2];
            let mut inputs = [0u64; 7];
            inputs.copy_from_slice(&request[1..]);
            // SAFETY: as above; `out` and `inputs` are valid for the call.
            unsafe { function(&mut out, &inputs) };
            Ok(out)
        })
    }
}
