/*
 * The part of NVML's ABI that GPUsockets' libnvidia-ml.so.1 implements, declared here so that
 * building needs no CUDA toolkit or driver headers. Every value and layout below follows NVIDIA's
 * public nvml.h (NVML API version 13, as shipped with driver 580 / CUDA 13.0): return codes, buffer
 * sizes, nvmlPciInfo_t (current and pre-v3 layouts), nvmlMemory_t / nvmlMemory_v2_t and the
 * NVML_STRUCT_VERSION rule, the process-info structs, the P2P enums and the init flags. No code
 * is taken from nvml.h; only these facts.
 */
#ifndef GPUSOCKETS_NVML_ABI_H
#define GPUSOCKETS_NVML_ABI_H

#include <stddef.h>

#define NVML_EXPORT __attribute__((visibility("default")))

/* nvmlReturn_t (nvml.h: nvmlReturn_enum); an int on every ABI NVML ships for */
typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_ALREADY_INITIALIZED 5
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_INSUFFICIENT_POWER 8
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_IRQ_ISSUE 11
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_CORRUPTED_INFOROM 14
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_RESET_REQUIRED 16
#define NVML_ERROR_OPERATING_SYSTEM 17
#define NVML_ERROR_LIB_RM_VERSION_MISMATCH 18
#define NVML_ERROR_IN_USE 19
#define NVML_ERROR_MEMORY 20
#define NVML_ERROR_NO_DATA 21
#define NVML_ERROR_VGPU_ECC_NOT_SUPPORTED 22
#define NVML_ERROR_INSUFFICIENT_RESOURCES 23
#define NVML_ERROR_FREQ_NOT_SUPPORTED 24
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_DEPRECATED 26
#define NVML_ERROR_NOT_READY 27
#define NVML_ERROR_GPU_NOT_FOUND 28
#define NVML_ERROR_INVALID_STATE 29
#define NVML_ERROR_RESET_TYPE_NOT_SUPPORTED 30
#define NVML_ERROR_UNKNOWN 999

/* nvmlInitWithFlags flags */
#define NVML_INIT_FLAG_NO_GPUS 1u
#define NVML_INIT_FLAG_NO_ATTACH 2u
#define NVML_INIT_FLAG_FORCE_INIT 4u

/* buffer sizes (nvmlConstants) */
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

/* an opaque handle; ours point into the library's device table */
typedef struct nvmlDevice_st *nvmlDevice_t;

/* nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it (68 bytes) */
typedef struct {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "%04X:%02X:%02X.0" */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;    /* device id << 16 | vendor id */
    unsigned int pciSubSystemId; /* subsystem device id << 16 | subsystem vendor id */
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];          /* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

/* The layout before nvmlDeviceGetPciInfo_v3 (52 bytes): a 16-byte busId and four reserved words.
 * Programs built against it call nvmlDeviceGetPciInfo and _v2, so those must not write past it. */
typedef struct {
    char busId[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    unsigned int reserved[4];
} nvmlPciInfoLegacy_t;

/* nvmlPciInfoExt_t (version 1, 64 bytes), as nvmlDeviceGetPciInfoExt fills it; nvidia-smi 555 and
 * later read pci.bus_id through it */
typedef struct {
    unsigned int version; /* nvmlPciInfoExt_v1 */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    unsigned int baseClass;
    unsigned int subClass;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfoExt_t;

#define NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT "%04X:%02X:%02X.0"
#define NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0"

/* versioned structs carry sizeof | version << 24 in their first word (NVML_STRUCT_VERSION) */
#define NVML_STRUCT_VERSION(type, ver) ((unsigned int) (sizeof(type) | ((unsigned int) (ver) << 24)))

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version; /* nvmlMemory_v2 */
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

#define nvmlMemory_v2 NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2)
#define nvmlPciInfoExt_v1 NVML_STRUCT_VERSION(nvmlPciInfoExt_t, 1)

/* nvmlDeviceGet{Compute,Graphics,MPSCompute}RunningProcesses: _v1 (no suffix), _v2, _v3 element
 * types. We never write an element (a guest sees no processes), so only their names matter here. */
typedef struct nvmlProcessInfo_st nvmlProcessInfo_t;

/* nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t */
#define NVML_P2P_CAPS_INDEX_READ 0
#define NVML_P2P_CAPS_INDEX_WRITE 1
#define NVML_P2P_CAPS_INDEX_NVLINK 2
#define NVML_P2P_CAPS_INDEX_ATOMICS 3
#define NVML_P2P_CAPS_INDEX_PROP 4
#define NVML_P2P_CAPS_INDEX_UNKNOWN 5

#define NVML_P2P_STATUS_OK 0
#define NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED 1
#define NVML_P2P_STATUS_GPU_NOT_SUPPORTED 2
#define NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED 3
#define NVML_P2P_STATUS_DISABLED_BY_REGKEY 4
#define NVML_P2P_STATUS_NOT_SUPPORTED 5
#define NVML_P2P_STATUS_UNKNOWN 6

/* nvmlComputeMode_t: the same numbers as the CUDA driver's CUcomputemode */
#define NVML_COMPUTEMODE_DEFAULT 0
#define NVML_COMPUTEMODE_EXCLUSIVE_THREAD 1
#define NVML_COMPUTEMODE_PROHIBITED 2
#define NVML_COMPUTEMODE_EXCLUSIVE_PROCESS 3

/* PCI vendor id of NVIDIA Corporation (every CUDA device's vendor) */
#define NVML_PCI_VENDOR_NVIDIA 0x10DEu

#endif
