//! Unit tests of the CUDA backend that need no GPU.

use super::*;

#[test]
fn device_state_layout_matches_the_header_formula() {
    for n in [2usize, 31, 32, 33, 1056, 4224] {
        let l = DeviceStateLayout::new(n);
        let align = |x: usize| x.div_ceil(128) * 128;
        assert_eq!(l.shadow, align(n.div_ceil(32) * 4));
        assert_eq!(l.last_ring, l.shadow + align(4 * n));
        assert_eq!(l.size, l.last_ring + 128);
        assert_eq!(l.shadow % 128, 0);
    }
}

#[test]
fn probe_never_panics() {
    match probe() {
        Ok(count) => println!("{count} CUDA device(s)"),
        Err(why) => println!("no CUDA device, reported as an error: {why}"),
    }
}
