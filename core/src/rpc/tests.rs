//! The wire format byte for byte, a whole conversation between a client thread and host turns,
//! and what the host does with hostile words.

use super::*;
use crate::sync::Ordering;

extern crate std;
use std::vec;
use std::vec::Vec;

/// A zeroed, 8-aligned buffer of `ports` x `lanes` and its view.
struct Raw {
    memory: Vec<u64>,
}

impl Raw {
    fn new(ports: u32, lanes: u32) -> Self {
        Self { memory: vec![0u64; buffer_size(ports, lanes).unwrap().div_ceil(8)] }
    }

    fn view(&mut self, ports: u32, lanes: u32) -> View<'_> {
        let len = self.memory.len() * 8;
        // SAFETY: the memory outlives the view and is only accessed through it (and through
        // `word` between accesses of the view, on the same thread).
        unsafe { View::from_raw(self.memory.as_mut_ptr().cast(), len, ports, lanes) }.unwrap()
    }

    fn u32_at(&self, byte: usize) -> u32 {
        let word = self.memory[byte / 8];
        (word >> (8 * (byte % 8))) as u32
    }
}

fn no_stall() -> impl FnMut(u32) -> bool {
    |polls| polls < 200_000_000
}

/// What the client writes lands where `rpc.h` puts it (P = 3, L = 2: mailboxes at 0 and 12,
/// headers at 24, lane buffers at 72), and the host reads it from there.
#[test]
fn the_client_writes_where_rpc_h_says() {
    let (ports, lanes) = (3u32, 2u32);
    let mut raw = Raw::new(ports, lanes);
    let locks = [crate::sync::AtomicU32::new(0)];
    {
        let view = raw.view(ports, lanes);
        view.init();
        let client = Client::new(view, &locks).unwrap();
        let mut port = client.try_open(0x6300_0002, 0b11, 2).unwrap();
        assert_eq!(port.port(), 2);
        port.send(|lane| [100 + u64::from(lane), 0, 0, 0, 0, 0, 0, 7], &mut no_stall()).unwrap();
        port.close();
    }
    let layout = Layout::new(ports, lanes).unwrap();
    assert_eq!(raw.u32_at(layout.device_mailbox + 8), 1, "device mailbox [2]");
    assert_eq!(raw.u32_at(layout.host_mailbox + 8), 0, "host mailbox [2]");
    let header = layout.headers + 2 * HEADER_SIZE;
    assert_eq!(raw.memory[header / 8], 0b11, "mask");
    assert_eq!(raw.u32_at(header + 8), 0x6300_0002, "opcode");
    let lane1 = layout.buffers + layout.lane_buffer(2, 1) * LANE_BUFFER_SIZE;
    assert_eq!(lane1, 72 + 5 * 64);
    assert_eq!((raw.memory[lane1 / 8], raw.memory[lane1 / 8 + 7]), (101, 7));
}

/// Bytes a device wrote at `rpc.h`'s offsets are a pending call the host's turn reads.
#[test]
fn the_host_reads_what_a_device_wrote_at_rpc_h_offsets() {
    let (ports, lanes) = (2u32, 1u32);
    let mut raw = Raw::new(ports, lanes);
    let layout = Layout::new(ports, lanes).unwrap();
    raw.memory[layout.device_mailbox / 8] = 1 << 32; // device mailbox [1] = 1 (bytes 12..16)
    raw.memory[(layout.headers + HEADER_SIZE) / 8] = 1; // header[1].mask
    raw.memory[(layout.headers + HEADER_SIZE + 8) / 8] = 0x7200_0001; // header[1].opcode
    raw.memory[(layout.buffers + 64) / 8 + 1] = 4096;
    let view = raw.view(ports, lanes);
    assert!(!view.pending(0) && view.pending(1));
    let mut turn = view.turn(1).unwrap();
    assert_eq!(turn.header(), (1, opcode::rocm::DEVMEM));
    assert_eq!(turn.read(0)[1], 4096);
    turn.write(0, &[0xabc, 0, 0, 0, 0, 0, 0, 0]);
    turn.finish();
    assert!(!view.pending(1));
    assert_eq!(raw.u32_at(4), 1, "host mailbox [1] flipped");
    assert_eq!(raw.memory[(layout.buffers + 64) / 8], 0xabc);
}

