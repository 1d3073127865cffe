//! The C enums of `hsa.h` and `hsa_ext_amd.h` that the adapter uses, and their constants (the
//! handles and structs are in `types.rs`).
//!
//! Every C enum is a `#[repr(transparent)]` newtype over the integer the C compiler gives it
//! (`unsigned int` for these enums: all their enumerators are non-negative and fit in 32 bits),
//! with one associated constant per enumerator. Each newtype also lists its constants as
//! `(C name, value)` pairs in `C_CONSTANTS`, which the header test turns into `_Static_assert`s
//! (see [`crate::c_check_source`]), so a wrong value here cannot go unnoticed where the headers are
//! installed.

use core::fmt;

/// Defines a C-enum newtype, its constants and its `(C name, value)` table.
macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        $name:ident($repr:ty) = $c_type:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $c_name:ident = $value:expr; )*
        }
    ) => {
        $(#[$meta])*
        #[doc = ""]
        #[doc = concat!("C type: `", $c_type, "`.")]
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub $repr);

        impl $name {
            $(
                $(#[$vmeta])*
                #[doc = ""]
                #[doc = concat!("C: `", stringify!($c_name), "`.")]
                pub const $variant: Self = Self($value);
            )*

            /// The C type this mirrors.
            pub const C_TYPE: &'static str = $c_type;

            /// Every constant of this type as `(C name, value)`.
            pub const C_CONSTANTS: &'static [(&'static str, u64)] =
                &[$((stringify!($c_name), $value as u64)),*];

            /// The C name of this value, if it is one of the named constants.
            pub fn c_name(self) -> Option<&'static str> {
                Self::C_CONSTANTS.iter().find(|(_, value)| *value == self.0 as u64).map(|(name, _)| *name)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.c_name() {
                    Some(name) => f.write_str(name),
                    None => write!(f, concat!(stringify!($name), "({:#x})"), self.0),
                }
            }
        }
    };
}

pub(crate) use c_enum;

