//! Bindings to the parts of AMD's HSA runtime (ROCr) that hostcall needs, loaded at run time.
//!
//! Nothing links against ROCm: [`HsaLib::load`] opens `libhsa-runtime64.so.1` with `dlopen`
//! (through `libloading`), or the file named by the `HOSTCALL_HSA_LIB` environment variable, and
//! resolves each function into a field of [`HsaLib`]. So this crate builds and its users run on
//! machines without ROCm; they find out at run time, through a typed [`LoadError`] that names the
//! path tried and the loader's message.
//!
//! The C enums are `#[repr(transparent)]` newtypes with associated constants ([`HsaStatus`],
//! [`AgentInfo`], [`DeviceType`], [`AmdMemoryPoolInfo`], [`AmdSegment`],
//! [`AmdMemoryPoolGlobalFlag`], [`SignalCondition`], [`WaitState`], [`SystemInfo`], ...), and the
//! handles are `#[repr(C)]` structs of one `u64` ([`HsaAgent`], [`HsaSignal`], [`AmdMemoryPool`]).
//! Every constant and every struct layout is checked against ROCm's own headers by a test that
//! compiles [`c_check_source`] with the C compiler where `/usr/include/hsa/hsa.h` exists (Debian's
//! `libhsa-runtime-dev`, ROCm 5.2.3 at the time of writing).
//!
//! ```
//! // Works with or without ROCm installed.
//! match hsa_sys::HsaLib::load_from("/nonexistent/libhsa-runtime64.so.1") {
//!     Ok(_) => unreachable!(),
//!     Err(error) => assert!(error.to_string().contains("/nonexistent/libhsa-runtime64.so.1")),
//! }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]

mod api;
mod enums;
mod loader;
mod types;

pub use api::{
    library_path, library_path_from, AgentCallback, HsaLib, LoadError, MemoryPoolCallback, DEFAULT_LIBRARY,
    LIBRARY_ENV, ROCM_LIBRARY,
};
pub use enums::*;
pub use loader::*;
pub use types::*;

use core::mem::{align_of, offset_of, size_of};

/// The layout of one C type as this crate defines it: size, alignment and field offsets.
#[derive(Debug, Clone, Copy)]
pub struct CLayout {
    /// The C type name.
    pub c_type: &'static str,
    /// `sizeof`.
    pub size: usize,
    /// `_Alignof`.
    pub align: usize,
    /// `(field, offsetof)` for each field.
    pub fields: &'static [(&'static str, usize)],
}

macro_rules! enum_layouts {
    ($($ty:ty),* $(,)?) => {
        [$(CLayout { c_type: <$ty>::C_TYPE, size: size_of::<$ty>(), align: align_of::<$ty>(), fields: &[] }),*]
    };
}

/// Every C enum type this crate mirrors, as `(C type, [(C name, value)])`.
pub const C_ENUMS: &[(&str, &[(&str, u64)])] = &[
    (HsaStatus::C_TYPE, HsaStatus::C_CONSTANTS),
    (SystemInfo::C_TYPE, SystemInfo::C_CONSTANTS),
    (Endianness::C_TYPE, Endianness::C_CONSTANTS),
    (MachineModel::C_TYPE, MachineModel::C_CONSTANTS),
    (AgentInfo::C_TYPE, AgentInfo::C_CONSTANTS),
    (DeviceType::C_TYPE, DeviceType::C_CONSTANTS),
    (AmdMemoryPoolInfo::C_TYPE, AmdMemoryPoolInfo::C_CONSTANTS),
    (AmdSegment::C_TYPE, AmdSegment::C_CONSTANTS),
    (AmdMemoryPoolGlobalFlag::C_TYPE, AmdMemoryPoolGlobalFlag::C_CONSTANTS),
    (AmdAgentMemoryPoolInfo::C_TYPE, AmdAgentMemoryPoolInfo::C_CONSTANTS),
    (AmdMemoryPoolAccess::C_TYPE, AmdMemoryPoolAccess::C_CONSTANTS),
    (AmdLinkInfoType::C_TYPE, AmdLinkInfoType::C_CONSTANTS),
    (SignalCondition::C_TYPE, SignalCondition::C_CONSTANTS),
    (WaitState::C_TYPE, WaitState::C_CONSTANTS),
    ("hsa_extension_t", EXTENSION_CONSTANTS),
    (LoadedCodeObjectInfo::C_TYPE, LoadedCodeObjectInfo::C_CONSTANTS),
];