/// Two lanes of different lengths stream to the host (`send_n`), the host answers with a stream
/// of its own (`recv_n`) in the same turn as its last receive, then the client closes.
#[test]
fn streams_both_ways_in_turns() {
    let (ports, lanes) = (1u32, 2u32);
    let mut raw = Raw::new(ports, lanes);
    let locks = [crate::sync::AtomicU32::new(0)];
    let view = raw.view(ports, lanes);
    view.init();
    let client = Client::new(view, &locks).unwrap();
    let long: Vec<u8> = (0..200u32).map(|i| i as u8).collect();
    let short = b"short".to_vec();
    std::thread::scope(|s| {
        let host = s.spawn(|| {
            let mut received = [Vec::new(), Vec::new()];
            let mut stream = StreamIn::new(0b11, 1 << 20);
            let mut turns = 0;
            let reply: [Vec<u8>; 2] = [b"ok".to_vec(), vec![9u8; 130]];
            let mut out = StreamOut::new();
            let mut sending = false;
            loop {
                let Some(mut turn) = view.turn(0) else {
                    std::hint::spin_loop();
                    continue;
                };
                turns += 1;
                if !sending {
                    let done = stream.receive(&turn, &mut |lane, offset, bytes: &[u8]| {
                        assert_eq!(received[lane as usize].len() as u64, offset);
                        received[lane as usize].extend_from_slice(bytes);
                    });
                    sending = done;
                }
                let last = sending && out.send(&mut turn, 0b11, |lane| &reply[lane as usize]);
                turn.finish();
                if last {
                    return (received, turns);
                }
            }
        });
        let mut port = client.try_open(0x6300_0004, 0b11, 0).unwrap();
        let data = [&long[..], &short[..]];
        port.send_n(|lane| data[lane as usize], &mut no_stall()).unwrap();
        let mut got = [Vec::new(), Vec::new()];
        port.recv_n(|lane, _, _, bytes| got[lane as usize].extend_from_slice(bytes), &mut no_stall())
            .unwrap();
        port.close();
        let (received, turns) = host.join().unwrap();
        assert_eq!(received, [long.clone(), short.clone()]);
        assert_eq!(got, [b"ok".to_vec(), vec![9u8; 130]]);
        // 4 packets in (200 bytes), 3 out (130 bytes), the first out in the last in's turn.
        assert_eq!(turns, 4 + 3 - 1);
    });
    assert!(!view.pending(0));
}

/// A mailbox value other than 0 or 1 reads as 1; lanes the header names beyond the port's lanes
/// are not read; a lane declaring more than the limit is read to its end but nothing is kept.
#[test]
fn hostile_words_stay_inside_the_port() {
    let (ports, lanes) = (1u32, 1u32);
    let mut raw = Raw::new(ports, lanes);
    let view = raw.view(ports, lanes);
    view.init();
    view.device_mailbox[0].store(7, Ordering::Relaxed);
    view.headers[0].mask.store(u64::MAX, Ordering::Relaxed);
    view.buffers[0].write(&[1 << 40, 0, 0, 0, 0, 0, 0, 0]);
    let turn = view.turn(0).unwrap();
    assert_eq!(turn.header().0, 1, "lanes beyond the port's one lane are dropped");
    let mut stream = StreamIn::new(u64::MAX, 1024);
    let mut kept = 0;
    assert!(!stream.receive(&turn, &mut |_, _, bytes: &[u8]| kept += bytes.len()));
    assert!(!stream.kept(0) && stream.size(0) == 1 << 40 && kept == 0);
    turn.finish();
    assert!(!view.pending(0), "7 reads as 1: the host's flip to 1 hands the port back");
    assert_eq!(view.host_mailbox[0].load(Ordering::Relaxed), 1);
}

