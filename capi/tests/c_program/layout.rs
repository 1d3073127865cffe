//! The header's layout against Rust's: every offset, size and constant the C program prints.

use super::*;

/// Every offset, size and constant the header defines, printed by the C program, equals the
/// Rust definition (or PROTOCOL.md's number where Rust has none in this crate).
#[test]
fn the_header_layout_matches_rust() {
    use hostcall_capi::options::{self, HostcallEnableOptions};
    use hostcall_core as service;
    use hostcall_core::stack::{self as layout, Header, Prefix};
    use hostcall_core::{line, phase, rpc};
    use hostcall_core::{ErrorCode, ERROR_REPLY};
    use hostcall_core::{Payload, LANES, REPLY_WORDS, SLOT_WORDS};
    use hostcall_rs::Protocol;
    use hostcall_rs::{buffer_align_for, buffer_size_for};
    use std::mem::{align_of, offset_of, size_of};

    let out = run_mode(c_test(Link::Shared), "layout");
    let c: std::collections::HashMap<&str, u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("layout "))
        .map(|l| {
            let (name, value) = l.split_once(' ').unwrap();
            (name, value.parse().unwrap())
        })
        .collect();
    let size = |n| layout::buffer_size(n).unwrap() as u64;
    let descriptor = |begin: u64, end: u64, len: u64, id: u64| begin | end << 1 | len << 5 | id << 8;
    let expected: Vec<(&str, u64)> = vec![
        ("prefix.size", size_of::<Prefix>() as u64),
        ("prefix.headers", offset_of!(Prefix, headers) as u64),
        ("prefix.payloads", offset_of!(Prefix, payloads) as u64),
        ("prefix.doorbell", offset_of!(Prefix, doorbell) as u64),
        ("prefix.free_stack", offset_of!(Prefix, free_stack) as u64),
        ("prefix.ready_stack", offset_of!(Prefix, ready_stack) as u64),
        ("prefix.index_mask", offset_of!(Prefix, index_mask) as u64),
        ("header.size", size_of::<Header>() as u64),
        ("header.next", offset_of!(Header, next) as u64),
        ("header.activemask", offset_of!(Header, activemask) as u64),
        ("header.service", offset_of!(Header, service) as u64),
        ("header.control", offset_of!(Header, control) as u64),
        ("payload.size", size_of::<Payload>() as u64),
        // PROTOCOL.md section 2 (the phase layout's Rust types live in another module).
        ("phase.size", 56),
        ("phase.device_phase", 0),
        ("phase.host_phase", 8),
        ("phase.occupied", 16),
        ("phase.headers", 24),
        ("phase.payloads", 32),
        ("phase.doorbell", 40),
        ("phase.num_packets", 48),
        ("phase_header.size", 16),
        ("phase_header.activemask", 0),
        ("phase_header.service", 8),
        ("headers_offset", layout::HEADERS_OFFSET as u64),
        ("payloads_offset.3", layout::payloads_offset(3) as u64),
        ("buffer_size.3", size(3)),
        ("buffer_size.1000", size(1000)),
        ("lib.buffer_size.3", size(3)),
        ("lib.buffer_size.1000", size(1000)),
        ("buffer_align", layout::buffer_align() as u64),
        ("lib.buffer_align", layout::buffer_align() as u64),
        ("max_packets", u64::from(hostcall_core::MAX_PACKETS)),
        ("lanes", LANES as u64),
        ("slot_words", SLOT_WORDS as u64),
        ("reply_words", REPLY_WORDS as u64),
        ("service.function_call", u64::from(service::FUNCTION_CALL)),
        ("service.printf", u64::from(service::PRINTF)),
        ("service.devmem", u64::from(service::DEVMEM)),
        ("service.sanitizer", u64::from(service::SANITIZER)),
        ("control.ready", u64::from(layout::CONTROL_READY)),
        ("control.host_error", u64::from(layout::CONTROL_HOST_ERROR)),
        ("error.reply", ERROR_REPLY),
        ("error.unknown_service", ErrorCode::UnknownService as u64),
        ("error.service_panicked", ErrorCode::ServicePanicked as u64),
        ("error.bad_request", ErrorCode::BadRequest as u64),
        ("error.refused", ErrorCode::Refused as u64),
        ("error.shutting_down", ErrorCode::ShuttingDown as u64),
        // PROTOCOL.md section 4.
        ("msg.begin", 1),
        ("msg.end", 2),
        ("msg.reserved", 0b111 << 2),
        ("msg.descriptor", descriptor(1, 1, 7, 0xabcdef)),
        ("msg.len", 5),
        ("msg.id", (1 << 56) - 1),
        ("implicitarg.v4", hostcall_rs::IMPLICITARG_OFFSET_V4 as u64),
        ("implicitarg.v5", hostcall_rs::IMPLICITARG_OFFSET_V5 as u64),
        ("emulated_timeout_ms", hostcall_capi::emulated::EMULATED_TIMEOUT.as_millis() as u64),
        ("phase.buffer_align", phase::buffer_align() as u64),
        ("lib.phase.buffer_align", buffer_align_for(Protocol::Phase) as u64),
        ("lib.stack.buffer_align", buffer_align_for(Protocol::Stack) as u64),
        ("phase.occupied_words.33", phase::occupied_words(33) as u64),
        ("line.prefix.size", size_of::<line::Prefix>() as u64),
        ("line.prefix.requests", offset_of!(line::Prefix, requests) as u64),
        ("line.prefix.replies", offset_of!(line::Prefix, replies) as u64),
        ("line.prefix.device_seq", offset_of!(line::Prefix, device_seq) as u64),
        ("line.prefix.occupied", offset_of!(line::Prefix, occupied) as u64),
        ("line.prefix.served", offset_of!(line::Prefix, served) as u64),
        ("line.prefix.doorbell", offset_of!(line::Prefix, doorbell) as u64),
        ("line.prefix.num_packets", offset_of!(line::Prefix, num_packets) as u64),
        ("line.request.size", size_of::<line::Request>() as u64),
        ("line.request.align", align_of::<line::Request>() as u64),
        ("line.request.head", offset_of!(line::Request, head) as u64),
        ("line.request.mask", offset_of!(line::Request, mask) as u64),
        ("line.request.reserved", offset_of!(line::Request, reserved) as u64),
        ("line.request.lanes", offset_of!(line::Request, lanes) as u64),
        ("line.request.lane_words", line::REQUEST_LANE_WORDS as u64),
        ("line.reply.size", size_of::<line::Reply>() as u64),
        ("line.reply.align", align_of::<line::Reply>() as u64),
        ("line.reply.lanes", offset_of!(line::Reply, lanes) as u64),
        ("line.reply.lane_words", line::REPLY_LANE_WORDS as u64),
        ("line.seq_max", u64::from(line::SEQ_MAX)),
        ("line.seq_bits", u64::from(line::SEQ_BITS)),
        ("line.data_mask", line::DATA_MASK),
        ("line.word", line::word(0x1ff_dead_beef_cafe, 7)),
        ("line.word.max", line::word(u64::MAX, line::SEQ_MAX)),
        ("line.seq_of", u64::from(line::seq_of(0x1234_5678_9abc_def0))),
        ("line.data_of", line::data_of(0x1234_5678_9abc_def0)),
        ("line.buffer_align", line::buffer_align() as u64),
        ("protocol.stack", u64::from(options::HOSTCALL_PROTOCOL_STACK)),
        ("protocol.phase", u64::from(options::HOSTCALL_PROTOCOL_PHASE)),
        ("options.size", size_of::<HostcallEnableOptions>() as u64),
        ("options.field.size", offset_of!(HostcallEnableOptions, size) as u64),
        ("options.protocol", offset_of!(HostcallEnableOptions, protocol) as u64),
        ("options.occupied", offset_of!(HostcallEnableOptions, occupied) as u64),
        ("options.device_ordinal", offset_of!(HostcallEnableOptions, device_ordinal) as u64),
        ("options.reserved", offset_of!(HostcallEnableOptions, reserved) as u64),
        ("options.size_v1", u64::from(options::HOSTCALL_ENABLE_OPTIONS_SIZE_V1)),
        ("options.size_v3", u64::from(options::HOSTCALL_ENABLE_OPTIONS_SIZE_V3)),
        ("options.rpc_files_dir", offset_of!(HostcallEnableOptions, rpc_files_dir) as u64),
        ("options.max_size", u64::from(options::HOSTCALL_ENABLE_OPTIONS_MAX_SIZE)),
        ("rpc.max_ports", u64::from(rpc::MAX_PORT_COUNT)),
        ("rpc.max_lanes", hostcall_core::LANES as u64),
        ("rpc.client_size", rpc::CLIENT_OBJECT_SIZE as u64),
        ("rpc.buffer_align", rpc::buffer_align() as u64),
        ("version.major", env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap()),
        ("version.minor", env!("CARGO_PKG_VERSION_MINOR").parse().unwrap()),
        ("version.patch", env!("CARGO_PKG_VERSION_PATCH").parse().unwrap()),
    ];
    let mut expected: Vec<(String, u64)> = expected.into_iter().map(|(n, v)| (n.to_owned(), v)).collect();
    for n in [3usize, 1000] {
        let l = phase::Layout::new(n as u32).unwrap();
        for (name, value) in [
            ("device_phase_offset", l.device_phase),
            ("occupied_offset", l.occupied),
            ("host_phase_offset", l.host_phase),
            ("headers_offset", l.headers),
            ("payloads_offset", l.payloads),
            ("buffer_size", l.size),
        ] {
            expected.push((format!("phase.{name}.{n}"), value as u64));
        }
        let lib = buffer_size_for(Protocol::Phase, n as u32).unwrap();
        expected.push((format!("lib.phase.buffer_size.{n}"), lib as u64));
    }
    // The line protocol's placement for the packet counts `hostcall_test.c` prints (its `counts`).
    assert_eq!(line::buffer_align(), line::MIN_ALIGN);
    assert_eq!(buffer_align_for(Protocol::Line), line::buffer_align());
    for n in [2usize, 3, 31, 32, 33, 64, 1000, 1 << 24] {
        let l = line::Layout::new(n as u32).unwrap();
        for (name, value) in [
            ("occupied_words", n.div_ceil(32)),
            ("device_seq_offset", l.device_seq),
            ("occupied_offset", l.occupied),
            ("served_offset", l.served),
            ("requests_offset", l.requests),
            ("replies_offset", l.replies),
            ("buffer_size", l.size),
        ] {
            expected.push((format!("line.{name}.{n}"), value as u64));
        }
        assert_eq!(line::buffer_size(n as u32), Some(l.size));
        assert_eq!(buffer_size_for(Protocol::Line, n as u32).unwrap(), l.size, "n = {n}");
    }
    // LLVM-RPC geometries `hostcall_test.c` prints.
    for (p, l) in [(1u32, 1u32), (3, 2), (64, 32), (4096, 64)] {
        let layout = rpc::Layout::new(p, l).unwrap();
        for (name, value) in [
            ("device_mailbox_offset", layout.device_mailbox),
            ("headers_offset", layout.headers),
            ("lanes_offset", layout.buffers),
            ("buffer_size", layout.size),
        ] {
            expected.push((format!("rpc.{name}.{p}.{l}"), value as u64));
        }
        expected.push((
            format!("lib.rpc.buffer_size.{p}.{l}"),
            hostcall_capi::hostcall_rpc_buffer_size(p, l) as u64,
        ));
    }
    use hostcall_capi::status::*;
    let statuses = [
        ("status.null", HOSTCALL_ERR_NULL),
        ("status.misaligned", HOSTCALL_ERR_MISALIGNED),
        ("status.packet_count", HOSTCALL_ERR_PACKET_COUNT),
        ("status.already_enabled", HOSTCALL_ERR_ALREADY_ENABLED),
        ("status.other_listener", HOSTCALL_ERR_OTHER_LISTENER),
        ("status.overlaps", HOSTCALL_ERR_OVERLAPS),
        ("status.queue_taken", HOSTCALL_ERR_QUEUE_TAKEN),
        ("status.not_enabled", HOSTCALL_ERR_NOT_ENABLED),
        ("status.wrong_queue", HOSTCALL_ERR_WRONG_QUEUE),
        ("status.packet_count_mismatch", HOSTCALL_ERR_PACKET_COUNT_MISMATCH),
        ("status.from_listener", HOSTCALL_ERR_FROM_LISTENER),
        ("status.service_taken", HOSTCALL_ERR_SERVICE_TAKEN),
        ("status.timed_out", HOSTCALL_ERR_TIMED_OUT),
        ("status.thread", HOSTCALL_ERR_THREAD),
        ("status.panic", HOSTCALL_ERR_PANIC),
        ("status.other", HOSTCALL_ERR_OTHER),
        ("status.options", HOSTCALL_ERR_OPTIONS),
        ("status.rpc_client_size", HOSTCALL_ERR_RPC_CLIENT_SIZE),
        ("status.memory", HOSTCALL_ERR_MEMORY),
        ("status.not_registered", HOSTCALL_ERR_NOT_REGISTERED),
        ("status.in_log_callback", HOSTCALL_ERR_IN_LOG_CALLBACK),
        ("status.unknown_reason", HOSTCALL_ERR_UNKNOWN_REASON),
        ("memory.auto", hostcall_capi::memory::HOSTCALL_MEMORY_AUTO as i32),
        ("memory.host", hostcall_capi::memory::HOSTCALL_MEMORY_HOST as i32),
        ("memory.hsa", hostcall_capi::memory::HOSTCALL_MEMORY_HSA as i32),
        ("memory.cuda", hostcall_capi::memory::HOSTCALL_MEMORY_CUDA as i32),
    ];
    let expected = expected.into_iter().chain(statuses.map(|(name, code)| (name.to_owned(), code as u64)));
    let mut compared = 0;
    for (name, value) in expected {
        assert_eq!(c.get(name.as_str()), Some(&value), "{name}: header vs Rust");
        compared += 1;
    }
    assert_eq!(compared, c.len(), "every line the C program prints is compared");
    let version = format!("version {}", env!("CARGO_PKG_VERSION"));
    assert!(out.lines().any(|l| l == version), "HOSTCALL_VERSION is not the crate's {version:?}:\n{out}");
}
