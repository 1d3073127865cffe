//! FUNCTION_CALL (id 1, PROTOCOL.md section 3): the device sends the address of a host function
//! and its inputs; the listener calls it. Exists only after the `unsafe`
//! [`Services::enable_function_calls`](crate::Services::enable_function_calls).

use hostcall_core::ErrorCode;

/// One FUNCTION_CALL lane: `request[0]` is the address of a host function
/// `extern "C" fn(out: *mut [u64; 2], in: *const [u64; 7])`, `request[1..8]` its inputs; a null
/// address is refused with [`ErrorCode::BadRequest`].
///
/// # Safety
/// Every non-null `request[0]` is the address of a live function of exactly that signature (the
/// promise the caller of `enable_function_calls` makes for every device).
pub(crate) unsafe fn call_host_function(request: &[u64; 8]) -> Result<[u64; 2], ErrorCode> {
    type HostFn = unsafe extern "C" fn(*mut [u64; 2], *const [u64; 7]);
    if request[0] == 0 {
        crate::observe::count(crate::observe::Reason::BadRequest);
        return Err(ErrorCode::BadRequest);
    }
    // SAFETY: the caller's contract: every non-null address is a function of this signature;
    // null is refused above.
    let function: HostFn = unsafe { std::mem::transmute::<usize, HostFn>(request[0] as usize) };
    let mut out = [0u64; 2];
    let mut inputs = [0u64; 7];
    inputs.copy_from_slice(&request[1..]);
    // SAFETY: as above; `out` and `inputs` are valid for the call.
    unsafe { function(&mut out, &inputs) };
    Ok(out)
}