#[test]
fn geometry_and_arrays_are_checked() {
    let mut raw = Raw::new(2, 4);
    let len = raw.memory.len() * 8;
    let base: *mut u8 = raw.memory.as_mut_ptr().cast();
    // SAFETY: every call is refused before any access, or views memory that is valid.
    unsafe {
        assert!(matches!(View::from_raw(base, len - 1, 2, 4), Err(crate::LayoutError::TooSmall { .. })));
        assert!(matches!(
            View::from_raw(base.add(4), len - 8, 2, 4),
            Err(crate::LayoutError::Misaligned { .. })
        ));
        assert!(View::from_raw(base, len, 2, 65).is_err());
        assert!(View::from_raw(base, len, 2, 4).is_ok());
    }
    let view = raw.view(2, 4);
    assert_eq!((view.ports(), view.lanes(), view.lane_mask()), (2, 4, 0b1111));
    assert!(Client::new(view, &[]).is_err());
}

/// The hostcall producer path over a port: claim, write lanes, submit as a service, the host's
/// turn serves it as a packet of that service, the wait returns the reply; the port is free
/// again after the release.
#[test]
fn the_producer_path_carries_hostcall_packets() {
    use crate::lane::{ClaimedPacket, CompletedPacket, SubmittedPacket};
    use crate::{PacketRequest, Payload};
    let (ports, lanes) = (2u32, 4u32);
    let mut raw = Raw::new(ports, lanes);
    let locks = [crate::sync::AtomicU32::new(0)];
    let view = raw.view(ports, lanes);
    view.init();
    let client = Client::new(view, &locks).unwrap();
    let payload = Payload::default();
    for service in [3u32, 100] {
        let mut claimed = client.claim(1).expect("a free port");
        claimed.write_lane(1, &[0, 64, 0, 0, 0, 0, 0, 5]);
        claimed.write_lane(3, &[0, 128, 0, 0, 0, 0, 0, 5]);
        let submitted = claimed.submit(service, 0b1010);
        let mut turn = view.turn(1).expect("the host's turn");
        assert_eq!(turn.header(), (0b1010, opcode_of(service)));
        let error =
            serve_as_packet(&mut turn, 0b1010, service, &payload, &mut |p: &mut PacketRequest<'_>| {
                assert_eq!(p.service(), service);
                for lane in p.lanes() {
                    p.reply(lane, [p.request(lane)[1] + u64::from(service), 9]);
                }
            });
        turn.finish();
        assert!(!error);
        let done = submitted.wait(|| {});
        assert_eq!(
            (done.reply(1), done.reply(3)),
            ([64 + u64::from(service), 9], [128 + u64::from(service), 9])
        );
        drop(done);
    }
    // A claim dropped unsent frees its port; a port whose call is in flight is not claimed.
    drop(client.claim(0).unwrap());
    let in_flight = client.claim(0).unwrap().submit(3, 1);
    assert_eq!(client.claim(0).unwrap().port(), 1);
    drop(in_flight);
}

/// The client writes a call's header with its first send, beside the lane stores and the flip,
/// not at open (see `ClientPort::write_header_once`); a reply read with `recv_first` is its
/// first words.
#[test]
fn the_header_goes_out_with_the_first_send_and_a_short_reply_is_read_short() {
    let mut raw = Raw::new(1, 1);
    let locks = [crate::sync::AtomicU32::new(0)];
    let view = raw.view(1, 1);
    view.init();
    let client = Client::new(view, &locks).unwrap();
    let mut port = client.try_open(0x6300_0002, 1, 0).unwrap();
    assert_eq!(view.headers[0].opcode.load(Ordering::Relaxed), 0, "nothing written at open");
    port.send(|_| [5, 6, 7, 8, 9, 10, 11, 12], &mut no_stall()).unwrap();
    assert_eq!(view.headers[0].opcode.load(Ordering::Relaxed), 0x6300_0002, "written by the send");
    let mut turn = view.turn(0).unwrap();
    assert_eq!(turn.header(), (1, 0x6300_0002));
    turn.write_first(0, &[50, 60]);
    turn.finish();
    let mut reply = [0; 2];
    port.recv_first(|_, words| reply = words, &mut no_stall()).unwrap();
    assert_eq!((reply, port.read_first::<3>(0)), ([50, 60], [50, 60, 7]));
    port.close();
}

