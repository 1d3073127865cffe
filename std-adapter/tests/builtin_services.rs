//! PRINTF and DEVMEM through the listener, from emulated waves; malformed message streams each get
//! their error reply and the listener goes on.

#[macro_use]
mod common;

use hostcall::{
    services::devmem::DevMemLimits, services::message::MessageLimits, services::printf::PrintfMessage,
    HostMemory, Protocol, Reply, Wave,
};
use hostcall_core::message::Descriptor;
use hostcall_core::ErrorCode;
use hostcall_core::{DEVMEM, PRINTF};
use std::sync::Arc;

use common::printing::{printing, Printing};

/// A listener with PRINTF and DEVMEM (blocks up to 1 MiB) and one buffer of 4 packets.
fn setup(limits: MessageLimits, protocol: Protocol) -> Printing {
    let s = printing(4, limits, protocol);
    s.listener
        .services()
        .enable_devmem(Arc::new(HostMemory), DevMemLimits::default().with_max_allocation(1 << 20))
        .unwrap();
    s
}

fn printf_from_every_lane_of_a_wave(protocol: Protocol) {
    let s = setup(MessageLimits::default(), protocol);
    let wave = Wave::new(s.buffer.clone(), 64);
    // Lanes send messages of different lengths (lane 7's spans many chunks).
    let reply = wave
        .send_messages(PRINTF, |lane| {
            let long = "x".repeat(if lane == 7 { 300 } else { lane });
            PrintfMessage::new(b"lane %2d: %5.2f %s|\n")
                .int(lane as i64)
                .float(lane as f64 / 4.0)
                .string(long.as_bytes())
                .into_words()
        })
        .unwrap();
    assert!(!reply.host_error());
    let out = s.stdout.text();
    for lane in 0..64usize {
        let long = "x".repeat(if lane == 7 { 300 } else { lane });
        let line = format!("lane {lane:2}: {:5.2} {long}|\n", lane as f64 / 4.0);
        assert!(out.contains(&line), "lane {lane} missing from output");
        assert_eq!(reply.lane(lane)[0], line.len() as u64, "lane {lane}'s count");
    }
    let to_stderr = Wave::new(s.buffer.clone(), 1)
        .send_messages(PRINTF, |_| {
            PrintfMessage::new(b"%s %d%%\n").to_stderr().string(b"err").int(-5).into_words()
        })
        .unwrap();
    assert_eq!(to_stderr.lane(0), [8, 0]);
    assert_eq!(s.stderr.text(), "err -5%\n");
    assert_eq!(s.listener.shutdown().services[&PRINTF].1.errors, 0);
}

fn a_bad_format_prints_up_to_the_problem_and_printing_goes_on(protocol: Protocol) {
    let s = setup(MessageLimits::default(), protocol);
    let wave = Wave::new(s.buffer.clone(), 1);
    // As ROCm: printed up to the conversion that cannot be printed, the count so far replied;
    // then a marker naming the problem (not counted).
    let reply = wave.send_messages(PRINTF, |_| PrintfMessage::new(b"%d %d\n").int(1).into_words()).unwrap();
    assert_eq!(reply.lane(0), [2, 0], "missing argument");
    let reply = wave.send_messages(PRINTF, |_| PrintfMessage::new(b"|x=%y|").into_words()).unwrap();
    assert_eq!(reply.lane(0), [3, 0], "bad conversion");
    let reply = wave.send_messages(PRINTF, |_| PrintfMessage::new(b"|%1$d|").int(1).into_words()).unwrap();
    assert_eq!(reply.lane(0), [1, 0], "positional argument");
    // No format string at all: -1, nothing printed.
    let reply =
        wave.send_messages(PRINTF, |_| PrintfMessage::new(b"ok\n").control(0b10).into_words()).unwrap();
    assert_eq!(reply.lane(0)[0] as i64, -1, "unknown control bit");
    let reply = wave.send_messages(PRINTF, |_| PrintfMessage::new(b"ok %u\n").uint(7).into_words()).unwrap();
    assert_eq!(reply.lane(0), [5, 0]);
    assert_eq!(
        s.stdout.text(),
        "1 <hostcall: missing argument>|x=<hostcall: bad conversion %y>|<hostcall: bad conversion %$>ok 7\n"
    );
}

/// One raw chunk from one lane.
fn chunk(wave: &Wave, words: [u64; 8]) -> Reply {
    wave.call(PRINTF, |_| words).unwrap()
}

fn descriptor(begin: bool, end: bool, len: usize, id: u64) -> u64 {
    Descriptor::new(begin, end, len, id).unwrap().encode()
}

