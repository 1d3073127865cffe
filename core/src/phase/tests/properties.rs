//! Properties over generated inputs: any shared words survive a drain, and any sequence of
//! operations follows the packet state machine.

use super::*;
use crate::test_support::sized;

/// The phase protocol's words, read back as the shared `PacketState` machine.
fn state_of(v: &View<'_>, i: usize, held: bool) -> PacketState {
    let differ =
        (v.device_phase(i).load(Ordering::Relaxed) ^ v.host_phase(i).load(Ordering::Relaxed)) & 1 != 0;
    match (occupied_bit(v, i), differ, held) {
        (false, false, _) => PacketState::Free,
        (true, true, _) => PacketState::Ready,
        (true, false, false) => PacketState::Served,
        (true, false, true) => PacketState::Claimed,
        (false, true, _) => unreachable!("an unoccupied packet is pending only after an abandoned submit"),
    }
}

proptest! {

    #![proptest_config(crate::test_support::proptest_config())]
    /// Any bytes at all in the phase words, headers and bitmap: the drain returns, serves only
    /// packets in range, each at most once per scan, and leaves no packet pending.
    #[test]
    fn drain_survives_any_shared_words(
        // Past the bitmap's first word (32 packets) under Miri too.
        n in 2usize..sized(70, 36),
        device in proptest::collection::vec(any::<u32>(), 70),
        host in proptest::collection::vec(any::<u32>(), 70),
        masks in proptest::collection::vec(any::<u64>(), 70),
        services in proptest::collection::vec(any::<u32>(), 70),
        occupied in any::<u32>(),
        window_calls in 0u32..40,
    ) {
        let parts = PhaseBuffer::new(n);
        let v = parts.view();
        for i in 0..n {
            v.device_phase(i).store(device[i], Ordering::Relaxed);
            v.host_phase(i).store(host[i], Ordering::Relaxed);
            v.header(i).activemask.store(masks[i], Ordering::Relaxed);
            v.header(i).service.store(services[i], Ordering::Relaxed);
        }
        v.occupied_word(0).store(occupied, Ordering::Relaxed);
        let pending: BTreeSet<u32> = (0..n).filter(|&i| (device[i] ^ host[i]) & 1 != 0).map(|i| i as u32).collect();

        let mut w = v.scan_window();
        for _ in 0..window_calls {
            v.host().drain_window(&mut w, &mut Collect::default());
            prop_assert!(w.limit() <= n as u32);
        }
        let mut h = Collect::default();
        let report = if window_calls == 0 { v.host().drain(&mut h) } else { v.host().drain_window(&mut w, &mut h) };
        let unique: BTreeSet<u32> = h.served.iter().copied().collect();
        prop_assert_eq!(unique.len(), h.served.len(), "a packet was served twice in one scan");
        prop_assert!(h.served.iter().all(|&i| (i as usize) < n));
        prop_assert_eq!(report.packets as usize, h.served.len());
        prop_assert_eq!(report.malformed as usize, h.errors.len());
        if window_calls == 0 {
            prop_assert_eq!(unique, pending, "a full scan serves exactly the pending packets");
        }
        for (i, &written) in device.iter().enumerate().take(n) {
            let (d, hp) = (v.device_phase(i).load(Ordering::Relaxed), v.host_phase(i).load(Ordering::Relaxed));
            prop_assert_eq!(d, written, "the host never writes device_phase");
            if h.served.contains(&(i as u32)) {
                prop_assert_eq!(hp, d);
            }
        }
        prop_assert_eq!(v.occupied_word(0).load(Ordering::Relaxed), occupied, "the host never touches occupied");
    }

    /// Sequential use against the shared state machine: every claim is a distinct free packet,
    /// every submitted lane is answered once with its own reply, and the words always read back as
    /// the state the handles are in.
    #[test]
    fn sequential_ops_follow_the_packet_state_machine(
        n in 2usize..6,
        ops in proptest::collection::vec((0u8..5, 0usize..8), 1..80),
    ) {
        let parts = PhaseBuffer::new(n);
        let v = parts.view();
        let mut model = vec![PacketState::Free; n];
        let mut claimed: Vec<Claimed<'_>> = Vec::new();
        let mut submitted: Vec<(u64, usize, Submitted<'_>)> = Vec::new();
        let mut tag = 0u64;
        for (op, start) in ops {
            match op {
                0 => match v.claim(start) {
                    Some(c) => {
                        model[c.index()] = model[c.index()].apply(PacketEvent::Claim).unwrap();
                        claimed.push(c);
                    }
                    None => prop_assert!(model.iter().all(|s| *s != PacketState::Free)),
                },
                1 => if let Some(mut c) = claimed.pop() {
                    tag += 1;
                    c.write_lane(start % LANES, &request(tag));
                    let i = c.index();
                    submitted.push((tag, start % LANES, c.submit(5, 1 << (start % LANES))));
                    model[i] = model[i].apply(PacketEvent::Submit).unwrap();
                },
                2 => {
                    let mut h = Collect::default();
                    v.host().drain(&mut h);
                    let ready = model.iter().filter(|s| **s == PacketState::Ready).count();
                    prop_assert_eq!(h.served.len(), ready);
                    for &i in &h.served {
                        model[i as usize] = model[i as usize].apply(PacketEvent::Serve).unwrap();
                    }
                }
                3 => if !submitted.is_empty() {
                    let (tag, lane, s) = submitted.remove(start % submitted.len());
                    let i = s.index();
                    match s.wait_until(|_| false) {
                        Ok(done) => {
                            prop_assert_eq!(model[i], PacketState::Served);
                            prop_assert_eq!(done.reply(lane), [tag + 1, 5]);
                            drop(done);
                            model[i] = model[i].apply(PacketEvent::Release).unwrap();
                        }
                        Err(s) => {
                            prop_assert_eq!(model[i], PacketState::Ready);
                            submitted.push((tag, lane, s));
                        }
                    }
                },
                _ => if !claimed.is_empty() {
                    let c = claimed.remove(start % claimed.len());
                    let i = c.index();
                    drop(c);
                    model[i] = model[i].apply(PacketEvent::Release).unwrap();
                }
            }
            let held: BTreeSet<usize> = claimed.iter().map(|c| c.index()).collect();
            for (i, s) in model.iter().enumerate() {
                prop_assert_eq!(state_of(&v, i, held.contains(&i)), *s, "packet {}", i);
            }
        }
    }
}
