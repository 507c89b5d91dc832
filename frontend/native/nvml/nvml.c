/*
 * GPUsockets libnvidia-ml.so.1: the part of NVML that NCCL, PyTorch and pynvml use, for guests
 * without a GPU. It answers the way our libcuda.so.1 does, from the backend: it loads the
 * libcuda.so.1 beside itself (found with dladdr; else whatever "libcuda.so.1" the loader finds) and
 * asks it through the CUDA driver API, so every answer is the backend's own (names, UUIDs, PCI
 * location, memory as the session sees it, compute capability, CUDA version) and no other channel
 * to the backend exists.
 *
 *   nvmlInit*          cuInit, then one table of the devices (cuDeviceGetCount, cuDeviceGet,
 *                      cuDeviceGetName, cuDeviceGetUuid_v2, cuDeviceTotalMem_v2, cuDeviceGetAttribute
 *                      for PCI domain/bus/device and compute capability); the table never changes
 *                      while the backend runs, so it is made once per process
 *   memory             cuMemGetInfo_v2 inside the device's primary context (retained on first use,
 *                      pushed and popped around the call, released by the last nvmlShutdown): the
 *                      program's cudart uses that same context, so it costs no extra context
 *   P2P                cuDeviceCanAccessPeer, cuDeviceGetP2PAttribute
 *   CUDA version       cuDriverGetVersion
 *
 * Index i is CUDA device i of the guest (the backend's order; with several backends, theirs one
 * after another), where NVIDIA's NVML on a host counts in PCI order, which need not be CUDA's. Devices
 * of two backends may share a bus id; a lookup by it finds the first. What cannot be known through
 * the driver API answers NVML_ERROR_NOT_SUPPORTED and says why once on stderr (the table
 * `unsupported` below). Before nvmlInit every call but
 * nvmlErrorString and the CUDA-version queries answers NVML_ERROR_UNINITIALIZED; bad handles and
 * NULL outputs NVML_ERROR_INVALID_ARGUMENT, short buffers NVML_ERROR_INSUFFICIENT_SIZE, as NVIDIA's
 * nvml.h documents. Thread-safe: init and shutdown under one mutex, a device table that is
 * immutable once published.
 *
 * Semantics follow NVIDIA's public NVML documentation (nvml.h, API version 13); the ABI is declared
 * in nvml_abi.h. Which functions NCCL and PyTorch resolve was read in NVIDIA/nccl
 * (src/misc/nvmlwrap.cc, src/graph/xml.cc) and pytorch (c10/cuda/driver_api.h,
 * torch/cuda/__init__.py); nothing was copied from either.
 */
#define _GNU_SOURCE
#include "nvml_abi.h"

#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the CUDA driver API, as far as this library calls it (cuda.h 13.0) ---- */

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct {
    unsigned char bytes[16];
} CUuuid;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NO_DEVICE 100
#define CU_DEVICE_ATTRIBUTE_COMPUTE_MODE 20
#define CU_DEVICE_ATTRIBUTE_PCI_BUS_ID 33
#define CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID 34
#define CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID 50
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED 3

static struct {
    void *library;
    char where[PATH_MAX + 64]; /* which file, for messages */
    char error[PATH_MAX + 512];
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice);
    CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxPushCurrent)(CUcontext);
    CUresult (*cuCtxPopCurrent)(CUcontext *);
    CUresult (*cuMemGetInfo)(size_t *, size_t *);
    CUresult (*cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
    CUresult (*cuDeviceGetP2PAttribute)(int *, int, CUdevice, CUdevice);
    CUresult (*cuGetErrorName)(CUresult, const char **);
} cu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static const char *cuda_error_name(CUresult r) {
    const char *name = NULL;
    if (cu.cuGetErrorName == NULL || cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL) {
        return "an unknown CUresult";
    }
    return name;
}

/* Resolves the functions we call; NULL names one that is missing (the ABI variants are required:
 * the unsuffixed cuDeviceTotalMem and cuMemGetInfo of old drivers take 32-bit sizes). */
