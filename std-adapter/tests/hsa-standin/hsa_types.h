/*
 * hsa_types.h: the parts of ROCm's hsa.h and hsa_ext_amd.h that the HSA stand-in uses, with the
 * same names, values and layouts (checked against hostcall's hsa-sys bindings by the tests, and
 * against ROCm's own headers where they are installed: hsa_standin.c compiled with
 * -DHSA_STANDIN_SYSTEM_HEADERS includes those instead of this file).
 */
#ifndef HSA_STANDIN_TYPES_H
#define HSA_STANDIN_TYPES_H
#include <stdbool.h>
#include <stdint.h>

typedef enum {
  HSA_STATUS_SUCCESS = 0x0, HSA_STATUS_INFO_BREAK = 0x1, HSA_STATUS_ERROR = 0x1000,
  HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001, HSA_STATUS_ERROR_INVALID_ALLOCATION = 0x1003,
  HSA_STATUS_ERROR_INVALID_AGENT = 0x1004, HSA_STATUS_ERROR_INVALID_SIGNAL = 0x1006,
  HSA_STATUS_ERROR_OUT_OF_RESOURCES = 0x1008, HSA_STATUS_ERROR_NOT_INITIALIZED = 0x100B,
  HSA_STATUS_ERROR_REFCOUNT_OVERFLOW = 0x100C, HSA_STATUS_ERROR_INVALID_MEMORY_POOL = 40,
} hsa_status_t;
typedef enum {
  HSA_SYSTEM_INFO_VERSION_MAJOR = 0, HSA_SYSTEM_INFO_VERSION_MINOR = 1,
  HSA_SYSTEM_INFO_TIMESTAMP = 2,
  HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY = 3, HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT = 4,
  HSA_SYSTEM_INFO_ENDIANNESS = 5, HSA_SYSTEM_INFO_MACHINE_MODEL = 6,
} hsa_system_info_t;
typedef enum { HSA_ENDIANNESS_LITTLE = 0, HSA_ENDIANNESS_BIG = 1 } hsa_endianness_t;
typedef enum { HSA_MACHINE_MODEL_SMALL = 0, HSA_MACHINE_MODEL_LARGE = 1 } hsa_machine_model_t;
typedef enum {
  HSA_AGENT_FEATURE_KERNEL_DISPATCH = 1, HSA_AGENT_FEATURE_AGENT_DISPATCH = 2,
} hsa_agent_feature_t;
typedef enum {
  HSA_AGENT_INFO_NAME = 0, HSA_AGENT_INFO_VENDOR_NAME = 1, HSA_AGENT_INFO_FEATURE = 2,
  HSA_AGENT_INFO_WAVEFRONT_SIZE = 6, HSA_AGENT_INFO_NODE = 16, HSA_AGENT_INFO_DEVICE = 17,
} hsa_agent_info_t;
typedef enum { HSA_AMD_AGENT_INFO_DRIVER_NODE_ID = 0xA004 } hsa_amd_agent_info_t;
typedef enum {
  HSA_DEVICE_TYPE_CPU = 0, HSA_DEVICE_TYPE_GPU = 1, HSA_DEVICE_TYPE_DSP = 2,
} hsa_device_type_t;
typedef enum {
  HSA_AMD_SEGMENT_GLOBAL = 0, HSA_AMD_SEGMENT_READONLY = 1, HSA_AMD_SEGMENT_PRIVATE = 2,
  HSA_AMD_SEGMENT_GROUP = 3,
} hsa_amd_segment_t;
typedef enum {
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT = 1, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED = 2,
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED = 4,
} hsa_amd_memory_pool_global_flag_t;
typedef enum {
  HSA_AMD_MEMORY_POOL_INFO_SEGMENT = 0, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS = 1,
  HSA_AMD_MEMORY_POOL_INFO_SIZE = 2, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED = 5,
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE = 6,
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT = 7,
  HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL = 15, HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE = 16,
} hsa_amd_memory_pool_info_t;
typedef enum {
  HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS = 0, HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS = 1,
  HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO = 2,
} hsa_amd_agent_memory_pool_info_t;
typedef enum {
  HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED = 0, HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT = 1,
  HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT = 2,
} hsa_amd_memory_pool_access_t;
typedef enum {
  HSA_AMD_LINK_INFO_TYPE_HYPERTRANSPORT = 0, HSA_AMD_LINK_INFO_TYPE_QPI = 1,
  HSA_AMD_LINK_INFO_TYPE_PCIE = 2, HSA_AMD_LINK_INFO_TYPE_INFINBAND = 3, HSA_AMD_LINK_INFO_TYPE_XGMI = 4,
} hsa_amd_link_info_type_t;
typedef enum {
  HSA_SIGNAL_CONDITION_EQ = 0, HSA_SIGNAL_CONDITION_NE = 1, HSA_SIGNAL_CONDITION_LT = 2,
  HSA_SIGNAL_CONDITION_GTE = 3,
} hsa_signal_condition_t;
typedef enum { HSA_WAIT_STATE_BLOCKED = 0, HSA_WAIT_STATE_ACTIVE = 1 } hsa_wait_state_t;
typedef int64_t hsa_signal_value_t;
typedef struct hsa_agent_s { uint64_t handle; } hsa_agent_t;
typedef struct hsa_signal_s { uint64_t handle; } hsa_signal_t;
typedef struct hsa_amd_memory_pool_s { uint64_t handle; } hsa_amd_memory_pool_t;
typedef struct hsa_amd_memory_pool_link_info_s {
  uint32_t min_latency, max_latency, min_bandwidth, max_bandwidth;
  bool atomic_support_32bit, atomic_support_64bit, coherent_support;
  hsa_amd_link_info_type_t link_type;
  uint32_t numa_distance;
} hsa_amd_memory_pool_link_info_t;

/* The loader extension (hsa.h's hsa_extension_t, hsa_ven_amd_loader.h): what the code-object
 * lookup of the SANITIZER service uses. Entries of the 1.03 table it does not use are untyped. */
typedef enum { HSA_EXTENSION_AMD_LOADER = 0x201 } hsa_extension_t;
typedef struct hsa_executable_s { uint64_t handle; } hsa_executable_t;
typedef struct hsa_loaded_code_object_s { uint64_t handle; } hsa_loaded_code_object_t;
typedef enum {
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_DELTA = 8,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE = 9,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE = 10,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI_LENGTH = 11,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI = 12,
} hsa_ven_amd_loader_loaded_code_object_info_t;
typedef struct hsa_ven_amd_loader_1_03_pfn_s {
  void (*hsa_ven_amd_loader_query_host_address)(void);
  void (*hsa_ven_amd_loader_query_segment_descriptors)(void);
  void (*hsa_ven_amd_loader_query_executable)(void);
  hsa_status_t (*hsa_ven_amd_loader_executable_iterate_loaded_code_objects)(
      hsa_executable_t executable,
      hsa_status_t (*callback)(hsa_executable_t executable, hsa_loaded_code_object_t loaded_code_object, void *data),
      void *data);
  hsa_status_t (*hsa_ven_amd_loader_loaded_code_object_get_info)(
      hsa_loaded_code_object_t loaded_code_object, hsa_ven_amd_loader_loaded_code_object_info_t attribute, void *value);
  void (*hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size)(void);
  hsa_status_t (*hsa_ven_amd_loader_iterate_executables)(
      hsa_status_t (*callback)(hsa_executable_t executable, void *data), void *data);
} hsa_ven_amd_loader_1_03_pfn_t;

#endif
