//! The process-wide runtime (the one `hostcall::enable` and the C ABI's `enableHostcalls` use)
//! on HSA, against the HSA stand-in: as ROCm's runtime, one HSA signal for its listener, written
//! into every buffer as the doorbell, and DEVMEM blocks in the GPU's own memory.
//!
//! This file holds exactly one test: `HOSTCALL_HSA_LIB` must be set before the global runtime
//! first runs detection, and each integration-test file is its own process.
#![cfg(target_os = "linux")]

#[path = "common/hsa_standin.rs"]
mod standin;

use std::time::Duration;

use hostcall::{buffer_size, EmulatedWave, QueueId};
use hostcall_core::DEVMEM;
use hsa_sys::LIBRARY_ENV;
use standin::{with_watchdog, StandIn};

/// The u64 at `address + offset`.
fn word(address: u64, offset: u64) -> u64 {
    // SAFETY: the tests read words of live, 8-aligned buffers and signals only.
    unsafe { std::ptr::read_volatile((address + offset) as *const u64) }
}

#[test]
fn the_global_runtime_rings_one_hsa_signal_and_allocates_devmem_on_the_gpu() {
    with_watchdog(Duration::from_secs(120), || {
        let standin = StandIn::unconfigured("global");
        std::env::set_var(LIBRARY_ENV, standin.path());

        let n = 4;
        let mut first = vec![0u64; buffer_size(n).unwrap() / 8];
        let mut second = vec![0u64; buffer_size(n).unwrap() / 8];
        let (a, b) = (first.as_mut_ptr().cast::<u8>(), second.as_mut_ptr().cast::<u8>());
        // SAFETY: both vectors outlive their enablement and are touched only by the protocol.
        unsafe { hostcall::enable(a, n, QueueId(1)) }.unwrap();
        // SAFETY: as above.
        unsafe { hostcall::enable(b, n, QueueId(2)) }.unwrap();

        // One signal, made as ROCm's listener makes it, is the doorbell of both buffers.
        let signals = standin.signals();
        assert_eq!(signals.len(), 1, "one signal for the listener: {signals:?}");
        assert_eq!(word(a as u64, 16), signals[0]);
        assert_eq!(word(b as u64, 16), signals[0]);
        assert_eq!(word(signals[0], 0), 1, "an amd_signal_t of kind 1 (user signal)");
        let created = standin.calls("hsa_signal_create");
        assert!(created[0].contains("initial=1 consumers=0 "), "{created:?}");

        // DEVMEM, built in, allocates in the GPU's own memory; freeing returns it.
        // SAFETY: the buffer stays enabled while the wave is used.
        let wave = unsafe { EmulatedWave::new(a, n, 1) }.unwrap().with_timeout(Duration::from_secs(30));
        let address = wave.call(DEVMEM, |_| [0, 1 << 20, 0, 0, 0, 0, 0, 0]).unwrap().lane(0)[0];
        assert_ne!(address, 0);
        assert_eq!(address & 0xfff, 0, "ROCm's device allocator frees 4 KiB-aligned blocks as large ones");
        assert_eq!(standin.block_holding(address).pool, "gpu0.coarse");
        assert_eq!(wave.call(DEVMEM, |_| [address, 0, 0, 0, 0, 0, 0, 0]).unwrap().lane(0), [0, 0]);

        hostcall::disable(a, QueueId(1)).unwrap();
        hostcall::disable(b, QueueId(2)).unwrap();
        assert!(!hostcall::HostcallRuntime::global().is_running());
        drop((first, second));
    });
}