/// A drain with call state counts the lanes its [`Calls`] says each turn served, reports an
/// unserved turn's opcode as unhandled, and hands both ports back (a deferred one stays).
#[test]
fn a_drain_counts_what_its_calls_served() {
    use crate::host::{DrainError, DrainReport, Host as _, PacketRequest};
    use crate::scan::DrainScope;

    /// Port 0: 5 lanes served; port 1: not served; port 2: deferred.
    struct Told;
    impl Calls for Told {
        fn turn(&mut self, turn: &mut Turn<'_>, _: &mut dyn crate::host::DrainHandler) -> Option<u32> {
            match turn.port() {
                0 => Some(5),
                1 => None,
                _ => {
                    turn.defer();
                    Some(0)
                }
            }
        }
    }
    struct Malformed(Vec<DrainError>);
    impl crate::host::DrainHandler for Malformed {
        fn serve(&mut self, _: &mut PacketRequest<'_>) {
            panic!("no packet served");
        }
        fn malformed(&mut self, error: DrainError) {
            self.0.push(error);
        }
    }
    let (ports, lanes) = (3u32, 1u32);
    let mut raw = Raw::new(ports, lanes);
    let view = raw.view(ports, lanes);
    view.init();
    for port in 0..ports as usize {
        view.headers[port].mask.store(1, Ordering::Relaxed);
        view.headers[port].opcode.store(0x6300_0000 + port as u32, Ordering::Relaxed);
        view.device_mailbox[port].store(1, Ordering::Relaxed);
    }
    let mut handler = Malformed(Vec::new());
    let report = view.host().drain_scope(&mut DrainScope::Whole, None, Some(&mut Told), &mut handler);
    assert_eq!(report, DrainReport { packets: 3, lane_calls: 5, malformed: 1 });
    assert_eq!(handler.0, [DrainError::UnhandledOpcode { port: 1, opcode: 0x6300_0001 }]);
    assert_eq!((view.pending(0), view.pending(1), view.pending(2)), (false, false, true));
}

/// A view's arrays must have the geometry's lengths, not one element more or less: `View::turn`
/// and `Turn::lane_buffers` index them unchecked on that account. The last port's turn reads its
/// own last lane.
#[test]
fn a_view_refuses_arrays_of_the_wrong_length() {
    use crate::view::LayoutError;
    let (ports, lanes) = (3usize, 2u32);
    let words = |n: usize| (0..n).map(|_| crate::sync::AtomicU32::new(0)).collect::<Vec<_>>();
    let (host, device) = (words(ports), words(ports + 1));
    let headers = (0..ports + 1).map(|_| Header::default()).collect::<Vec<_>>();
    let buffers = (0..ports * 2 + 1).map(|_| LaneBuffer::default()).collect::<Vec<_>>();
    let parts = Parts {
        lanes,
        host_mailbox: &host,
        device_mailbox: &device[..ports],
        headers: &headers[..ports],
        buffers: &buffers[..ports * 2],
    };
    let cases = [
        ("device_mailbox", Parts { device_mailbox: &device, ..parts }, ports + 1),
        ("device_mailbox", Parts { device_mailbox: &device[..ports - 1], ..parts }, ports - 1),
        ("headers", Parts { headers: &headers, ..parts }, ports + 1),
        ("headers", Parts { headers: &headers[..ports - 1], ..parts }, ports - 1),
        ("buffers", Parts { buffers: &buffers, ..parts }, ports * 2 + 1),
        ("buffers", Parts { buffers: &buffers[..ports * 2 - 1], ..parts }, ports * 2 - 1),
    ];
    for (array, wrong, given) in cases {
        let expected = if array == "buffers" { ports * 2 } else { ports };
        assert_eq!(View::from_parts(wrong).err(), Some(LayoutError::ArrayLength { array, expected, given }));
    }
    let view = View::from_parts(parts).unwrap();
    buffers[ports * 2 - 1].write(&[9, 0, 0, 0, 0, 0, 0, 0]);
    device[ports - 1].store(1, Ordering::Relaxed);
    let turn = view.turn(ports as u32 - 1).expect("the last port is pending");
    let read: Vec<_> = turn.lane_buffers(0b11).map(|(lane, buffer)| (lane, buffer.read()[0])).collect();
    assert_eq!(read, [(0, 0), (1, 9)]);
    turn.finish();
}
