//! The code objects loaded in the process, through the HSA loader extension: what a device pc
//! is resolved against (the SANITIZER report names the code object and the pc's offset in it).
//!
//! [`HsaRuntime::loaded_code_objects`] asks the runtime for the extension's function table
//! (`hsa_system_get_major_extension_table(HSA_EXTENSION_AMD_LOADER, 1, ...)`, table 1.03), walks
//! every executable (`hsa_ven_amd_loader_iterate_executables`) and each of its loaded code objects
//! (`hsa_ven_amd_loader_executable_iterate_loaded_code_objects`), and reads LOAD_BASE, LOAD_SIZE,
//! LOAD_DELTA, URI_LENGTH and URI of each, as ROCm's own sanitizer support does. The list is read
//! when asked (at report time): code objects come and go with the program's modules.

use std::ffi::c_void;

use hsa_sys::{
    AmdLoaderTable, HsaExecutable, HsaLoadedCodeObject, HsaStatus, LoadedCodeObjectInfo, EXTENSION_AMD_LOADER,
};

use super::error::HsaError;
use super::runtime::HsaRuntime;

/// At most this many code objects are listed (a bound on what one report costs).
pub const MAX_CODE_OBJECTS: usize = 4096;

/// URIs longer than this are cut (a bound on what one code object costs).
pub const MAX_URI_LEN: u32 = 4096;

/// One loaded code object: where it lies in device memory and what it was loaded from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedCodeObject {
    /// The URI it was loaded from (`file://...` or `memory://...`, see
    /// [`CodeObjectUri`](crate::services::sanitizer::CodeObjectUri)).
    pub uri: String,
    /// Base address of its lowest loaded segment.
    pub load_base: u64,
    /// Bytes of its contiguous allocation.
    pub load_size: u64,
    /// Load address minus the address the code object names: `pc - load_delta` is the pc's address
    /// in the code object's own terms (what a symboliser wants).
    pub load_delta: i64,
}

impl LoadedCodeObject {
    /// Whether `address` lies in `load_base .. load_base + load_size`.
    ///
    /// ```
    /// use hostcall::backend::hsa::LoadedCodeObject;
    /// let object = LoadedCodeObject { uri: "memory://1#offset=0x1000&size=64".into(), load_base: 0x1000, load_size: 0x100, load_delta: 0x1000 };
    /// assert!(object.contains(0x1000) && object.contains(0x10ff));
    /// assert!(!object.contains(0x1100) && !object.contains(0xfff));
    /// ```
    pub fn contains(&self, address: u64) -> bool {
        address.checked_sub(self.load_base).is_some_and(|offset| offset < self.load_size)
    }
}

/// What the callbacks share: the table, the list so far, the first failure.
struct Walk {
    table: AmdLoaderTable,
    found: Vec<LoadedCodeObject>,
    failure: Option<(&'static str, HsaStatus)>,
}

impl HsaRuntime {
    /// The loader extension's function table (version 1.03), or why it is not there.
    pub fn loader_table(&self) -> Result<AmdLoaderTable, HsaError> {
        let lib = self.library();
        let Some(get_table) = lib.hsa_system_get_major_extension_table else {
            return Err(HsaError::Status {
                call: "hsa_system_get_major_extension_table",
                status: HsaStatus::ERROR,
                text: "the runtime library does not export it".into(),
            });
        };
        let mut table = AmdLoaderTable::default();
        // SAFETY: the runtime is initialised (`HsaRuntime` exists); `table` is a writable
        // `hsa_ven_amd_loader_1_03_pfn_t` of the size passed (checked against ROCm's header).
        let status = unsafe {
            get_table(
                EXTENSION_AMD_LOADER,
                1,
                std::mem::size_of::<AmdLoaderTable>(),
                (&mut table as *mut AmdLoaderTable).cast(),
            )
        };
        self.check("hsa_system_get_major_extension_table", status).map(|()| table)
    }