fn malformed_streams_get_error_replies_and_the_listener_goes_on(protocol: Protocol) {
    let s = setup(MessageLimits::default().with_max_message_bytes(64).with_max_open(2), protocol);
    let wave = Wave::new(s.buffer.clone(), 1);
    let bad = |reply: Reply, code: ErrorCode, what: &str| {
        assert!(reply.host_error(), "{what}");
        assert_eq!(reply.lane(0), code.reply(), "{what}");
    };
    bad(chunk(&wave, [0b100, 0, 0, 0, 0, 0, 0, 0]), ErrorCode::BadRequest, "reserved bits");
    bad(
        chunk(&wave, [descriptor(false, false, 1, 0), 1, 0, 0, 0, 0, 0, 0]),
        ErrorCode::BadRequest,
        "chunk without BEGIN",
    );
    bad(
        chunk(&wave, [descriptor(false, true, 0, 0), 0, 0, 0, 0, 0, 0, 0]),
        ErrorCode::BadRequest,
        "END without BEGIN",
    );
    bad(
        chunk(&wave, [descriptor(false, true, 0, 12345), 0, 0, 0, 0, 0, 0, 0]),
        ErrorCode::BadRequest,
        "unknown id",
    );
    // Oversize: 64 bytes = 8 words allowed; send 7 + 7.
    let begin = chunk(&wave, [descriptor(true, false, 7, 0), 0, 0, 0, 0, 0, 0, 0]);
    let id = Descriptor::decode(begin.lane(0)[0]).unwrap().id();
    bad(chunk(&wave, [descriptor(false, false, 7, id), 0, 0, 0, 0, 0, 0, 0]), ErrorCode::Refused, "oversize");
    bad(
        chunk(&wave, [descriptor(false, true, 0, id), 0, 0, 0, 0, 0, 0, 0]),
        ErrorCode::BadRequest,
        "the oversize message is gone",
    );
    // Too many open messages: a third BEGIN is refused; the two open ones are untouched.
    let begin = [descriptor(true, false, 0, 0), 0, 0, 0, 0, 0, 0, 0];
    let opened: Vec<u64> =
        (0..2).map(|_| Descriptor::decode(chunk(&wave, begin).lane(0)[0]).unwrap().id()).collect();
    bad(chunk(&wave, begin), ErrorCode::Refused, "a third open message");
    let ok = u64::from_le_bytes(*b"ok\n\0\0\0\0\0");
    assert_eq!(chunk(&wave, [descriptor(false, true, 2, opened[0]), 0, ok, 0, 0, 0, 0, 0]).lane(0), [3, 0]);
    assert_eq!(chunk(&wave, [descriptor(false, true, 2, opened[1]), 0, ok, 0, 0, 0, 0, 0]).lane(0), [3, 0]);
    // LEN > 7 cannot be encoded (3 bits): the largest LEN, 7, is accepted (shown above).
    assert!(Descriptor::new(true, true, 8, 0).is_err());
    // The listener still serves: a one-chunk message prints (it needs no open slot).
    let words = PrintfMessage::new(b"still %s\n").string(b"here").into_words();
    let one = Wave::new(s.buffer.clone(), 1).send_messages(PRINTF, |_| words.clone()).unwrap();
    assert_eq!(one.lane(0), [11, 0]);
    assert_eq!(s.stdout.text(), "ok\nok\nstill here\n");
}

fn devmem_allocates_frees_and_refuses(protocol: Protocol) {
    let s = setup(MessageLimits::default(), protocol);
    let wave = Wave::new(s.buffer.clone(), 4);
    let sizes = [64u64, 4096, 1 << 20, (1 << 20) + 1];
    let reply = wave.call(DEVMEM, |lane| [0, sizes[lane], 0, 0, 0, 0, 0, 0]).unwrap();
    // The phase and line protocols have no control word: DEVMEM's failure shows only in the reply words.
    assert!(reply.host_error() || protocol != Protocol::Stack, "the oversize lane is refused");
    let addresses: Vec<u64> = (0..4).map(|lane| reply.lane(lane)[0]).collect();
    assert!(addresses[..3].iter().all(|&a| a != 0 && a % 64 == 0));
    assert_eq!(reply.lane(3), [0, ErrorCode::Refused as u64]);
    // The memory is usable by the host (device address = host address for host memory).
    // SAFETY: DEVMEM handed out 4096 bytes at this address; nothing else uses them.
    unsafe { std::ptr::write_bytes(addresses[1] as *mut u8, 0xab, 4096) };
    let freed = wave
        .call(DEVMEM, |lane| [if lane < 3 { addresses[lane] } else { 0xdead0 }, 0, 0, 0, 0, 0, 0, 0])
        .unwrap();
    assert_eq!(freed.lane(0), [0, 0]);
    assert_eq!(freed.lane(3), [0, ErrorCode::BadRequest as u64], "unknown address");
    let twice = Wave::new(s.buffer.clone(), 1).call(DEVMEM, |_| [addresses[0], 0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(twice.lane(0), [0, ErrorCode::BadRequest as u64], "double free refused");
    let zero = Wave::new(s.buffer.clone(), 1).call(DEVMEM, |_| [0; 8]).unwrap();
    assert_eq!(zero.lane(0), [0, ErrorCode::Refused as u64], "zero bytes");
    s.listener.shutdown();
}

// Every test above, once per wire protocol.
for_every_protocol!(
    printf_from_every_lane_of_a_wave,
    a_bad_format_prints_up_to_the_problem_and_printing_goes_on,
    malformed_streams_get_error_replies_and_the_listener_goes_on,
    devmem_allocates_frees_and_refuses
);