c_enum! {
    /// A status code returned by most HSA functions (`hsa.h`, plus the AMD ones of `hsa_ext_amd.h`).
    HsaStatus(u32) = "hsa_status_t" {
        /// The function succeeded.
        SUCCESS = HSA_STATUS_SUCCESS = 0x0;
        /// An iteration was stopped by its callback.
        INFO_BREAK = HSA_STATUS_INFO_BREAK = 0x1;
        /// A generic error.
        ERROR = HSA_STATUS_ERROR = 0x1000;
        /// An argument was invalid.
        ERROR_INVALID_ARGUMENT = HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001;
        /// Queue creation failed.
        ERROR_INVALID_QUEUE_CREATION = HSA_STATUS_ERROR_INVALID_QUEUE_CREATION = 0x1002;
        /// An allocation is invalid (e.g. too large for the pool).
        ERROR_INVALID_ALLOCATION = HSA_STATUS_ERROR_INVALID_ALLOCATION = 0x1003;
        /// The agent is invalid.
        ERROR_INVALID_AGENT = HSA_STATUS_ERROR_INVALID_AGENT = 0x1004;
        /// The region is invalid.
        ERROR_INVALID_REGION = HSA_STATUS_ERROR_INVALID_REGION = 0x1005;
        /// The signal is invalid.
        ERROR_INVALID_SIGNAL = HSA_STATUS_ERROR_INVALID_SIGNAL = 0x1006;
        /// The queue is invalid.
        ERROR_INVALID_QUEUE = HSA_STATUS_ERROR_INVALID_QUEUE = 0x1007;
        /// The runtime could not get the resources it needs (also what `hsa_init` returns on a
        /// machine without an AMD GPU driver).
        ERROR_OUT_OF_RESOURCES = HSA_STATUS_ERROR_OUT_OF_RESOURCES = 0x1008;
        /// An AQL packet is malformed.
        ERROR_INVALID_PACKET_FORMAT = HSA_STATUS_ERROR_INVALID_PACKET_FORMAT = 0x1009;
        /// A resource could not be freed.
        ERROR_RESOURCE_FREE = HSA_STATUS_ERROR_RESOURCE_FREE = 0x100A;
        /// An API other than `hsa_init` was called before `hsa_init` succeeded.
        ERROR_NOT_INITIALIZED = HSA_STATUS_ERROR_NOT_INITIALIZED = 0x100B;
        /// The runtime's reference count overflowed.
        ERROR_REFCOUNT_OVERFLOW = HSA_STATUS_ERROR_REFCOUNT_OVERFLOW = 0x100C;
        /// Arguments are incompatible with each other.
        ERROR_INCOMPATIBLE_ARGUMENTS = HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS = 0x100D;
        /// An index is out of range.
        ERROR_INVALID_INDEX = HSA_STATUS_ERROR_INVALID_INDEX = 0x100E;
        /// The ISA is invalid.
        ERROR_INVALID_ISA = HSA_STATUS_ERROR_INVALID_ISA = 0x100F;
        /// The code object is invalid.
        ERROR_INVALID_CODE_OBJECT = HSA_STATUS_ERROR_INVALID_CODE_OBJECT = 0x1010;
        /// The executable is invalid.
        ERROR_INVALID_EXECUTABLE = HSA_STATUS_ERROR_INVALID_EXECUTABLE = 0x1011;
        /// The executable is frozen.
        ERROR_FROZEN_EXECUTABLE = HSA_STATUS_ERROR_FROZEN_EXECUTABLE = 0x1012;
        /// No symbol of that name.
        ERROR_INVALID_SYMBOL_NAME = HSA_STATUS_ERROR_INVALID_SYMBOL_NAME = 0x1013;
        /// The variable is already defined.
        ERROR_VARIABLE_ALREADY_DEFINED = HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED = 0x1014;
        /// The variable is undefined.
        ERROR_VARIABLE_UNDEFINED = HSA_STATUS_ERROR_VARIABLE_UNDEFINED = 0x1015;
        /// An HSAIL operation raised an exception.
        ERROR_EXCEPTION = HSA_STATUS_ERROR_EXCEPTION = 0x1016;
        /// The ISA name is invalid.
        ERROR_INVALID_ISA_NAME = HSA_STATUS_ERROR_INVALID_ISA_NAME = 0x1017;
        /// The code symbol is invalid.
        ERROR_INVALID_CODE_SYMBOL = HSA_STATUS_ERROR_INVALID_CODE_SYMBOL = 0x1018;
        /// The executable symbol is invalid.
        ERROR_INVALID_EXECUTABLE_SYMBOL = HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL = 0x1019;
        /// The file descriptor is invalid.
        ERROR_INVALID_FILE = HSA_STATUS_ERROR_INVALID_FILE = 0x1020;
        /// The code object reader is invalid.
        ERROR_INVALID_CODE_OBJECT_READER = HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER = 0x1021;
        /// The cache is invalid.
        ERROR_INVALID_CACHE = HSA_STATUS_ERROR_INVALID_CACHE = 0x1022;
        /// The wavefront is invalid.
        ERROR_INVALID_WAVEFRONT = HSA_STATUS_ERROR_INVALID_WAVEFRONT = 0x1023;
        /// The signal group is invalid.
        ERROR_INVALID_SIGNAL_GROUP = HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP = 0x1024;
        /// The runtime is in an invalid state.
        ERROR_INVALID_RUNTIME_STATE = HSA_STATUS_ERROR_INVALID_RUNTIME_STATE = 0x1025;
        /// A fatal error.
        ERROR_FATAL = HSA_STATUS_ERROR_FATAL = 0x1026;
        /// (AMD) The memory pool is invalid.
        ERROR_INVALID_MEMORY_POOL = HSA_STATUS_ERROR_INVALID_MEMORY_POOL = 40;
        /// (AMD) A memory access violated the aperture.
        ERROR_MEMORY_APERTURE_VIOLATION = HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION = 41;
        /// (AMD) A kernel ran an illegal instruction.
        ERROR_ILLEGAL_INSTRUCTION = HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION = 42;
        /// (AMD) A memory fault.
        ERROR_MEMORY_FAULT = HSA_STATUS_ERROR_MEMORY_FAULT = 43;
        /// (AMD) A CU mask was applied but reduced.
        CU_MASK_REDUCED = HSA_STATUS_CU_MASK_REDUCED = 44;
    }
}

