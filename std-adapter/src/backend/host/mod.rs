//! The host backend: ordinary host memory ([`HostMemory`]) and a doorbell in it that a host
//! thread can sleep on ([`ParkingDoorbell`]). What emulated waves and embedded runtimes use, and
//! what [`detect`](crate::detect) falls back to where there is no GPU runtime.

mod memory;
mod parking;
#[cfg(test)]
mod tests;

pub use memory::HostMemory;
pub use parking::ParkingDoorbell;
