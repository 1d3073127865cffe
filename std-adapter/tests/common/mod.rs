//! What several integration tests share.

/// Runs each named test function (`fn name(protocol: Protocol)`) once per wire protocol, as
/// `stack_protocol::name`, `phase_protocol::name` and `line_protocol::name`: the tests are written once.
#[macro_export]
macro_rules! for_every_protocol {
    ($($name:ident),* $(,)?) => {
        for_rocm_protocols!($($name),*);
        mod line_protocol {
            $(#[test] fn $name() { super::$name(hostcall::buffer::Protocol::Line) })*
        }
    };
}

/// One test module per ROCm ABI (stack, phase): for what only ROCm's ABIs have, such as the
/// lifecycle API that ROCm's runtime calls.
#[allow(unused_macros)] // not every test binary uses it
macro_rules! for_rocm_protocols {
    ($($name:ident),* $(,)?) => {
        mod stack_protocol {
            $(#[test] fn $name() { super::$name(hostcall::buffer::Protocol::Stack) })*
        }
        mod phase_protocol {
            $(#[test] fn $name() { super::$name(hostcall::buffer::Protocol::Phase) })*
        }
    };
}

#[allow(dead_code)] // not every test binary uses it
pub mod captured;
#[allow(dead_code)] // not every test binary uses it
pub mod watchdog;
