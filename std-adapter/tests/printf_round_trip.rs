//! A wave of lanes printing through the whole path: the core's chunker (`MessageWriter`), real
//! packets of a hostcall buffer, the core's service table, the message assembler and the printf
//! formatter.

use hostcall::services::message::SharedMessageService;
use hostcall::services::printf::{printf_service, PrintfMessage, PrintfSink, Stream};
use hostcall_core::message::MessageWriter;
use hostcall_core::stack::{Header, Prefix, View};
use hostcall_core::PRINTF;
use hostcall_core::{Dispatch, ErrorCode, Host as _, ServiceTable};
use hostcall_core::{PacketRequest, Payload};
use std::sync::{Arc, Mutex};

/// One message's output.
type Output = (Stream, Vec<u8>);

/// Records every message's output.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Output>>>);

impl PrintfSink for Capture {
    fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap().push((stream, bytes.to_vec()));
        Ok(())
    }
}

#[test]
fn a_wave_prints_through_packets() {
    let long = "a string longer than one call's fifty-six bytes, so it spans chunks";
    let lanes: Vec<(Vec<u64>, Option<&[u8]>)> = vec![
        (PrintfMessage::new(b"lane %d: %s\n").int(0).string(long.as_bytes()).into_words(), None),
        (
            PrintfMessage::new(b"%.3s|%08.3f|%#x\n").string(b"truncated").float(-2.5).uint(255).into_words(),
            None,
        ),
        (
            PrintfMessage::new(b"to stderr %c%c\n")
                .to_stderr()
                .int(i64::from(b'o'))
                .int(i64::from(b'k'))
                .into_words(),
            None,
        ),
        (PrintfMessage::new(b"bad control").control(6).into_words(), None),
        (PrintfMessage::new(b"missing %d %d").int(1).into_words(), None),
        (PrintfMessage::new(b"").into_words(), None),
        (PrintfMessage::new(long.repeat(20).as_bytes()).into_words(), None),
    ];
    let expected: Vec<(u64, Option<Output>)> = vec![
        (8 + long.len() as u64 + 1, Some((Stream::Stdout, format!("lane 0: {long}\n").into_bytes()))),
        (18, Some((Stream::Stdout, b"tru|-002.500|0xff\n".to_vec()))),
        (13, Some((Stream::Stderr, b"to stderr ok\n".to_vec()))),
        (u64::MAX, None),
        // As ROCm: printed up to the missing argument, that count replied, then the marker.
        (10, Some((Stream::Stdout, b"missing 1 <hostcall: missing argument>".to_vec()))),
        (0, Some((Stream::Stdout, Vec::new()))),
        (20 * long.len() as u64, Some((Stream::Stdout, long.repeat(20).into_bytes()))),
    ];

    let capture = Capture::default();
    let printf = SharedMessageService::new(printf_service(capture.clone()));
    let mut table = ServiceTable::<4>::new();
    assert!(table.register(PRINTF, &printf).is_ok());

    let prefix = Prefix::default();
    let headers = [Header::default(), Header::default()];
    let payloads = [Payload::default(), Payload::default()];
    let buffer = View::from_parts(&prefix, &headers, &payloads).unwrap();
    buffer.init(0, 0);

    let mut writers: Vec<_> = lanes.into_iter().map(|(words, _)| MessageWriter::new(words)).collect();
    let mut finals: Vec<Option<[u64; 2]>> = vec![None; writers.len()];
    let mut packets = 0;
    while finals.iter().any(Option::is_none) {
        // One packet per round: every lane still sending contributes its next chunk.
        let mut packet = buffer.claim().unwrap().expect("a free packet");
        let mut mask = 0u64;
        for (lane, writer) in writers.iter_mut().enumerate().filter(|(lane, _)| finals[*lane].is_none()) {
            packet.write_lane(lane, &writer.next_request().unwrap());
            mask |= 1 << lane;
        }
        let submitted = packet.submit(PRINTF, mask);
        buffer.host().drain(&mut |p: &mut PacketRequest<'_>| table.dispatch(p));
        let done = submitted.wait(|| {});
        for lane in (0..writers.len()).filter(|l| mask & 1 << l != 0) {
            finals[lane] = writers[lane].accept_reply(done.reply(lane)).unwrap();
        }
        done.release();
        packets += 1;
    }
    // The longest message (control + 20 x 67 bytes + NUL in 168 words = 169 words) takes 25 calls.
    assert_eq!(packets, 25);

    let mut expected_outputs = Vec::new();
    for (lane, (reply, output)) in expected.into_iter().enumerate() {
        let got = finals[lane].unwrap();
        assert_eq!(got[0], reply, "lane {lane}");
        if reply == u64::MAX {
            // printf's -1, as the project's typed error reply.
            assert_eq!(got, ErrorCode::BadRequest.reply(), "lane {lane}");
        }
        expected_outputs.extend(output);
    }
    // Each message is written once; the ones without a usable format string print nothing.
    let mut outputs = capture.0.lock().unwrap().clone();
    outputs.sort();
    expected_outputs.sort();
    assert_eq!(outputs, expected_outputs);
    assert_eq!(printf.with(|s| s.assembler().open_messages()), 0);
}

/// The same messages as LLVM libc's GPU printf sends them (one call, a lane each, each lane its
/// own format, as LLVM's client allows; one opcode, so all to stdout), over the RPC printf opcodes
/// to this crate's `RpcHost`, aligned and packed: the same output and counts as through hostcall
/// packets. (The bad control word and the missing argument have no RPC form: the host sizes the
/// argument block from the format.)
#[test]
fn a_wave_prints_through_the_rpc_opcodes() {
    use hostcall::services::printf::Streams;
    use hostcall::services::rpc::client::{printf, printf_opcode, CArg};
    use hostcall::services::rpc::{RpcHost, RpcLimits, RpcPolicy};
    use hostcall_core::rpc::{Client, LaneBuffer, Parts};
    use hostcall_core::sync::AtomicU32;

    let long = "a string longer than one call's fifty-six bytes, so it spans chunks";
    let long20 = long.repeat(20);
    let cases: Vec<(&[u8], Vec<CArg<'_>>)> = vec![
        (b"lane %d: %s\n", vec![CArg::Int(0), CArg::Str(Some(long.as_bytes()))]),
        (b"%.3s|%08.3f|%#x\n", vec![CArg::Str(Some(b"truncated")), CArg::Double(-2.5), CArg::Uint(255)]),
        (b"to stdout %c%c\n", vec![CArg::Int(i32::from(b'o')), CArg::Int(i32::from(b'k'))]),
        (b"", vec![]),
        (long20.as_bytes(), vec![]),
    ];
    let expected: Vec<Vec<u8>> = vec![
        format!("lane 0: {long}\n").into_bytes(),
        b"tru|-002.500|0xff\n".to_vec(),
        b"to stdout ok\n".to_vec(),
        Vec::new(),
        long20.clone().into_bytes(),
    ];
    let lanes = cases.len() as u32;
    let mailboxes = [AtomicU32::new(0), AtomicU32::new(0)];
    let (host_mailbox, device_mailbox) = mailboxes.split_at(1);
    let headers = [hostcall_core::rpc::Header::default()];
    let buffers: Vec<LaneBuffer> = (0..lanes).map(|_| LaneBuffer::default()).collect();
    let parts = Parts { lanes, host_mailbox, device_mailbox, headers: &headers, buffers: &buffers };
    let view = hostcall_core::rpc::View::from_parts(parts).unwrap();
    let locks = [AtomicU32::new(0)];
    let client = Client::new(view, &locks).unwrap();
    for packed in [false, true] {
        let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
        let mut out = Streams { stdout: Vec::new(), stderr: Vec::new() };
        let services = ServiceTable::<1>::new();
        let mut take_the_hosts_turn = |polls: u32| {
            host.drain(&view, &mut out, &services);
            polls < 1000
        };
        // Asked for every lane of the warp; only the mask's are sent.
        let call = |lane: u32| cases.get(lane as usize).map_or((&b""[..], &[][..]), |(f, a)| (*f, &a[..]));
        let mask = (1u64 << lanes) - 1;
        let printed =
            printf(&client, 0, printf_opcode(0, packed), mask, None, &call, &mut take_the_hosts_turn)
                .unwrap();
        for (lane, bytes) in expected.iter().enumerate() {
            assert_eq!(printed[lane], bytes.len() as i32, "lane {lane}, packed {packed}");
        }
        // The lanes print in lane order, each whole.
        assert_eq!(out.stdout, expected.concat(), "packed {packed}");
    }
}
