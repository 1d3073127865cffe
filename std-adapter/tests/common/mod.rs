//! What several integration tests share.

/// Runs each named test function (`fn name(protocol: Protocol)`) once per wire protocol, as
/// `stack_protocol::name`, `phase_protocol::name` and `line_protocol::name`: the tests are written once.
#[macro_export]
macro_rules! for_both_protocols {
    ($($name:ident),* $(,)?) => {
        mod stack_protocol {
            $(#[test] fn $name() { super::$name(hostcall::buffer::Protocol::Stack) })*
        }
        mod phase_protocol {
            $(#[test] fn $name() { super::$name(hostcall::buffer::Protocol::Phase) })*
        }
        mod line_protocol {
            $(#[test] fn $name() { super::$name(hostcall::buffer::Protocol::Line) })*
        }
    };
}

#[allow(dead_code)] // not every test binary uses it
pub mod watchdog;