impl HsaStatus {
    /// Whether this is [`HsaStatus::SUCCESS`].
    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }
}

c_enum! {
    /// A system attribute for `hsa_system_get_info` (the AMD ones live in the same C enum).
    SystemInfo(u32) = "hsa_system_info_t" {
        /// Major version of the HSA runtime specification supported (`u16`).
        VERSION_MAJOR = HSA_SYSTEM_INFO_VERSION_MAJOR = 0;
        /// Minor version (`u16`).
        VERSION_MINOR = HSA_SYSTEM_INFO_VERSION_MINOR = 1;
        /// Current timestamp (`u64`).
        TIMESTAMP = HSA_SYSTEM_INFO_TIMESTAMP = 2;
        /// Timestamp frequency in Hz (`u64`); signal wait timeouts are in these units.
        TIMESTAMP_FREQUENCY = HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY = 3;
        /// Maximum signal wait duration hint, in timestamp units (`u64`).
        SIGNAL_MAX_WAIT = HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT = 4;
        /// Endianness ([`Endianness`]).
        ENDIANNESS = HSA_SYSTEM_INFO_ENDIANNESS = 5;
        /// Machine model ([`MachineModel`]).
        MACHINE_MODEL = HSA_SYSTEM_INFO_MACHINE_MODEL = 6;
        /// Supported extensions (`u8[128]` bit mask).
        EXTENSIONS = HSA_SYSTEM_INFO_EXTENSIONS = 7;
        /// (AMD) Runtime build version string (`const char*`).
        AMD_BUILD_VERSION = HSA_AMD_SYSTEM_INFO_BUILD_VERSION = 0x200;
        /// (AMD) Whether shared virtual memory is supported (`bool`).
        AMD_SVM_SUPPORTED = HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED = 0x201;
        /// (AMD) Whether all SVM memory is accessible by all agents by default (`bool`; true
        /// with XNACK on). Says nothing about whether CPU and GPU atomics are mutually atomic.
        AMD_SVM_ACCESSIBLE_BY_DEFAULT = HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT = 0x202;
    }
}

c_enum! {
    /// Byte order of the system.
    Endianness(u32) = "hsa_endianness_t" {
        /// Little endian.
        LITTLE = HSA_ENDIANNESS_LITTLE = 0;
        /// Big endian.
        BIG = HSA_ENDIANNESS_BIG = 1;
    }
}

c_enum! {
    /// Machine model (pointer size) of the system.
    MachineModel(u32) = "hsa_machine_model_t" {
        /// 32-bit pointers.
        SMALL = HSA_MACHINE_MODEL_SMALL = 0;
        /// 64-bit pointers.
        LARGE = HSA_MACHINE_MODEL_LARGE = 1;
    }
}

