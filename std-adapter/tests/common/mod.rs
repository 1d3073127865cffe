//! What several integration tests share.

/// One test module per protocol listed (`[module: Protocol, ...]`), each running every named test
/// function (`fn name(protocol: Protocol)`) with that protocol: the tests are written once.
#[allow(unused_macros)] // used through the macros below
macro_rules! protocol_tests {
    ([$($module:ident: $protocol:ident),*] $names:tt) => {
        $(protocol_tests!(@module $module $protocol $names);)*
    };
    (@module $module:ident $protocol:ident [$($name:ident),*]) => {
        mod $module {
            $(#[test] fn $name() { super::$name(hostcall::buffer::Protocol::$protocol) })*
        }
    };
}

/// Runs each named test function once per wire protocol, as `stack_protocol::name`,
/// `phase_protocol::name` and `line_protocol::name`.
#[allow(unused_macros)] // not every test binary uses it
macro_rules! for_every_protocol {
    ($($name:ident),* $(,)?) => {
        protocol_tests!([stack_protocol: Stack, phase_protocol: Phase, line_protocol: Line] [$($name),*]);
    };
}

/// One test module per ROCm ABI (stack, phase): for what only ROCm's ABIs have, such as the
/// lifecycle API that ROCm's runtime calls.
#[allow(unused_macros)] // not every test binary uses it
macro_rules! for_rocm_protocols {
    ($($name:ident),* $(,)?) => {
        protocol_tests!([stack_protocol: Stack, phase_protocol: Phase] [$($name),*]);
    };
}

/// One test module per protocol whose buffers several listeners may split into ranges (phase,
/// line: not the stack protocol, whose one ready stack cannot be split).
#[allow(unused_macros)] // not every test binary uses it
macro_rules! for_splittable_protocols {
    ($($name:ident),* $(,)?) => {
        protocol_tests!([phase_protocol: Phase, line_protocol: Line] [$($name),*]);
    };
}

#[allow(dead_code)] // not every test binary uses it
pub mod printing;
#[allow(dead_code)] // not every test binary uses it
pub mod watchdog;
#[allow(dead_code)] // not every test binary uses it
pub mod waves;
