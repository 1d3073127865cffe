//! The wait policy of the default runtime's listener: a preset, or explicit times in
//! microseconds (`hostcall::WaitPolicy`, "Wait policies" in the listener's docs).

use crate::status::{status, Failure, HOSTCALL_ERR_NULL, HOSTCALL_ERR_OPTIONS};
use hostcall_rs::{HostcallRuntime, WaitPolicy};
use std::ffi::c_int;
use std::time::Duration;

/// The default: naps from 50 µs doubling to 200 µs, timer slack 5 µs (`WaitPolicy::bounded_latency`).
pub const HOSTCALL_WAIT_BOUNDED_LATENCY: c_int = 0;
/// Never naps: polls in a loop, one core busy (`WaitPolicy::spinning`).
pub const HOSTCALL_WAIT_SPINNING: c_int = 1;
/// Naps from 1 ms doubling to 10 ms, the inherited timer slack (`WaitPolicy::power_saving`).
pub const HOSTCALL_WAIT_POWER_SAVING: c_int = 2;

/// `spin_polls` that never naps.
pub const HOSTCALL_WAIT_SPIN_FOREVER: u32 = u32::MAX;

/// Sets the default runtime's wait policy to `preset` (`HOSTCALL_WAIT_*`): the running listener
/// takes it before its next nap (woken to do so at once), and every later one starts with it.
/// May be called at any time, before the first enable or while buffers are enabled. Returns
/// `HOSTCALL_OK`, or `HOSTCALL_ERR_OPTIONS` for an unknown preset.
#[no_mangle]
pub extern "C" fn hostcall_set_wait_policy(preset: c_int) -> c_int {
    status(|| {
        let policy = match preset {
            HOSTCALL_WAIT_BOUNDED_LATENCY => WaitPolicy::bounded_latency(),
            HOSTCALL_WAIT_SPINNING => WaitPolicy::spinning(),
            HOSTCALL_WAIT_POWER_SAVING => WaitPolicy::power_saving(),
            other => return Err(Failure::new(HOSTCALL_ERR_OPTIONS, format!("unknown wait preset {other}"))),
        };
        HostcallRuntime::global().set_wait_policy(policy);
        Ok(())
    })
}

/// Sets the default runtime's wait policy from explicit values, applied as
/// [`hostcall_set_wait_policy`] applies a preset: `spin_polls` polls without work before the
/// first nap (`HOSTCALL_WAIT_SPIN_FOREVER`: never nap), the first nap `min_wait_us`, each further
/// one twice the last, never more than `max_wait_us` (the bound on how late a call that rings no
/// doorbell is polled), and the listener threads' timer slack `timer_slack_us` (0: leave the
/// slack they have). Returns `HOSTCALL_OK`, or `HOSTCALL_ERR_OPTIONS` if `min_wait_us` is
/// above `max_wait_us`.
#[no_mangle]
pub extern "C" fn hostcall_set_wait_times(
    spin_polls: u32,
    min_wait_us: u32,
    max_wait_us: u32,
    timer_slack_us: u32,
) -> c_int {
    status(|| {
        if min_wait_us > max_wait_us {
            return Err(Failure::new(
                HOSTCALL_ERR_OPTIONS,
                format!("min_wait_us {min_wait_us} is above max_wait_us {max_wait_us}"),
            ));
        }
        let micros = |us: u32| Duration::from_micros(u64::from(us));
        let policy = WaitPolicy::default()
            .with_spin_polls(spin_polls)
            .with_min_wait(micros(min_wait_us))
            .with_max_wait(micros(max_wait_us))
            .with_timer_slack((timer_slack_us > 0).then(|| micros(timer_slack_us)));
        HostcallRuntime::global().set_wait_policy(policy);
        Ok(())
    })
}

/// Reads the default runtime's wait policy into the four out-parameters, in the units of
/// [`hostcall_set_wait_times`] (times saturate at `UINT32_MAX` µs). Returns `HOSTCALL_OK`, or
/// `HOSTCALL_ERR_NULL` if any pointer is null.
///
/// # Safety
/// Each pointer must be null or valid for a write of a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn hostcall_get_wait_times(
    spin_polls: *mut u32,
    min_wait_us: *mut u32,
    max_wait_us: *mut u32,
    timer_slack_us: *mut u32,
) -> c_int {
    status(|| {
        let outs = [spin_polls, min_wait_us, max_wait_us, timer_slack_us];
        if outs.iter().any(|p| p.is_null()) {
            return Err(Failure::new(HOSTCALL_ERR_NULL, "an out-parameter is null"));
        }
        let policy = HostcallRuntime::global().wait_policy();
        let micros = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
        let values = [
            policy.spin_polls,
            micros(policy.min_wait),
            micros(policy.max_wait),
            policy.timer_slack.map_or(0, micros),
        ];
        for (out, value) in outs.into_iter().zip(values) {
            // SAFETY: not null (checked above), and valid for a write by the caller's contract;
            // written through the raw pointer, unaligned-tolerant.
            unsafe { out.write_unaligned(value) };
        }
        Ok(())
    })
}
