//! Services written in C.

use crate::status::{status, Failure, HOSTCALL_ERR_NOT_REGISTERED, HOSTCALL_ERR_UNKNOWN_REASON};
use hostcall_core::{ErrorCode, SLOT_WORDS};
use hostcall_rs::observe::Reason;
use std::ffi::{c_int, c_void};

/// A C service: reads one lane's 8 request words, writes its 2 reply words, returns 0, or an
/// error code 1..=5 (`HOSTCALL_ERROR_*`) to answer the lane with an error reply (any other
/// non-zero value answers `HOSTCALL_ERROR_REFUSED`). To say why it refused, it calls
/// [`hostcall_count_reason`] before returning.
pub type HostcallServiceFn =
    unsafe extern "C" fn(request: *const u64, reply: *mut u64, ctx: *mut c_void) -> c_int;

/// A registered C service: the function and its context.
struct CService {
    id: u32,
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
        // Behind the level check: nothing is formatted unless a trace listener is set.
        log::trace!("c-service-{}: lane request {:#x} answered {result}", self.id, request[0]);
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
        let service = CService { id, function, ctx };
        let name = format!("c-service-{id}");
        crate::memory::runtime()?.services().register_lane(id, &name, move |r| service.serve(r))?;
        Ok(())
    })
}

/// Unregisters service `id`; later calls to it are answered with `HOSTCALL_ERROR_UNKNOWN_SERVICE`.
/// A call being served may still be running when this returns. Returns `HOSTCALL_OK` or
/// `HOSTCALL_ERR_NOT_REGISTERED` if `id` was not registered.
#[no_mangle]
pub extern "C" fn hostcall_unregister_service(id: u32) -> c_int {
    status(|| {
        if crate::memory::runtime()?.services().unregister(id) {
            Ok(())
        } else {
            Err(Failure::new(HOSTCALL_ERR_NOT_REGISTERED, format!("service {id} is not registered")))
        }
    })
}

/// Counts one refusal of `reason` (`HOSTCALL_REASON_*`) for the packet being served on this
/// thread, in the statistics of its listener and of its buffer: a C service calls it for each
/// lane it refuses, before returning its error code, as a Rust service calls
/// `hostcall::observe::count`. Outside a service call it counts nothing. Returns `HOSTCALL_OK`, or
/// `HOSTCALL_ERR_UNKNOWN_REASON` for a number that names no reason.
#[no_mangle]
pub extern "C" fn hostcall_count_reason(reason: u32) -> c_int {
    status(|| {
        let reason = usize::try_from(reason).ok().and_then(|i| Reason::ALL.get(i)).ok_or_else(|| {
            Failure::new(HOSTCALL_ERR_UNKNOWN_REASON, format!("{reason} is not a HOSTCALL_REASON_*"))
        })?;
        hostcall_rs::observe::count(*reason);
        Ok(())
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