static const char *resolve_symbols(void) {
    static const struct {
        size_t offset;
        const char *names[2];
        int optional;
    } wanted[] = {
        {offsetof(__typeof__(cu), cuInit), {"cuInit", NULL}, 0},
        {offsetof(__typeof__(cu), cuDriverGetVersion), {"cuDriverGetVersion", NULL}, 0},
        {offsetof(__typeof__(cu), cuDeviceGetCount), {"cuDeviceGetCount", NULL}, 0},
        {offsetof(__typeof__(cu), cuDeviceGet), {"cuDeviceGet", NULL}, 0},
        {offsetof(__typeof__(cu), cuDeviceGetName), {"cuDeviceGetName", NULL}, 0},
        {offsetof(__typeof__(cu), cuDeviceGetUuid), {"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, 0},
        {offsetof(__typeof__(cu), cuDeviceTotalMem), {"cuDeviceTotalMem_v2", NULL}, 0},
        {offsetof(__typeof__(cu), cuDeviceGetAttribute), {"cuDeviceGetAttribute", NULL}, 0},
        {offsetof(__typeof__(cu), cuDevicePrimaryCtxRetain), {"cuDevicePrimaryCtxRetain", NULL}, 0},
        {offsetof(__typeof__(cu), cuDevicePrimaryCtxRelease), {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, 0},
        {offsetof(__typeof__(cu), cuCtxPushCurrent), {"cuCtxPushCurrent_v2", NULL}, 0},
        {offsetof(__typeof__(cu), cuCtxPopCurrent), {"cuCtxPopCurrent_v2", NULL}, 0},
        {offsetof(__typeof__(cu), cuMemGetInfo), {"cuMemGetInfo_v2", NULL}, 0},
        {offsetof(__typeof__(cu), cuDeviceCanAccessPeer), {"cuDeviceCanAccessPeer", NULL}, 1},
        {offsetof(__typeof__(cu), cuDeviceGetP2PAttribute), {"cuDeviceGetP2PAttribute", NULL}, 1},
        {offsetof(__typeof__(cu), cuGetErrorName), {"cuGetErrorName", NULL}, 1},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        void *fn = NULL;
        for (int n = 0; n < 2 && fn == NULL && wanted[i].names[n] != NULL; n++) {
            fn = dlsym(cu.library, wanted[i].names[n]);
        }
        if (fn == NULL && !wanted[i].optional) {
            return wanted[i].names[0];
        }
        memcpy((char *) &cu + wanted[i].offset, &fn, sizeof fn);
    }
    return NULL;
}

/* The libcuda.so.1 in this library's own directory (an install's lib/, frontend/target/native),
 * else the loader's "libcuda.so.1". */
static void load_cuda(void) {
    char beside[PATH_MAX + 16] = "";
    Dl_info info;
    char self[PATH_MAX];
    if (dladdr((void *) &load_cuda, &info) != 0 && info.dli_fname != NULL && realpath(info.dli_fname, self) != NULL) {
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(beside, sizeof beside, "%s/libcuda.so.1", self);
        }
    }
    char first_error[PATH_MAX + 256] = "";
    if (beside[0] != '\0' && access(beside, F_OK) == 0) {
        cu.library = dlopen(beside, RTLD_NOW | RTLD_GLOBAL);
        if (cu.library != NULL) {
            snprintf(cu.where, sizeof cu.where, "%s", beside);
        } else {
            snprintf(first_error, sizeof first_error, "%s; ", dlerror());
        }
    }
    if (cu.library == NULL) {
        cu.library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (cu.library == NULL) {
            const char *why = dlerror();
            snprintf(cu.error, sizeof cu.error, "cannot load libcuda.so.1, neither beside this library (%s) nor from the loader's path: %s%s",
                     beside[0] ? beside : "?", first_error, why ? why : "not found");
            return;
        }
        snprintf(cu.where, sizeof cu.where, "libcuda.so.1 (the loader's)");
    }
    const char *missing = resolve_symbols();
    if (missing != NULL) {
        snprintf(cu.error, sizeof cu.error, "%s has no %s", cu.where, missing);
        dlclose(cu.library);
        cu.library = NULL;
    }
}

static int cuda_loaded(void) {
    pthread_once(&load_once, load_cuda);
    return cu.library != NULL;
}

/* ---- the device table ---- */

#define MAX_DEVICES 64

struct nvmlDevice_st {
    CUdevice cuda;
    unsigned int index;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[48];                 /* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
    unsigned int domain, bus, device;
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    char bus_id_legacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    int cc_major, cc_minor;
    CUcontext primary;             /* retained by the first memory query, under `lock` */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlDevice_st devices[MAX_DEVICES];
static unsigned int device_count;
static int table_made;  /* under lock; the table is immutable once made */
static int references;  /* successful nvmlInit calls not yet shut down, under lock */
static int initialized; /* references > 0, read without the lock */

static int is_initialized(void) {
    return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE);
}

/* The device a handle names, or NULL (also for NULL, a stale or a made-up handle). */
static struct nvmlDevice_st *device_of(nvmlDevice_t handle) {
    uintptr_t p = (uintptr_t) handle, base = (uintptr_t) devices;
    if (p < base || (p - base) % sizeof devices[0] != 0) {
        return NULL;
    }
    uintptr_t i = (p - base) / sizeof devices[0];
    return i < device_count ? &devices[i] : NULL;
}

static void format_uuid(char *out, size_t size, const unsigned char *b) {
    snprintf(out, size, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* Asks every device's fixed facts once. Under lock. Returns a CUresult, naming the call in *what. */
static CUresult make_table(const char **what) {
    int count = 0;
    CUresult r = cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
        *what = "cuDeviceGetCount";
        return r;
    }
    if (count > MAX_DEVICES) {
        fprintf(stderr, "gpusockets nvml: the backend has %d devices; NVML shows the first %d\n", count, MAX_DEVICES);
        count = MAX_DEVICES;
    }
    for (int i = 0; i < count; i++) {
        struct nvmlDevice_st *d = &devices[i];
        memset(d, 0, sizeof *d);
        d->index = (unsigned int) i;
        CUuuid uuid;
        int domain = 0, bus = 0, dev = 0;
        size_t total = 0;
        if ((r = cu.cuDeviceGet(&d->cuda, i)) != CUDA_SUCCESS) {
            *what = "cuDeviceGet";
        } else if ((r = cu.cuDeviceGetName(d->name, (int) sizeof d->name, d->cuda)) != CUDA_SUCCESS) {
            *what = "cuDeviceGetName";
        } else if ((r = cu.cuDeviceGetUuid(&uuid, d->cuda)) != CUDA_SUCCESS) {
            *what = "cuDeviceGetUuid";
        } else if ((r = cu.cuDeviceTotalMem(&total, d->cuda)) != CUDA_SUCCESS) {
            *what = "cuDeviceTotalMem";
        } else if ((r = cu.cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d->cuda)) != CUDA_SUCCESS
                   || (r = cu.cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d->cuda)) != CUDA_SUCCESS
                   || (r = cu.cuDeviceGetAttribute(&dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d->cuda)) != CUDA_SUCCESS
                   || (r = cu.cuDeviceGetAttribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->cuda)) != CUDA_SUCCESS
                   || (r = cu.cuDeviceGetAttribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->cuda)) != CUDA_SUCCESS) {
            *what = "cuDeviceGetAttribute";
        }
        if (r != CUDA_SUCCESS) {
            return r;
        }
        d->name[sizeof d->name - 1] = '\0';
        format_uuid(d->uuid, sizeof d->uuid, uuid.bytes);
        d->domain = (unsigned int) domain;
        d->bus = (unsigned int) bus;
        d->device = (unsigned int) dev;
        snprintf(d->bus_id, sizeof d->bus_id, NVML_DEVICE_PCI_BUS_ID_FMT, d->domain, d->bus, d->device);
        snprintf(d->bus_id_legacy, sizeof d->bus_id_legacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, d->domain, d->bus, d->device);
    }
    device_count = (unsigned int) count;
    return CUDA_SUCCESS;
}