/// The layout of every C type this crate mirrors (enums: size and alignment only).
pub fn c_layouts() -> Vec<CLayout> {
    let mut layouts = enum_layouts![
        HsaStatus,
        SystemInfo,
        Endianness,
        MachineModel,
        AgentInfo,
        DeviceType,
        AmdMemoryPoolInfo,
        AmdSegment,
        AmdMemoryPoolGlobalFlag,
        AmdAgentMemoryPoolInfo,
        AmdMemoryPoolAccess,
        AmdLinkInfoType,
        SignalCondition,
        WaitState,
        LoadedCodeObjectInfo,
    ]
    .to_vec();
    layouts.extend([
        CLayout {
            c_type: "hsa_signal_value_t",
            size: size_of::<SignalValue>(),
            align: align_of::<SignalValue>(),
            fields: &[],
        },
        CLayout {
            c_type: "hsa_agent_t",
            size: size_of::<HsaAgent>(),
            align: align_of::<HsaAgent>(),
            fields: &[("handle", offset_of!(HsaAgent, handle))],
        },
        CLayout {
            c_type: "hsa_signal_t",
            size: size_of::<HsaSignal>(),
            align: align_of::<HsaSignal>(),
            fields: &[("handle", offset_of!(HsaSignal, handle))],
        },
        CLayout {
            c_type: "hsa_amd_memory_pool_t",
            size: size_of::<AmdMemoryPool>(),
            align: align_of::<AmdMemoryPool>(),
            fields: &[("handle", offset_of!(AmdMemoryPool, handle))],
        },
        CLayout {
            c_type: "hsa_amd_memory_pool_link_info_t",
            size: size_of::<AmdMemoryPoolLinkInfo>(),
            align: align_of::<AmdMemoryPoolLinkInfo>(),
            fields: &[
                ("min_latency", offset_of!(AmdMemoryPoolLinkInfo, min_latency)),
                ("max_latency", offset_of!(AmdMemoryPoolLinkInfo, max_latency)),
                ("min_bandwidth", offset_of!(AmdMemoryPoolLinkInfo, min_bandwidth)),
                ("max_bandwidth", offset_of!(AmdMemoryPoolLinkInfo, max_bandwidth)),
                ("atomic_support_32bit", offset_of!(AmdMemoryPoolLinkInfo, atomic_support_32bit)),
                ("atomic_support_64bit", offset_of!(AmdMemoryPoolLinkInfo, atomic_support_64bit)),
                ("coherent_support", offset_of!(AmdMemoryPoolLinkInfo, coherent_support)),
                ("link_type", offset_of!(AmdMemoryPoolLinkInfo, link_type)),
                ("numa_distance", offset_of!(AmdMemoryPoolLinkInfo, numa_distance)),
            ],
        },
        CLayout {
            c_type: "hsa_executable_t",
            size: size_of::<HsaExecutable>(),
            align: align_of::<HsaExecutable>(),
            fields: &[("handle", offset_of!(HsaExecutable, handle))],
        },
        CLayout {
            c_type: "hsa_loaded_code_object_t",
            size: size_of::<HsaLoadedCodeObject>(),
            align: align_of::<HsaLoadedCodeObject>(),
            fields: &[("handle", offset_of!(HsaLoadedCodeObject, handle))],
        },
        CLayout {
            c_type: "hsa_ven_amd_loader_1_03_pfn_t",
            size: size_of::<AmdLoaderTable>(),
            align: align_of::<AmdLoaderTable>(),
            fields: &[
                (
                    "hsa_ven_amd_loader_executable_iterate_loaded_code_objects",
                    offset_of!(AmdLoaderTable, hsa_ven_amd_loader_executable_iterate_loaded_code_objects),
                ),
                (
                    "hsa_ven_amd_loader_loaded_code_object_get_info",
                    offset_of!(AmdLoaderTable, hsa_ven_amd_loader_loaded_code_object_get_info),
                ),
                (
                    "hsa_ven_amd_loader_iterate_executables",
                    offset_of!(AmdLoaderTable, hsa_ven_amd_loader_iterate_executables),
                ),
            ],
        },
    ]);
    layouts
}

