//! Emulated waves hammering a buffer with calls whose every reply is checked.

use hostcall::{HostcallBuffer, Services, Wave};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// The service id the waves call: a lane service answering `[r[0] + r[1], r[2]]` (wrapping), which
/// the test registers (see [`register_add`]).
pub const ADD: u32 = 100;

/// Registers [`ADD`] on `services`.
pub fn register_add(services: &Services) {
    services.register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]])).unwrap();
}

/// `waves` threads doing `calls` calls each with `lanes` lanes on `buffer` (each call given up
/// after `timeout`, where there is one); every reply checked.
pub fn run_waves(
    buffer: &Arc<HostcallBuffer>,
    waves: u64,
    lanes: u32,
    calls: u64,
    timeout: Option<Duration>,
) {
    let threads: Vec<_> = (0..waves)
        .map(|w| {
            let mut wave = Wave::new(buffer.clone(), lanes);
            if let Some(timeout) = timeout {
                wave = wave.with_timeout(timeout);
            }
            thread::spawn(move || {
                for c in 0..calls {
                    let tag = w << 32 | c;
                    let reply = wave.call(ADD, |lane| [tag, lane as u64, w, 0, 0, 0, 0, 0]).unwrap();
                    assert!(!reply.host_error());
                    for lane in 0..lanes as usize {
                        assert_eq!(reply.lane(lane), [tag + lane as u64, w], "wave {w} call {c} lane {lane}");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