c_enum! {
    /// An agent attribute for `hsa_agent_get_info` (the AMD `hsa_amd_agent_info_t` values are
    /// passed through the same parameter and are listed here too).
    AgentInfo(u32) = "hsa_agent_info_t" {
        /// Agent name (`char[64]`, NUL-terminated).
        NAME = HSA_AGENT_INFO_NAME = 0;
        /// Vendor name (`char[64]`).
        VENDOR_NAME = HSA_AGENT_INFO_VENDOR_NAME = 1;
        /// Features (`hsa_agent_feature_t` bit mask).
        FEATURE = HSA_AGENT_INFO_FEATURE = 2;
        /// Machine model (`hsa_machine_model_t`).
        MACHINE_MODEL = HSA_AGENT_INFO_MACHINE_MODEL = 3;
        /// Profile (`hsa_profile_t`).
        PROFILE = HSA_AGENT_INFO_PROFILE = 4;
        /// Wavefront size (`u32`).
        WAVEFRONT_SIZE = HSA_AGENT_INFO_WAVEFRONT_SIZE = 6;
        /// Queue count maximum (`u32`).
        QUEUES_MAX = HSA_AGENT_INFO_QUEUES_MAX = 12;
        /// Node (`u32`).
        NODE = HSA_AGENT_INFO_NODE = 16;
        /// Device type ([`DeviceType`]).
        DEVICE = HSA_AGENT_INFO_DEVICE = 17;
        /// Major version of the HSA runtime the agent supports (`u16`).
        VERSION_MAJOR = HSA_AGENT_INFO_VERSION_MAJOR = 21;
        /// Minor version (`u16`).
        VERSION_MINOR = HSA_AGENT_INFO_VERSION_MINOR = 22;
        /// (AMD) Chip id (`u32`).
        AMD_CHIP_ID = HSA_AMD_AGENT_INFO_CHIP_ID = 0xA000;
        /// (AMD) Cache line size in bytes (`u32`).
        AMD_CACHELINE_SIZE = HSA_AMD_AGENT_INFO_CACHELINE_SIZE = 0xA001;
        /// (AMD) Compute unit count (`u32`).
        AMD_COMPUTE_UNIT_COUNT = HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT = 0xA002;
        /// (AMD) KFD node id (`u32`).
        AMD_DRIVER_NODE_ID = HSA_AMD_AGENT_INFO_DRIVER_NODE_ID = 0xA004;
        /// (AMD) PCIe bus/device/function id (`u32`).
        AMD_BDFID = HSA_AMD_AGENT_INFO_BDFID = 0xA006;
        /// (AMD) Marketing name (`char[64]`).
        AMD_PRODUCT_NAME = HSA_AMD_AGENT_INFO_PRODUCT_NAME = 0xA009;
        /// (AMD) PCIe domain (`u32`).
        AMD_DOMAIN = HSA_AMD_AGENT_INFO_DOMAIN = 0xA00F;
        /// (AMD) Whether the host can directly access SVM memory resident in the agent's local
        /// memory (`bool`).
        AMD_SVM_DIRECT_HOST_ACCESS = HSA_AMD_AGENT_INFO_SVM_DIRECT_HOST_ACCESS = 0xA013;
    }
}

c_enum! {
    /// The kind of an agent.
    DeviceType(u32) = "hsa_device_type_t" {
        /// A CPU.
        CPU = HSA_DEVICE_TYPE_CPU = 0;
        /// A GPU.
        GPU = HSA_DEVICE_TYPE_GPU = 1;
        /// A DSP.
        DSP = HSA_DEVICE_TYPE_DSP = 2;
    }
}

c_enum! {
    /// A memory pool attribute for `hsa_amd_memory_pool_get_info`.
    AmdMemoryPoolInfo(u32) = "hsa_amd_memory_pool_info_t" {
        /// Segment ([`AmdSegment`]).
        SEGMENT = HSA_AMD_MEMORY_POOL_INFO_SEGMENT = 0;
        /// Global flags (`u32` bit mask of [`AmdMemoryPoolGlobalFlag`]); only for global pools.
        GLOBAL_FLAGS = HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS = 1;
        /// Pool size in bytes (`size_t`).
        SIZE = HSA_AMD_MEMORY_POOL_INFO_SIZE = 2;
        /// Whether `hsa_amd_memory_pool_allocate` may allocate here (`bool`).
        RUNTIME_ALLOC_ALLOWED = HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED = 5;
        /// Allocation granule in bytes (`size_t`).
        RUNTIME_ALLOC_GRANULE = HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE = 6;
        /// Alignment of allocations in bytes (`size_t`).
        RUNTIME_ALLOC_ALIGNMENT = HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT = 7;
        /// Whether every agent can be given access (`bool`).
        ACCESSIBLE_BY_ALL = HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL = 15;
        /// Largest total allocation in bytes (`size_t`).
        ALLOC_MAX_SIZE = HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE = 16;
    }
}

