//! `slow-service`: one call, on the adversary's buffer, to a service that blocks for
//! `--block-ms`.

use crate::{Arena, Running};
use hostcall::Wave;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The blocking service's id.
const SLOW: u32 = 201;

pub(crate) fn start(arena: &Arena<'_>) -> Running {
    let block = Duration::from_millis(arena.options.block_ms);
    arena
        .listener
        .services()
        .register_lane(SLOW, "slow", move |_| {
            std::thread::sleep(block);
            Ok([1, 0])
        })
        .unwrap();
    // How long the call took, in microseconds (0 while it blocks).
    let took = Arc::new(AtomicU64::new(0));
    let wave = Wave::new(arena.buffer.clone(), 1);
    let thread = {
        let took = took.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let _ = wave.call(SLOW, |_| [0; 8]);
            // Relaxed: read for the output only.
            took.store(t.elapsed().as_micros().max(1) as u64, Ordering::Relaxed);
        })
    };
    let note = move || match took.load(Ordering::Relaxed) {
        0 => format!("the {block:?} call is still blocked"),
        us => format!("the {block:?} call returned after {:.1?}", Duration::from_micros(us)),
    };
    Running { note: Box::new(note), threads: vec![thread] }
}
