//! LLVM libc's GPU RPC for runtimes in C: the buffer's size and the client object to copy into
//! the device's `__llvm_rpc_client` (`hostcall_core::rpc`).

use crate::status::{
    guard, status, Failure, HOSTCALL_ERR_NULL, HOSTCALL_ERR_PACKET_COUNT, HOSTCALL_ERR_RPC_CLIENT_SIZE,
};
use hostcall_core::rpc::{buffer_size, check_client_symbol, client_object, CLIENT_OBJECT_SIZE};
use std::ffi::{c_int, c_void};

/// Bytes of an LLVM-RPC buffer of `ports` ports and `lanes` lanes; 0 for a refused geometry
/// (see `hostcall_last_error()`).
#[no_mangle]
pub extern "C" fn hostcall_rpc_buffer_size(ports: u32, lanes: u32) -> usize {
    guard(
        |_| 0,
        || {
            buffer_size(ports, lanes).ok_or_else(|| {
                Failure::new(HOSTCALL_ERR_PACKET_COUNT, format!("{ports} ports of {lanes} lanes: refused"))
            })
        },
    )
}

/// Writes the client object of a buffer of `ports` ports at device address `device_base` into
/// `out` (at least `CLIENT_OBJECT_SIZE` bytes). `symbol_size` is the device symbol's size, or 0
/// when the runtime does not know it; another size than the object's is refused.
///
/// # Safety
/// `out` is null or points to `out_len` writable bytes (any alignment).
#[no_mangle]
pub unsafe extern "C" fn hostcall_rpc_client_object(
    ports: u32,
    device_base: u64,
    symbol_size: u64,
    out: *mut c_void,
    out_len: usize,
) -> c_int {
    status(|| {
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        if out_len < CLIENT_OBJECT_SIZE {
            let message = format!("out has {out_len} bytes, the client object {CLIENT_OBJECT_SIZE}");
            return Err(Failure::new(HOSTCALL_ERR_NULL, message));
        }
        if symbol_size != 0 {
            check_client_symbol(symbol_size)
                .map_err(|e| Failure::new(HOSTCALL_ERR_RPC_CLIENT_SIZE, e.to_string()))?;
        }
        let object = client_object(ports, device_base)
            .map_err(|e| Failure::new(HOSTCALL_ERR_PACKET_COUNT, e.to_string()))?;
        // SAFETY: `out` points to at least `out_len >= CLIENT_OBJECT_SIZE` writable bytes
        // (contract, length checked above); a byte copy needs no alignment.
        unsafe { std::ptr::copy_nonoverlapping(object.as_ptr(), out.cast::<u8>(), CLIENT_OBJECT_SIZE) };
        Ok(())
    })
}