c_enum! {
    /// The segment a memory pool lives in.
    AmdSegment(u32) = "hsa_amd_segment_t" {
        /// Global memory, shared by all agents.
        GLOBAL = HSA_AMD_SEGMENT_GLOBAL = 0;
        /// Read-only memory.
        READONLY = HSA_AMD_SEGMENT_READONLY = 1;
        /// Work-item private memory.
        PRIVATE = HSA_AMD_SEGMENT_PRIVATE = 2;
        /// Work-group memory.
        GROUP = HSA_AMD_SEGMENT_GROUP = 3;
    }
}

c_enum! {
    /// One bit of a global pool's flags ([`AmdMemoryPoolInfo::GLOBAL_FLAGS`], a `u32`).
    AmdMemoryPoolGlobalFlag(u32) = "hsa_amd_memory_pool_global_flag_t" {
        /// May hold kernel arguments.
        KERNARG_INIT = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT = 1;
        /// Fine-grained: coherent between agents while a kernel runs (what hostcall needs).
        FINE_GRAINED = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED = 2;
        /// Coarse-grained: coherent only at dispatch boundaries.
        COARSE_GRAINED = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED = 4;
    }
}

impl AmdMemoryPoolGlobalFlag {
    /// Whether the flag mask `flags` has this bit set.
    pub fn is_set_in(self, flags: u32) -> bool {
        flags & self.0 != 0
    }
}

c_enum! {
    /// An attribute of the relation between an agent and a memory pool, for
    /// `hsa_amd_agent_memory_pool_get_info`.
    AmdAgentMemoryPoolInfo(u32) = "hsa_amd_agent_memory_pool_info_t" {
        /// Access ([`AmdMemoryPoolAccess`]).
        ACCESS = HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS = 0;
        /// Number of link hops from the agent to the pool (`u32`).
        NUM_LINK_HOPS = HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS = 1;
        /// One [`AmdMemoryPoolLinkInfo`](crate::AmdMemoryPoolLinkInfo) per hop (an array of `NUM_LINK_HOPS` elements).
        LINK_INFO = HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO = 2;
    }
}

c_enum! {
    /// Whether an agent can access a memory pool.
    AmdMemoryPoolAccess(u32) = "hsa_amd_memory_pool_access_t" {
        /// Never.
        NEVER_ALLOWED = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED = 0;
        /// Yes, without `hsa_amd_agents_allow_access`.
        ALLOWED_BY_DEFAULT = HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT = 1;
        /// Only after `hsa_amd_agents_allow_access` on the buffer.
        DISALLOWED_BY_DEFAULT = HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT = 2;
    }
}

c_enum! {
    /// The kind of one link between an agent and a memory pool.
    AmdLinkInfoType(u32) = "hsa_amd_link_info_type_t" {
        /// HyperTransport.
        HYPERTRANSPORT = HSA_AMD_LINK_INFO_TYPE_HYPERTRANSPORT = 0;
        /// QPI.
        QPI = HSA_AMD_LINK_INFO_TYPE_QPI = 1;
        /// PCI Express.
        PCIE = HSA_AMD_LINK_INFO_TYPE_PCIE = 2;
        /// InfiniBand.
        INFINIBAND = HSA_AMD_LINK_INFO_TYPE_INFINBAND = 3;
        /// xGMI (AMD Infinity Fabric).
        XGMI = HSA_AMD_LINK_INFO_TYPE_XGMI = 4;
    }
}

c_enum! {
    /// The comparison a signal wait waits for.
    SignalCondition(u32) = "hsa_signal_condition_t" {
        /// value == compare value.
        EQ = HSA_SIGNAL_CONDITION_EQ = 0;
        /// value != compare value.
        NE = HSA_SIGNAL_CONDITION_NE = 1;
        /// value < compare value.
        LT = HSA_SIGNAL_CONDITION_LT = 2;
        /// value >= compare value.
        GTE = HSA_SIGNAL_CONDITION_GTE = 3;
    }
}

c_enum! {
    /// What the waiting thread does during a signal wait.
    WaitState(u32) = "hsa_wait_state_t" {
        /// The thread may sleep (interrupt-driven wait).
        BLOCKED = HSA_WAIT_STATE_BLOCKED = 0;
        /// The thread spins.
        ACTIVE = HSA_WAIT_STATE_ACTIVE = 1;
    }
}
