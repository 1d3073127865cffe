//! Services written in C.

use crate::status::{status, Failure};
use hostcall_rs::core::{ErrorCode, SLOT_WORDS};
use std::ffi::{c_int, c_void};

/// A C service: reads one lane's 8 request words, writes its 2 reply words, returns 0, or an
/// error code 1..=5 (`HOSTCALL_ERROR_*`) to answer the lane with an error reply (any other
/// non-zero value answers `HOSTCALL_ERROR_REFUSED`).
pub type HostcallServiceFn =
    unsafe extern "C" fn(request: *const u64, reply: *mut u64, ctx: *mut c_void) -> c_int;

/// A registered C service: the function and its context.
struct CService {
    function: HostcallServiceFn,
    ctx: *mut c_void,
}

// SAFETY: `hostcall_register_service`'s contract: the function may be called with `ctx` from
// any thread (the listener's), concurrently with the registering thread.
unsafe impl Send for CService {}
// SAFETY: as for `Send`.
unsafe impl Sync for CService {}

impl CService {
    fn serve(&self, request: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
        let mut reply = [0u64; 2];
        // SAFETY: `request` has 8 readable words and `reply` 2 writable ones, both valid for the
        // call; the registration contract makes the function callable here with `ctx`.
        let result = unsafe { (self.function)(request.as_ptr(), reply.as_mut_ptr(), self.ctx) };
        match result {
            0 => Ok(reply),
            1 => Err(ErrorCode::UnknownService),
            2 => Err(ErrorCode::ServicePanicked),
            3 => Err(ErrorCode::BadRequest),
            5 => Err(ErrorCode::ShuttingDown),
            _ => Err(ErrorCode::Refused),
        }
    }
}

/// Registers `function` (called with `ctx`) as service `id` on the default runtime; it serves
/// every buffer enabled with `hostcall_enable` or `hostcall_enable_ex`. Returns `HOSTCALL_OK`,
/// `HOSTCALL_ERR_NULL` or `HOSTCALL_ERR_SERVICE_TAKEN` (also for the built-in PRINTF and DEVMEM
/// ids: unregister one first to serve it yourself).
///
/// # Safety
/// `function` must be safe to call from the listener thread, with `ctx`, until the service is
/// unregistered (or forever), and must not unwind (no C++ exception may escape it).
#[no_mangle]
pub unsafe extern "C" fn hostcall_register_service(
    id: u32,
    function: Option<HostcallServiceFn>,
    ctx: *mut c_void,
) -> c_int {
    status(|| {
        let function = function.ok_or_else(|| Failure::null("function"))?;
        let service = CService { function, ctx };
        let name = format!("c-service-{id}");
        crate::memory::runtime()?.services().register_lane(id, &name, move |r| service.serve(r))?;
        Ok(())
    })
}

/// Unregisters service `id`; later calls to it are answered with `HOSTCALL_ERROR_UNKNOWN_SERVICE`.
/// A call being served may still be running when this returns. Returns `HOSTCALL_OK` or
/// `HOSTCALL_ERR_OTHER` if `id` was not registered.
#[no_mangle]
pub extern "C" fn hostcall_unregister_service(id: u32) -> c_int {
    status(|| {
        if crate::memory::runtime()?.services().unregister(id) {
            Ok(())
        } else {
            Err(Failure::new(crate::status::HOSTCALL_ERR_OTHER, format!("service {id} is not registered")))
        }
    })
}

/// Registers the built-in FUNCTION_CALL service (id 1) on the default runtime: a lane's `slot[0]`
/// is the address of a host function `void fn(uint64_t out[2], const uint64_t in[7])`, called
/// with `slot[1..8]`; `out` is the lane's reply. Off until this is called, because the listener
/// then calls whatever address a device sends. (PRINTF and DEVMEM need no call: they are served
/// from the start.) Returns `HOSTCALL_OK`, or `HOSTCALL_ERR_SERVICE_TAKEN` if id 1 is
/// registered already (by an earlier call, or by `hostcall_register_service`).
///
/// # Safety
/// Every device (kernel, emulated wave) that can reach a buffer of the default runtime must be
/// trusted to send only null (refused with `HOSTCALL_ERROR_BAD_REQUEST`) or addresses of
/// functions of exactly that signature, valid for the rest of the process, that do not unwind.
#[no_mangle]
pub unsafe extern "C" fn hostcall_enable_function_calls_unsafe() -> c_int {
    // SAFETY: forwarded from this function's contract.
    status(|| unsafe { crate::memory::runtime()?.enable_function_calls() }.map_err(Failure::from))
}
