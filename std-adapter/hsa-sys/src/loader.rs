//! The parts of AMD's loader extension (`hsa_ven_amd_loader.h`, ROCm 5.x) that find the loaded
//! code object holding a device address: its function table (version 1.03, from
//! `hsa_system_get_major_extension_table(HSA_EXTENSION_AMD_LOADER, 1, ...)`), the executable and
//! loaded-code-object handles, and the loaded-code-object attributes.
//!
//! ```
//! use hsa_sys::{AmdLoaderTable, LoadedCodeObjectInfo, EXTENSION_AMD_LOADER};
//! assert_eq!(EXTENSION_AMD_LOADER, 0x201);
//! assert_eq!(LoadedCodeObjectInfo::URI.0, 12);
//! // Seven function pointers, in the header's order.
//! assert_eq!(std::mem::size_of::<AmdLoaderTable>(), 7 * 8);
//! ```

use core::ffi::c_void;
use core::fmt;

use crate::enums::{c_enum, HsaStatus};

/// `HSA_EXTENSION_AMD_LOADER` (of `hsa_extension_t`, passed as the `uint16_t extension` of
/// `hsa_system_get_major_extension_table`).
pub const EXTENSION_AMD_LOADER: u16 = 0x201;

/// The `hsa_extension_t` constants this crate uses, for the header check.
pub const EXTENSION_CONSTANTS: &[(&str, u64)] = &[("HSA_EXTENSION_AMD_LOADER", EXTENSION_AMD_LOADER as u64)];

/// An executable, as an opaque handle. C: `hsa_executable_t`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct HsaExecutable {
    /// Opaque handle.
    pub handle: u64,
}

/// A code object loaded into an executable, as an opaque handle. C: `hsa_loaded_code_object_t`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct HsaLoadedCodeObject {
    /// Opaque handle.
    pub handle: u64,
}

c_enum! {
    /// An attribute of a loaded code object, for `hsa_ven_amd_loader_loaded_code_object_get_info`
    /// (LOAD_* are defined only once the executable is frozen).
    LoadedCodeObjectInfo(u32) = "hsa_ven_amd_loader_loaded_code_object_info_t" {
        /// Load address minus the address the code object names (`int64_t`).
        LOAD_DELTA = HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_DELTA = 8;
        /// Base address of the lowest loaded segment (`uint64_t`).
        LOAD_BASE = HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE = 9;
        /// Bytes of its contiguous allocation (`uint64_t`).
        LOAD_SIZE = HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE = 10;
        /// Length of the URI without its NUL (`uint32_t`).
        URI_LENGTH = HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI_LENGTH = 11;
        /// The URI it was loaded from (`char[URI_LENGTH]`; ROCr writes no NUL past it):
        /// `file://path[#offset=N&size=M]` or `memory://pid#offset=N&size=M`.
        URI = HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI = 12;
    }
}

/// The callback of `hsa_ven_amd_loader_iterate_executables`.
pub type ExecutableCallback = unsafe extern "C" fn(executable: HsaExecutable, data: *mut c_void) -> HsaStatus;

/// The callback of `hsa_ven_amd_loader_executable_iterate_loaded_code_objects`.
pub type LoadedCodeObjectCallback = unsafe extern "C" fn(
    executable: HsaExecutable,
    code_object: HsaLoadedCodeObject,
    data: *mut c_void,
) -> HsaStatus;

/// The loader extension's function table, version 1.03. C: `hsa_ven_amd_loader_1_03_pfn_t`.
/// Only the entries this crate calls are typed; the others are kept as opaque pointers so that
/// the layout is the header's. `None` where the runtime left an entry null.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct AmdLoaderTable {
    /// `hsa_ven_amd_loader_query_host_address` (not typed here).
    pub hsa_ven_amd_loader_query_host_address: Option<unsafe extern "C" fn()>,
    /// `hsa_ven_amd_loader_query_segment_descriptors` (not typed here).
    pub hsa_ven_amd_loader_query_segment_descriptors: Option<unsafe extern "C" fn()>,
    /// `hsa_ven_amd_loader_query_executable` (not typed here).
    pub hsa_ven_amd_loader_query_executable: Option<unsafe extern "C" fn()>,
    /// `hsa_status_t (hsa_executable_t, callback, void* data)`: each loaded code object of an
    /// executable.
    pub hsa_ven_amd_loader_executable_iterate_loaded_code_objects: Option<
        unsafe extern "C" fn(
            executable: HsaExecutable,
            callback: LoadedCodeObjectCallback,
            data: *mut c_void,
        ) -> HsaStatus,
    >,
    /// `hsa_status_t (hsa_loaded_code_object_t, attribute, void* value)`.
    pub hsa_ven_amd_loader_loaded_code_object_get_info: Option<
        unsafe extern "C" fn(
            code_object: HsaLoadedCodeObject,
            attribute: LoadedCodeObjectInfo,
            value: *mut c_void,
        ) -> HsaStatus,
    >,
    /// `hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size` (not typed here).
    pub hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size:
        Option<unsafe extern "C" fn()>,
    /// `hsa_status_t (callback, void* data)`: each executable of the process.
    pub hsa_ven_amd_loader_iterate_executables:
        Option<unsafe extern "C" fn(callback: ExecutableCallback, data: *mut c_void) -> HsaStatus>,
}

impl fmt::Debug for AmdLoaderTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmdLoaderTable")
            .field("iterate_executables", &self.hsa_ven_amd_loader_iterate_executables.is_some())
            .field(
                "executable_iterate_loaded_code_objects",
                &self.hsa_ven_amd_loader_executable_iterate_loaded_code_objects.is_some(),
            )
            .field(
                "loaded_code_object_get_info",
                &self.hsa_ven_amd_loader_loaded_code_object_get_info.is_some(),
            )
            .finish_non_exhaustive()
    }
}

/// `hsa_status_t hsa_system_get_major_extension_table(uint16_t extension, uint16_t version_major,
/// size_t table_length, void* table)`.
pub type GetMajorExtensionTable = unsafe extern "C" fn(
    extension: u16,
    version_major: u16,
    table_length: usize,
    table: *mut c_void,
) -> HsaStatus;