/* nvmlInit_v2 and nvmlInitWithFlags. A reference count, as NVML keeps one: each success needs an
 * nvmlShutdown. With no backend reachable our cuInit fails within GPUSOCKETS_CONNECT_TIMEOUT_MS
 * (libcuda.so.1 says why on stderr) and a failed connect is not retried in the process, so a later
 * nvmlInit fails at once. */
static nvmlReturn_t init(unsigned int flags) {
    static int reported;
    if (!cuda_loaded()) {
        if (!__atomic_exchange_n(&reported, 1, __ATOMIC_SEQ_CST)) {
            fprintf(stderr, "gpusockets nvml: %s; nvmlInit returns NVML_ERROR_DRIVER_NOT_LOADED\n", cu.error);
        }
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    pthread_mutex_lock(&lock);
    nvmlReturn_t result = NVML_SUCCESS;
    CUresult r = cu.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE && (flags & NVML_INIT_FLAG_NO_GPUS)) {
        /* "don't fail nvmlInit() when no GPUs are found": initialized, with no devices */
    } else if (r == CUDA_ERROR_NO_DEVICE) {
        if (!__atomic_exchange_n(&reported, 1, __ATOMIC_SEQ_CST)) {
            fprintf(stderr, "gpusockets nvml: cuInit of %s returned CUDA_ERROR_NO_DEVICE: no GPUsockets backend reached "
                    "(libcuda.so.1 says why above); nvmlInit returns NVML_ERROR_DRIVER_NOT_LOADED\n", cu.where);
        }
        result = NVML_ERROR_DRIVER_NOT_LOADED;
    } else {
        const char *what = "cuInit";
        if (r == CUDA_SUCCESS && !table_made) {
            r = make_table(&what);
            table_made = r == CUDA_SUCCESS;
        }
        if (r != CUDA_SUCCESS) {
            fprintf(stderr, "gpusockets nvml: %s of %s returned %s (%d); nvmlInit returns NVML_ERROR_UNKNOWN\n",
                    what, cu.where, cuda_error_name(r), r);
            result = NVML_ERROR_UNKNOWN;
        }
    }
    if (result == NVML_SUCCESS) {
        references++;
        __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) {
    return init(0);
}

/* nvmlInit "_v1" initialised every GPU at once; with one table made at init there is no difference */
NVML_EXPORT nvmlReturn_t nvmlInit(void) {
    return init(0);
}

NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    return init(flags);
}

NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    if (references == 0) {
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    if (--references == 0) {
        __atomic_store_n(&initialized, 0, __ATOMIC_RELEASE);
        for (unsigned int i = 0; i < device_count; i++) {
            if (devices[i].primary != NULL) {
                cu.cuDevicePrimaryCtxRelease(devices[i].cuda);
                devices[i].primary = NULL;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return NVML_SUCCESS;
}

/* ---- errors ---- */

/* nvmlErrorString: the texts NVIDIA's NVML gives (as in NVIDIA/DCGM's nvml_error_strings.h); for
 * the newer codes that list lacks, texts after nvml.h's descriptions. */
NVML_EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
        case NVML_SUCCESS: return "Success";
        case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
        case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
        case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
        case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
        case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
        case NVML_ERROR_NOT_FOUND: return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
        case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
        case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
        case NVML_ERROR_TIMEOUT: return "Timeout";
        case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
        case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
        case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
        case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
        case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
        case NVML_ERROR_RESET_REQUIRED: return "GPU requires reset";
        case NVML_ERROR_OPERATING_SYSTEM: return "GPU access blocked by the operating system";
        case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "Driver/library version mismatch";
        case NVML_ERROR_IN_USE: return "In use by another client";
        case NVML_ERROR_MEMORY: return "Insufficient Memory";
        case NVML_ERROR_NO_DATA: return "No data";
        case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "vGPU operation not available with ECC enabled";
        case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
        case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
        case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
        case NVML_ERROR_DEPRECATED: return "Deprecated";
        case NVML_ERROR_NOT_READY: return "Not Ready";
        case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
        case NVML_ERROR_INVALID_STATE: return "Invalid state";
        case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset type not supported";
        default: return "Unknown Error";
    }
}

/* ---- system queries ---- */

/* The CUDA version: what our libcuda.so.1's cuDriverGetVersion says (the backend's driver). Like
 * NVML's, these need no nvmlInit. */
static nvmlReturn_t cuda_driver_version(int *version) {
    if (version == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (!cuda_loaded()) {
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    }
    return cu.cuDriverGetVersion(version) == CUDA_SUCCESS ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    return cuda_driver_version(cudaDriverVersion);
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    return cuda_driver_version(cudaDriverVersion);
}

/* ---- devices ---- */

static nvmlReturn_t count(unsigned int *deviceCount) {
    if (!is_initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (deviceCount == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *deviceCount = device_count;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    return count(deviceCount);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) {
    return count(deviceCount);
}

static nvmlReturn_t by_index(unsigned int index, nvmlDevice_t *device) {
    if (!is_initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (device == NULL || index >= device_count) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = &devices[index];
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    return by_index(index, device);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return by_index(index, device);
}

/* One hexadecimal field of a PCI bus id, ending at one of `ends`; 0 if malformed. */
static int hex_field(const char **s, const char *ends, unsigned long long *out) {
    const char *p = *s;
    unsigned long long v = 0;
    int digits = 0;
    while (isxdigit((unsigned char) *p)) {
        int c = tolower((unsigned char) *p);
        v = v * 16 + (unsigned long long) (c <= '9' ? c - '0' : c - 'a' + 10);
        if (++digits > 8) {
            return 0;
        }
        p++;
    }
    if (digits == 0 || strchr(ends, *p) == NULL) {
        return 0;
    }
    *out = v;
    *s = *p ? p + 1 : p;
    return 1;
}

/* The forms nvml.h documents for nvmlDeviceGetHandleByPciBusId_v2, all hexadecimal, either case:
 * domain:bus:device.function, domain:bus:device, bus:device.function. Our devices are function 0. */
static nvmlReturn_t by_pci_bus_id(const char *id, nvmlDevice_t *device) {
    if (!is_initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (id == NULL || device == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    int colons = 0;
    for (const char *p = id; *p; p++) {
        colons += *p == ':';
    }
    unsigned long long domain = 0, bus, dev, function = 0;
    const char *p = id;
    if (colons == 2) {
        if (!hex_field(&p, ":", &domain) || !hex_field(&p, ":", &bus) || !hex_field(&p, ".", &dev)) {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        if (p[-1] == '.' && !hex_field(&p, "", &function)) {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
    } else if (colons == 1) {
        if (!hex_field(&p, ":", &bus) || !hex_field(&p, ".", &dev) || p[-1] != '.' || !hex_field(&p, "", &function)) {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
    } else {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (unsigned int i = 0; i < device_count; i++) {
        if (devices[i].domain == domain && devices[i].bus == bus && devices[i].device == dev && function == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    return by_pci_bus_id(pciBusId, device);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device) {
    return by_pci_bus_id(pciBusId, device);
}

/* "GPU-" and 8-4-4-4-12 hexadecimal digits, either case. MIG-... ids name MIG instances, which a
 * guest is never given: not found. Anything else is no UUID. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    if (!is_initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (uuid == NULL || device == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (strncmp(uuid, "MIG-", 4) == 0) {
        return NVML_ERROR_NOT_FOUND;
    }
    static const char shape[] = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    if (strlen(uuid) != sizeof shape - 1) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        if (shape[i] == 'x' ? !isxdigit((unsigned char) uuid[i]) : uuid[i] != shape[i]) {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
    }
    for (unsigned int i = 0; i < device_count; i++) {
        if (strcasecmp(devices[i].uuid, uuid) == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* The device behind a handle for the calls below: UNINITIALIZED before nvmlInit, INVALID_ARGUMENT
 * for a handle that names none. */
#define DEVICE_OR_RETURN(d, handle)                      \
    if (!is_initialized()) {                             \
        return NVML_ERROR_UNINITIALIZED;                 \
    }                                                    \
    struct nvmlDevice_st *d = device_of(handle);         \
    if (d == NULL) {                                     \
        return NVML_ERROR_INVALID_ARGUMENT;              \
    }

NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    DEVICE_OR_RETURN(d, device)
    if (index == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *index = d->index;
    return NVML_SUCCESS;
}

/* /dev/nvidiaN does not exist in a guest: N is the NVML index, so that tools that key on it see
 * distinct devices. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) {
    DEVICE_OR_RETURN(d, device)
    if (minorNumber == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *minorNumber = d->index;
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char *value, char *out, unsigned int length) {
    if (out == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    size_t n = strlen(value);
    if (length < n + 1) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(out, value, n + 1);
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    DEVICE_OR_RETURN(d, device)
    return copy_string(d->name, name, length);
}

/* The bytes of cuDeviceGetUuid, as NVML's UUID text ("GPU-" and lowercase 8-4-4-4-12 hex): NVML's
 * and the CUDA driver's UUIDs of a GPU are the same 16 bytes. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    DEVICE_OR_RETURN(d, device)
    return copy_string(d->uuid, uuid, length);
}

/* pciDeviceId: NVIDIA's vendor id with device id 0, pciSubSystemId 0: the CUDA driver API does not
 * say which chip or board it is (NCCL reads these only where sysfs has no such device). */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    DEVICE_OR_RETURN(d, device)
    if (pci == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", d->bus_id_legacy);
    pci->domain = d->domain;
    pci->bus = d->bus;
    pci->device = d->device;
    pci->pciDeviceId = NVML_PCI_VENDOR_NVIDIA;
    pci->pciSubSystemId = 0;
    snprintf(pci->busId, sizeof pci->busId, "%s", d->bus_id);
    return NVML_SUCCESS;
}

/* As nvmlDeviceGetPciInfo_v3, in the versioned layout (nvidia-smi 555 and later read the bus id
 * here); baseClass and subClass 0: the driver API does not say which PCI class the board has. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_t *pci) {
    DEVICE_OR_RETURN(d, device)
    if (pci == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (pci->version != nvmlPciInfoExt_v1) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    pci->domain = d->domain;
    pci->bus = d->bus;
    pci->device = d->device;
    pci->pciDeviceId = NVML_PCI_VENDOR_NVIDIA;
    pci->pciSubSystemId = 0;
    pci->baseClass = 0;
    pci->subClass = 0;
    snprintf(pci->busId, sizeof pci->busId, "%s", d->bus_id);
    return NVML_SUCCESS;
}

/* _v2 and the unsuffixed name are what programs built against the pre-v3 nvmlPciInfo_t call: its
 * 52 bytes are filled (the legacy bus id in its 16-byte busId, where the v3 layout has busIdLegacy)
 * and nothing past them is written. */
static nvmlReturn_t pci_info_legacy(nvmlDevice_t device, nvmlPciInfoLegacy_t *pci) {
    DEVICE_OR_RETURN(d, device)
    if (pci == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    snprintf(pci->busId, sizeof pci->busId, "%s", d->bus_id_legacy);
    pci->domain = d->domain;
    pci->bus = d->bus;
    pci->device = d->device;
    pci->pciDeviceId = NVML_PCI_VENDOR_NVIDIA;
    pci->pciSubSystemId = 0;
    memset(pci->reserved, 0, sizeof pci->reserved);
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, void *pci) {
    return pci_info_legacy(device, pci);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, void *pci) {
    return pci_info_legacy(device, pci);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    DEVICE_OR_RETURN(d, device)
    if (major == NULL || minor == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *major = d->cc_major;
    *minor = d->cc_minor;
    return NVML_SUCCESS;
}

/* CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, asked each time (an administrator may change it on the
 * backend's host); CUcomputemode and nvmlComputeMode_t number the modes alike. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int *mode) {
    DEVICE_OR_RETURN(d, device)
    if (mode == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    int value = 0;
    if (cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, d->cuda) != CUDA_SUCCESS) {
        return NVML_ERROR_UNKNOWN;
    }
    *mode = value;
    return NVML_SUCCESS;
}

/* The device's primary context, retained once (released by the last nvmlShutdown); NULL if the
 * driver refused it. */
static CUcontext primary_context(struct nvmlDevice_st *d, CUresult *r) {
    pthread_mutex_lock(&lock);
    CUcontext ctx = d->primary;
    *r = CUDA_SUCCESS;
    if (ctx == NULL && (*r = cu.cuDevicePrimaryCtxRetain(&ctx, d->cuda)) == CUDA_SUCCESS) {
        d->primary = ctx;
    }
    pthread_mutex_unlock(&lock);
    return *r == CUDA_SUCCESS ? ctx : NULL;
}

/* Drops our reference to a primary context that failed us, if it is still the one we hold. */
static void forget_primary_context(struct nvmlDevice_st *d, CUcontext ctx) {
    pthread_mutex_lock(&lock);
    if (d->primary == ctx) {
        cu.cuDevicePrimaryCtxRelease(d->cuda);
        d->primary = NULL;
    }
    pthread_mutex_unlock(&lock);
}

/* cuMemGetInfo with ctx pushed on the calling thread's context stack, which is left as it was. */
static CUresult memory_in(CUcontext ctx, const char **what, size_t *free_bytes, size_t *total) {
    *what = "cuCtxPushCurrent";
    CUresult r = cu.cuCtxPushCurrent(ctx);
    if (r == CUDA_SUCCESS) {
        *what = "cuMemGetInfo";
        r = cu.cuMemGetInfo(free_bytes, total);
        CUcontext popped;
        cu.cuCtxPopCurrent(&popped);
    }
    return r;
}

/* Free and total memory as the session sees them (the backend answers cuMemGetInfo with the
 * tenant's view), in the device's primary context. If the context we hold fails (the program reset
 * it, cudaDeviceReset), it is retained anew once. */
static nvmlReturn_t memory(struct nvmlDevice_st *d, unsigned long long *total, unsigned long long *free_bytes) {
    static int reported;
    CUresult r = CUDA_SUCCESS;
    const char *what = "cuDevicePrimaryCtxRetain";
    for (int attempt = 0; attempt < 2; attempt++) {
        what = "cuDevicePrimaryCtxRetain";
        CUcontext ctx = primary_context(d, &r);
        if (ctx == NULL) {
            break;
        }
        size_t f = 0, t = 0;
        if ((r = memory_in(ctx, &what, &f, &t)) == CUDA_SUCCESS) {
            *total = t;
            *free_bytes = f;
            return NVML_SUCCESS;
        }
        forget_primary_context(d, ctx);
    }
    if (!__atomic_exchange_n(&reported, 1, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "gpusockets nvml: memory of device %u: %s returned %s (%d); NVML_ERROR_UNKNOWN\n",
                d->index, what, cuda_error_name(r), r);
    }
    return NVML_ERROR_UNKNOWN;
}

/* used = total - free: what the session's contexts hold, by cuMemGetInfo's count. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem) {
    DEVICE_OR_RETURN(d, device)
    if (mem == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned long long total = 0, free_bytes = 0;
    nvmlReturn_t r = memory(d, &total, &free_bytes);
    if (r == NVML_SUCCESS) {
        mem->total = total;
        mem->free = free_bytes;
        mem->used = total - free_bytes;
    }
    return r;
}

/* reserved is 0: the driver API does not tell memory set aside for the driver from the rest. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem) {
    DEVICE_OR_RETURN(d, device)
    if (mem == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (mem->version != nvmlMemory_v2) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    unsigned long long total = 0, free_bytes = 0;
    nvmlReturn_t r = memory(d, &total, &free_bytes);
    if (r == NVML_SUCCESS) {
        mem->total = total;
        mem->reserved = 0;
        mem->free = free_bytes;
        mem->used = total - free_bytes;
    }
    return r;
}

/* ---- no processes are visible from a guest ---- */

/* A guest cannot see the processes of the backend's host (and its own CUDA contexts live in the
 * backend's process): zero processes, which is NVML_SUCCESS for any array size. */
static nvmlReturn_t no_processes(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos) {
    DEVICE_OR_RETURN(d, device)
    (void) d;
    if (infoCount == NULL || (infos == NULL && *infoCount != 0)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *infoCount = 0;
    return NVML_SUCCESS;
}

#define NO_PROCESSES(name)                                                                          \
    NVML_EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos) { \
        return no_processes(device, infoCount, infos);                                              \
    }

NO_PROCESSES(nvmlDeviceGetComputeRunningProcesses)
NO_PROCESSES(nvmlDeviceGetComputeRunningProcesses_v2)
NO_PROCESSES(nvmlDeviceGetComputeRunningProcesses_v3)
NO_PROCESSES(nvmlDeviceGetGraphicsRunningProcesses)
NO_PROCESSES(nvmlDeviceGetGraphicsRunningProcesses_v2)
NO_PROCESSES(nvmlDeviceGetGraphicsRunningProcesses_v3)
NO_PROCESSES(nvmlDeviceGetMPSComputeRunningProcesses)
NO_PROCESSES(nvmlDeviceGetMPSComputeRunningProcesses_v2)
NO_PROCESSES(nvmlDeviceGetMPSComputeRunningProcesses_v3)

/* ---- what the CUDA driver API cannot tell: NVML_ERROR_NOT_SUPPORTED, said once ---- */

#define NVLINK "NVLink state and topology of the backend's GPUs are not visible through the CUDA driver API"
#define PCIE "the PCIe link and PCI ids of the backend's GPUs are not visible through the CUDA driver API"
#define TELEMETRY "telemetry of the backend's GPUs (utilization, clocks, power, temperature) is not forwarded"
#define FABRIC "the backend's NVLink fabric and platform are not visible from a guest"
#define IDENTITY "board identity (serial, brand, part number, firmware) is not known through the CUDA driver API"
#define MIG "MIG is not offered to guests: a backend device is a whole GPU or one it was given"
#define STATE "device modes of the backend's GPUs (persistence, display, ECC, virtualization) are not visible " \
              "through the CUDA driver API"
#define VERSION "the backend's display-driver version string is not known through the CUDA driver API " \
                "(nvmlSystemGetCudaDriverVersion gives the CUDA version)"

/* One row per function: its name and why it answers NVML_ERROR_NOT_SUPPORTED. The functions NCCL
 * (src/misc/nvmlwrap.cc) and PyTorch (c10/cuda/driver_api.h, torch.cuda's pynvml helpers) resolve
 * or call, and pynvml's common queries; NCCL and PyTorch treat NOT_SUPPORTED from each as "no such
 * feature" (no NVLink, no C2C, no fabric, no confidential computing). */
#define UNSUPPORTED(X)                                                                   \
    X(nvmlDeviceGetNvLinkState, NVLINK)                                                  \
    X(nvmlDeviceGetNvLinkVersion, NVLINK)                                                \
    X(nvmlDeviceGetNvLinkCapability, NVLINK)                                             \
    X(nvmlDeviceGetNvLinkRemotePciInfo, NVLINK)                                          \
    X(nvmlDeviceGetNvLinkRemotePciInfo_v2, NVLINK)                                       \
    X(nvmlDeviceGetNvLinkRemoteDeviceType, NVLINK)                                       \
    X(nvmlDeviceGetFieldValues, "field values (NVLink, C2C and other counters) are not forwarded") \
    X(nvmlDeviceGetPcieLinkMaxSpeed, PCIE)                                               \
    X(nvmlDeviceGetCurrPcieLinkGeneration, PCIE)                                         \
    X(nvmlDeviceGetCurrPcieLinkWidth, PCIE)                                              \
    X(nvmlDeviceGetMaxPcieLinkGeneration, PCIE)                                          \
    X(nvmlDeviceGetMaxPcieLinkWidth, PCIE)                                               \
    X(nvmlDeviceGetGpuFabricInfo, FABRIC)                                                \
    X(nvmlDeviceGetGpuFabricInfoV, FABRIC)                                               \
    X(nvmlDeviceGetPlatformInfo, FABRIC)                                                 \
    X(nvmlSystemGetConfComputeState, "the backend's confidential-computing state is not known in a guest") \
    X(nvmlSystemGetConfComputeSettings, "the backend's confidential-computing state is not known in a guest") \
    X(nvmlDeviceGetUtilizationRates, TELEMETRY)                                          \
    X(nvmlDeviceGetTemperature, TELEMETRY)                                               \
    X(nvmlDeviceGetPowerUsage, TELEMETRY)                                                \
    X(nvmlDeviceGetTotalEnergyConsumption, TELEMETRY)                                    \
    X(nvmlDeviceGetPowerManagementLimit, TELEMETRY)                                      \
    X(nvmlDeviceGetEnforcedPowerLimit, TELEMETRY)                                        \
    X(nvmlDeviceGetClockInfo, TELEMETRY)                                                 \
    X(nvmlDeviceGetMaxClockInfo, TELEMETRY)                                              \
    X(nvmlDeviceGetFanSpeed, TELEMETRY)                                                  \
    X(nvmlDeviceGetPerformanceState, TELEMETRY)                                          \
    X(nvmlDeviceGetSerial, IDENTITY)                                                     \
    X(nvmlDeviceGetBrand, IDENTITY)                                                      \
    X(nvmlDeviceGetBoardPartNumber, IDENTITY)                                            \
    X(nvmlDeviceGetVbiosVersion, IDENTITY)                                               \
    X(nvmlDeviceGetMigMode, MIG)                                                         \
    X(nvmlDeviceGetMaxMigDeviceCount, MIG)                                               \
    X(nvmlDeviceGetPersistenceMode, STATE)                                               \
    X(nvmlDeviceGetDisplayActive, STATE)                                                 \
    X(nvmlDeviceGetEccMode, STATE)                                                       \
    X(nvmlDeviceGetVirtualizationMode, STATE)                                            \
    X(nvmlDeviceValidateInforom, IDENTITY)                                               \
    X(nvmlDeviceRegisterEvents, "events of the backend's GPUs (Xid errors, clock and power changes) are not forwarded") \
    X(nvmlSystemGetDriverVersion, VERSION)                                               \
    X(nvmlSystemGetNVMLVersion, VERSION)

struct unsupported_entry {
    const char *name;
    const char *reason;
};

static const struct unsupported_entry unsupported[] = {
#define ROW(name, reason) {#name, reason},
    UNSUPPORTED(ROW)
#undef ROW
};

enum {
#define INDEX(name, reason) UNSUPPORTED_##name,
    UNSUPPORTED(INDEX)
#undef INDEX
    UNSUPPORTED_COUNT
};

static int unsupported_said[UNSUPPORTED_COUNT];

static nvmlReturn_t not_supported(int i) {
    if (!__atomic_exchange_n(&unsupported_said[i], 1, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "gpusockets nvml: %s answers NVML_ERROR_NOT_SUPPORTED: %s\n", unsupported[i].name, unsupported[i].reason);
    }
    return NVML_ERROR_NOT_SUPPORTED;
}

/* Each takes the arguments its nvml.h declaration has and leaves them alone: on the SysV x86-64 and
 * AArch64 ABIs the caller owns its arguments, so a definition without parameters serves every
 * signature (every NVML function returns nvmlReturn_t). */
#define STUB(name, reason)                         \
    NVML_EXPORT nvmlReturn_t name(void) {          \
        return not_supported(UNSUPPORTED_##name);  \
    }
UNSUPPORTED(STUB)
#undef STUB

/* READ and WRITE: cuDeviceCanAccessPeer; ATOMICS: cuDeviceGetP2PAttribute(NATIVE_ATOMIC_SUPPORTED);
 * a device with itself: OK (it reaches its own memory). Whether a path is NVLink, and NVML's "prop"
 * capability, the driver API does not say: NOT_SUPPORTED. A pair the driver cannot answer (devices of
 * two backends, an older libcuda.so.1) has status NOT_SUPPORTED: no peer access between them. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex, int *p2pStatus) {
    static int said;
    if (!is_initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    struct nvmlDevice_st *a = device_of(device1), *b = device_of(device2);
    if (a == NULL || b == NULL || p2pStatus == NULL || p2pIndex < NVML_P2P_CAPS_INDEX_READ || p2pIndex > NVML_P2P_CAPS_INDEX_PROP) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (p2pIndex == NVML_P2P_CAPS_INDEX_NVLINK || p2pIndex == NVML_P2P_CAPS_INDEX_PROP) {
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_SEQ_CST)) {
            fprintf(stderr, "gpusockets nvml: nvmlDeviceGetP2PStatus answers NVML_ERROR_NOT_SUPPORTED for the NVLINK and PROP "
                    "indices: " NVLINK "\n");
        }
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (a == b) {
        *p2pStatus = NVML_P2P_STATUS_OK;
        return NVML_SUCCESS;
    }
    int yes = 0;
    CUresult r;
    if (p2pIndex == NVML_P2P_CAPS_INDEX_ATOMICS) {
        r = cu.cuDeviceGetP2PAttribute != NULL
            ? cu.cuDeviceGetP2PAttribute(&yes, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, a->cuda, b->cuda) : -1;
    } else {
        r = cu.cuDeviceCanAccessPeer != NULL ? cu.cuDeviceCanAccessPeer(&yes, a->cuda, b->cuda) : -1;
    }
    *p2pStatus = r == CUDA_SUCCESS && yes ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* ---- nvidia-smi's export table ----
 *
 * nvidia-smi (NVIDIA's, 535 to 580 at least) asks the NVML it loads, right after nvmlInitWithFlags,
 * for a private table by nvmlInternalGetExportTable(&table, uuid) with the UUID below; if that fails
 * it prints "Mismatch in versions between nvidia-smi and NVML" and exits 255, whatever the version
 * strings say. Read in the binaries of Debian's nvidia-smi 535.261.03 and 555.58.02: the table's first
 * word is its size in bytes, and every use of a slot first checks that the size covers the slot and
 * that the slot is not NULL, and does without it otherwise. So a table of the size word alone, no
 * slots, is a valid answer that offers nothing: nvidia-smi then takes everything from the public
 * functions. No other table is known here: other UUIDs answer NVML_ERROR_NOT_SUPPORTED. */
static const unsigned char SMI_TABLE_UUID[16] = {
    0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e, 0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4,
};
static const size_t smi_table[1] = {sizeof smi_table}; /* the size word, no slots */

NVML_EXPORT nvmlReturn_t nvmlInternalGetExportTable(const void **table, const unsigned char *uuid) {
    if (table == NULL || uuid == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (memcmp(uuid, SMI_TABLE_UUID, sizeof SMI_TABLE_UUID) != 0) {
        *table = NULL;
        return NVML_ERROR_NOT_SUPPORTED;
    }
    *table = smi_table;
    return NVML_SUCCESS;
}

/* ---- event sets ----
 *
 * nvidia-smi's default table makes an event set and stops with "Internal NVML error" if it cannot.
 * Ours are real, empty sets: nvmlDeviceRegisterEvents answers NVML_ERROR_NOT_SUPPORTED (the table
 * `unsupported`), so no event ever reaches one. */
struct nvmlEventSet_st {
    unsigned int magic;
};
#define EVENT_SET_MAGIC 0x45564e54u

NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(struct nvmlEventSet_st **set) {
    if (!is_initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (set == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    struct nvmlEventSet_st *made = malloc(sizeof *made);
    if (made == NULL) {
        return NVML_ERROR_MEMORY;
    }
    made->magic = EVENT_SET_MAGIC;
    *set = made;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlEventSetFree(struct nvmlEventSet_st *set) {
    if (!is_initialized()) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (set == NULL || set->magic != EVENT_SET_MAGIC) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    set->magic = 0;
    free(set);
    return NVML_SUCCESS;
}

/* Our handles are whole devices, never MIG devices. */
NVML_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
    DEVICE_OR_RETURN(d, device)
    if (isMigDevice == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *isMigDevice = 0;
    return NVML_SUCCESS;
}
