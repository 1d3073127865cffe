//! The scan window and ranges: the window narrows to the packets in use and never misses one, stays
//! in bounds, and a range drain serves only its range.

use super::*;
use crate::test_support::sized;

/// Serves packet `index` by hand as a device would (no handle), for window tests.
fn submit_at(v: &View<'_>, index: usize) {
    let d = v.device_phase(index).load(Ordering::Relaxed);
    v.header(index).activemask.store(1, Ordering::Relaxed);
    v.device_phase(index).store(d ^ 1, Ordering::Release);
}

#[test]
fn the_window_narrows_to_the_packets_in_use_and_never_misses_one() {
    // The last packet lies past the first narrowed limit (4 + SLACK), `late` past the idle one
    // (SLACK).
    let n = sized(200, 48) as u32;
    let late = n as usize * 3 / 4;
    assert!(n > 4 + ScanWindow::SLACK && late as u32 >= ScanWindow::SLACK);
    let parts = PhaseBuffer::new(n as usize);
    let v = parts.view();
    let mut w = v.scan_window();
    assert!(w.full_scan_due());
    submit_at(&v, 3);
    let mut h = Collect::default();
    assert_eq!(v.host().drain_window(&mut w, &mut h).packets, 1);
    assert_eq!(w.limit(), 4 + ScanWindow::SLACK, "narrowed after the full scan");

    // A busy prefix: the packet above the limit waits, but at most FULL_SCAN_PERIOD calls.
    let high = n as usize - 1;
    submit_at(&v, high);
    let mut calls = 0;
    loop {
        submit_at(&v, 0);
        calls += 1;
        let mut h = Collect::default();
        v.host().drain_window(&mut w, &mut h);
        if h.served.contains(&(high as u32)) {
            break;
        }
        assert!(calls <= ScanWindow::FULL_SCAN_PERIOD, "packet {high} missed");
    }
    assert_eq!(calls, ScanWindow::FULL_SCAN_PERIOD, "served at the periodic full scan");
    assert_eq!(w.limit(), n, "the full scan that found it widened the window");

    // An idle prefix: a packet above the limit is served in the same call.
    for _ in 0..ScanWindow::FULL_SCAN_PERIOD {
        v.host().drain_window(&mut w, &mut Collect::default());
    }
    assert_eq!(w.limit(), ScanWindow::SLACK);
    submit_at(&v, late);
    let mut h = Collect::default();
    assert_eq!(v.host().drain_window(&mut w, &mut h).packets, 1);
    assert_eq!(h.served, [late as u32]);
}

#[test]
fn a_window_from_a_larger_buffer_stays_in_bounds() {
    let big = PhaseBuffer::new(sized(100, 8));
    let mut w = big.view().scan_window();
    let small = PhaseBuffer::new(3);
    let v = small.view();
    for i in 0..3 {
        submit_at(&v, i);
    }
    assert_eq!(v.host().drain_window(&mut w, &mut Collect::default()).packets, 3);
}

#[test]
fn drain_range_serves_only_its_range_and_clamps() {
    let parts = PhaseBuffer::new(6);
    let view = parts.view();
    let submitted: Vec<_> = (0..6)
        .map(|i| {
            let mut p = view.claim(i).unwrap();
            assert_eq!(p.index(), i);
            p.write_lane(0, &request(i as u64));
            p.submit(3, 1)
        })
        .collect();
    let mut low = Collect::default();
    assert_eq!(view.host().drain_range(0..2, &mut low).packets, 2);
    assert_eq!(low.served, vec![0, 1]);
    let mut out_of_bounds = Collect::default();
    assert_eq!(view.host().drain_range(6..100, &mut out_of_bounds).packets, 0);
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = view.host().drain_range(5..1, &mut out_of_bounds).packets;
    assert_eq!(backwards, 0);
    let mut high = Collect::default();
    assert_eq!(view.host().drain_range(2..100, &mut high).packets, 4);
    assert_eq!(high.served, vec![2, 3, 4, 5]);
    for s in submitted {
        assert!(s.is_served());
    }
}