    /// Every code object loaded in the process now (at most [`MAX_CODE_OBJECTS`]).
    pub fn loaded_code_objects(&self) -> Result<Vec<LoadedCodeObject>, HsaError> {
        let table = self.loader_table()?;
        let missing = |call| HsaError::Status {
            call,
            status: HsaStatus::ERROR,
            text: "null in the loader table".into(),
        };
        let iterate = table
            .hsa_ven_amd_loader_iterate_executables
            .ok_or_else(|| missing("hsa_ven_amd_loader_iterate_executables"))?;
        if table.hsa_ven_amd_loader_executable_iterate_loaded_code_objects.is_none() {
            return Err(missing("hsa_ven_amd_loader_executable_iterate_loaded_code_objects"));
        }
        if table.hsa_ven_amd_loader_loaded_code_object_get_info.is_none() {
            return Err(missing("hsa_ven_amd_loader_loaded_code_object_get_info"));
        }
        let mut walk = Walk { table, found: Vec::new(), failure: None };
        // SAFETY: the callback has the C prototype the table's entry expects; `walk` outlives the
        // call and is only used through the pointer during it, on this thread.
        let status = unsafe { iterate(on_executable, (&mut walk as *mut Walk).cast()) };
        if let Some((call, status)) = walk.failure {
            self.check(call, status)?;
        }
        if status != HsaStatus::INFO_BREAK {
            self.check("hsa_ven_amd_loader_iterate_executables", status)?;
        }
        Ok(walk.found)
    }
}

/// `hsa_ven_amd_loader_iterate_executables`'s callback: walks one executable's code objects.
unsafe extern "C" fn on_executable(executable: HsaExecutable, data: *mut c_void) -> HsaStatus {
    // SAFETY: `data` is the `Walk` that `loaded_code_objects` passed, alive and not otherwise
    // borrowed during the iteration.
    let walk = unsafe { &mut *data.cast::<Walk>() };
    let Some(iterate) = walk.table.hsa_ven_amd_loader_executable_iterate_loaded_code_objects else {
        return HsaStatus::ERROR;
    };
    // SAFETY: as in `loaded_code_objects`: a matching callback and the same live `Walk`.
    let status = unsafe { iterate(executable, on_code_object, data) };
    if status != HsaStatus::SUCCESS && walk.failure.is_none() {
        walk.failure = Some(("hsa_ven_amd_loader_executable_iterate_loaded_code_objects", status));
    }
    status
}

/// `hsa_ven_amd_loader_executable_iterate_loaded_code_objects`'s callback: reads one code object.
unsafe extern "C" fn on_code_object(
    _executable: HsaExecutable,
    code_object: HsaLoadedCodeObject,
    data: *mut c_void,
) -> HsaStatus {
    // SAFETY: as in `on_executable`.
    let walk = unsafe { &mut *data.cast::<Walk>() };
    if walk.found.len() >= MAX_CODE_OBJECTS {
        return HsaStatus::INFO_BREAK;
    }
    match read_code_object(&walk.table, code_object) {
        Ok(object) => {
            walk.found.push(object);
            HsaStatus::SUCCESS
        }
        Err(status) => {
            walk.failure.get_or_insert(("hsa_ven_amd_loader_loaded_code_object_get_info", status));
            status
        }
    }
}

/// Reads the attributes of one loaded code object.
fn read_code_object(
    table: &AmdLoaderTable,
    code_object: HsaLoadedCodeObject,
) -> Result<LoadedCodeObject, HsaStatus> {
    let get_info = table.hsa_ven_amd_loader_loaded_code_object_get_info.ok_or(HsaStatus::ERROR)?;
    let get = |attribute: LoadedCodeObjectInfo, value: *mut c_void| {
        // SAFETY: `code_object` came from the runtime's iteration; `value` points to writable
        // memory of the attribute's C type (see each call below).
        let status = unsafe { get_info(code_object, attribute, value) };
        if status == HsaStatus::SUCCESS {
            Ok(())
        } else {
            Err(status)
        }
    };
    let (mut load_base, mut load_size, mut load_delta, mut uri_len) = (0u64, 0u64, 0i64, 0u32);
    get(LoadedCodeObjectInfo::LOAD_BASE, (&mut load_base as *mut u64).cast())?; // uint64_t
    get(LoadedCodeObjectInfo::LOAD_SIZE, (&mut load_size as *mut u64).cast())?; // uint64_t
    get(LoadedCodeObjectInfo::LOAD_DELTA, (&mut load_delta as *mut i64).cast())?; // int64_t
    get(LoadedCodeObjectInfo::URI_LENGTH, (&mut uri_len as *mut u32).cast())?; // uint32_t
    let uri = if uri_len == 0 || uri_len > MAX_URI_LEN {
        String::new()
    } else {
        // The runtime writes URI_LENGTH bytes (ROCr: no NUL); one more zeroed byte for safety.
        let mut bytes = vec![0u8; uri_len as usize + 1];
        get(LoadedCodeObjectInfo::URI, bytes.as_mut_ptr().cast())?; // char[URI_LENGTH]
        bytes.truncate(uri_len as usize);
        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
            bytes.truncate(nul);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok(LoadedCodeObject { uri, load_base, load_size, load_delta })
}