/// A C translation unit of `_Static_assert`s that holds exactly when every constant in
/// [`C_ENUMS`] and every layout in [`c_layouts`] matches ROCm's `hsa/hsa.h` and
/// `hsa/hsa_ext_amd.h` (and `hsa/hsa_ven_amd_loader.h`). Compile it (`cc -std=c11 -c`) to check the bindings against installed
/// headers.
pub fn c_check_source() -> String {
    let mut c = String::from(
        "/* Generated by hsa_sys::c_check_source(): the Rust bindings against ROCm's headers. */\n\
         #include <stddef.h>\n#include <stdint.h>\n#include <stdbool.h>\n\
         #include <hsa/hsa.h>\n#include <hsa/hsa_ext_amd.h>\n#include <hsa/hsa_ven_amd_loader.h>\n\n",
    );
    for (c_type, constants) in C_ENUMS {
        c.push_str(&format!("/* {c_type} */\n"));
        for (name, value) in *constants {
            c.push_str(&format!(
                "_Static_assert((unsigned long long){name} == {value:#x}ULL, \"{name} is {value:#x} in hsa-sys\");\n"
            ));
        }
    }
    c.push('\n');
    for layout in c_layouts() {
        let CLayout { c_type, size, align, fields } = layout;
        c.push_str(&format!(
            "_Static_assert(sizeof({c_type}) == {size}, \"sizeof({c_type}) is {size} in hsa-sys\");\n\
             _Static_assert(_Alignof({c_type}) == {align}, \"_Alignof({c_type}) is {align} in hsa-sys\");\n"
        ));
        for (field, offset) in fields {
            c.push_str(&format!(
                "_Static_assert(offsetof({c_type}, {field}) == {offset}, \"offsetof({c_type}, {field}) is {offset} in hsa-sys\");\n"
            ));
        }
    }
    c.push_str("_Static_assert((hsa_signal_value_t)-1 < 0, \"hsa_signal_value_t is signed in hsa-sys\");\n");
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_debug_prints_the_c_name() {
        assert_eq!(format!("{:?}", HsaStatus::ERROR_OUT_OF_RESOURCES), "HSA_STATUS_ERROR_OUT_OF_RESOURCES");
        assert_eq!(format!("{:?}", HsaStatus(0x4242)), "HsaStatus(0x4242)");
        assert_eq!(HsaStatus(0x1008).c_name(), Some("HSA_STATUS_ERROR_OUT_OF_RESOURCES"));
    }

    #[test]
    fn fine_grained_flag_tests_the_mask() {
        assert!(AmdMemoryPoolGlobalFlag::FINE_GRAINED.is_set_in(0b011));
        assert!(!AmdMemoryPoolGlobalFlag::FINE_GRAINED.is_set_in(0b101));
    }

    #[test]
    fn the_generated_c_names_every_constant() {
        let source = c_check_source();
        for (_, constants) in C_ENUMS {
            for (name, _) in *constants {
                assert!(source.contains(&format!("(unsigned long long){name} ==")), "{name} missing");
            }
        }
        assert!(source.contains("offsetof(hsa_amd_memory_pool_link_info_t, atomic_support_64bit) == 17"));
    }

    #[test]
    fn library_path_prefers_a_non_empty_override() {
        assert_eq!(library_path_from(None), DEFAULT_LIBRARY);
        assert_eq!(library_path_from(Some("".into())), DEFAULT_LIBRARY);
        assert_eq!(library_path_from(Some("/x/libhsa.so".into())), "/x/libhsa.so");
    }

    #[test]
    fn a_missing_library_is_an_open_error_naming_the_path() {
        let path = "/nonexistent/hostcall/libhsa-runtime64.so.1";
        match HsaLib::load_from(path) {
            Err(LoadError::Open { path: tried, message }) => {
                assert_eq!(tried, path);
                assert!(!message.is_empty());
            }
            other => panic!("expected an open error, got {other:?}"),
        }
    }

    #[test]
    fn a_library_without_hsa_is_a_symbol_error() {
        // libc is on every Linux machine and has no HSA function.
        match HsaLib::load_from("libc.so.6") {
            Err(LoadError::Symbol { symbol, .. }) => assert_eq!(symbol, HsaLib::FUNCTIONS[0]),
            other => panic!("expected a symbol error, got {other:?}"),
        }
    }
}

/// The crate's README, so that `cargo test --doc` runs its example (only under rustdoc's test mode).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}
