//! What several integration tests share.

/// One test module per protocol listed (`[module: Protocol, ...]`), each running every named test
/// function (`fn name(protocol: Protocol)`) with that protocol: the tests are written once.
#[allow(unused_macros)] // used through the macros below
macro_rules! protocol_tests {
    ([$($module:ident: $protocol:expr),*] $names:tt) => {
        $(protocol_tests!(@module $module ($protocol) $names);)*
    };
    (@module $module:ident $protocol:tt [$($name:ident),*]) => {
        mod $module {
            #[allow(unused_imports)] // the protocol's expression names it
            use hostcall::Protocol;
            $(#[test] fn $name() { super::$name($protocol) })*
        }
    };
}

/// The protocol the tests run LLVM-RPC buffers with: ports of 64 lanes, as wide as the widest
/// wave, so every wave of the tests fits a port (a narrower port refuses wider waves, which
/// `rpc_listener.rs` checks).
#[allow(dead_code)] // not every test binary uses it
pub const RPC: hostcall::Protocol = hostcall::Protocol::Rpc { lanes: 64 };

/// Runs each named test function once per wire protocol, as `stack_protocol::name`,
/// `phase_protocol::name`, `line_protocol::name` and `rpc_protocol::name` (LLVM-RPC buffers of
/// [`RPC`]'s geometry, their ports claimed by emulated waves through the client's lock bits and
/// their calls carried in this project's `'h'` opcodes, ROCm's `'r'` for ROCm's four services).
#[allow(unused_macros)] // not every test binary uses it
macro_rules! for_every_protocol {
    ($($name:ident),* $(,)?) => {
        protocol_tests!([
            stack_protocol: Protocol::Stack,
            phase_protocol: Protocol::Phase,
            line_protocol: Protocol::Line,
            rpc_protocol: crate::common::RPC
        ] [$($name),*]);
    };
}

/// One test module per ROCm ABI (stack, phase): for what only ROCm's ABIs have, such as the
/// lifecycle API that ROCm's runtime calls (which refuses line and RPC buffers: ROCm's device
/// code finds a hostcall buffer through the kernel's implicit arguments, an RPC client through
/// its `__llvm_rpc_client` object).
#[allow(unused_macros)] // not every test binary uses it
macro_rules! for_rocm_protocols {
    ($($name:ident),* $(,)?) => {
        protocol_tests!([stack_protocol: Protocol::Stack, phase_protocol: Protocol::Phase] [$($name),*]);
    };
}

/// One test module per protocol whose buffers several listeners may split into ranges (phase,
/// line, LLVM-RPC: not the stack protocol, whose one ready stack cannot be split;
/// `Protocol::range_capable`).
#[allow(unused_macros)] // not every test binary uses it
macro_rules! for_splittable_protocols {
    ($($name:ident),* $(,)?) => {
        protocol_tests!([
            phase_protocol: Protocol::Phase,
            line_protocol: Protocol::Line,
            rpc_protocol: crate::common::RPC
        ] [$($name),*]);
    };
}

#[allow(dead_code)] // not every test binary uses it
pub mod counting;
#[allow(dead_code)] // not every test binary uses it
pub mod gate;
#[allow(dead_code)] // not every test binary uses it
pub mod logs;
#[allow(dead_code)] // not every test binary uses it
pub mod printing;
#[allow(dead_code)] // not every test binary uses it
pub mod raw_memory;
#[allow(dead_code)] // not every test binary uses it
pub mod rng;
#[allow(dead_code)] // not every test binary uses it
pub mod watchdog;
#[allow(dead_code)] // not every test binary uses it
pub mod waves;
