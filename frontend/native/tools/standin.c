/*
 * A stand-in libcuda.so.1 that answers at once: the baseline `bench startup --stand-in` measures
 * GPUsockets' libcuda.so.1 against (tools/README.md). Nothing here talks to a device or a backend:
 * every function returns CUDA_SUCCESS with plausible values, so that what a program spends in it is
 * the loader's mapping of a small library and nothing else.
 *
 * What it answers: what a small driver-API program calls (cuInit, version, device count/get/name/
 * attributes/total memory/UUID, contexts made, destroyed, made current and asked for, the primary
 * context, cuMemAlloc/Free and synchronous copies and sets, which really move the bytes through a
 * malloc'ed "device" buffer, so a program that checks its data passes; streams and events as
 * counters; cuGetErrorName/String) and cuGetProcAddress(_v2) by name over its own exports. It does
 * not answer cuGetExportTable (CUDA_ERROR_NOT_SUPPORTED): the CUDA runtime's private tables are not
 * stood in for, so a program built with cudart does not get past cudart's start against it.
 *
 * Bounds: one device, ordinal 0; "device pointers" are host pointers; no kernels, no modules.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;

#define EXPORT __attribute__((visibility("default")))
#define SUCCESS 0
#define INVALID_VALUE 1
#define NOT_INITIALIZED 3
#define INVALID_DEVICE 101
#define INVALID_CONTEXT 201
#define NOT_FOUND 500
#define NOT_SUPPORTED 801

static int initialised;
static char context_object[64];
static __thread CUcontext current;

/* The checks the driver makes first, in its order: cuInit called, an out pointer, device 0 (the stand-in's one). */
static CUresult ready(const void *out, CUdevice device) {
    if (!initialised) {
        return NOT_INITIALIZED;
    }
    if (out == NULL) {
        return INVALID_VALUE;
    }
    return device == 0 ? SUCCESS : INVALID_DEVICE;
}

EXPORT CUresult cuInit(unsigned int flags) {
    if (flags != 0) {
        return INVALID_VALUE;
    }
    initialised = 1;
    return SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *version) {
    if (version == NULL) {
        return INVALID_VALUE;
    }
    *version = 13000;
    return SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
    if (!initialised) {
        return NOT_INITIALIZED;
    }
    if (count == NULL) {
        return INVALID_VALUE;
    }
    *count = 1;
    return SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    CUresult r = ready(device, ordinal);
    if (r != SUCCESS) {
        return r;
    }
    *device = 0;
    return SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice device) {
    if (name == NULL || len <= 0) {
        return INVALID_VALUE;
    }
    if (device != 0) {
        return INVALID_DEVICE;
    }
    strncpy(name, "GPUsockets stand-in", (size_t) len - 1);
    name[len - 1] = '\0';
    return SUCCESS;
}

/* 75/76: compute capability 9.0; 16: 132 multiprocessors; 1: 1024 threads per block; else 1. */
EXPORT CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    if (value == NULL) {
        return INVALID_VALUE;
    }
    if (device != 0) {
        return INVALID_DEVICE;
    }
    switch (attribute) {
    case 75: *value = 9; break;
    case 76: *value = 0; break;
    case 16: *value = 132; break;
    case 1: *value = 1024; break;
    default: *value = 1; break;
    }
    return SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
    if (bytes == NULL) {
        return INVALID_VALUE;
    }
    if (device != 0) {
        return INVALID_DEVICE;
    }
    *bytes = (size_t) 80 << 30;
    return SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice device) {
    if (uuid == NULL) {
        return INVALID_VALUE;
    }
    for (int i = 0; i < 16; i++) {
        uuid[i] = (unsigned char) (i + 1);
    }
    return SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(unsigned char *uuid, CUdevice device) {
    return cuDeviceGetUuid_v2(uuid, device);
}

static CUresult make_context(CUcontext *ctx, CUdevice device) {
    CUresult r = ready(ctx, device);
    if (r != SUCCESS) {
        return r;
    }
    *ctx = context_object;
    current = context_object;
    return SUCCESS;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice device) {
    return make_context(ctx, device);
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *ctx, void *params, unsigned int flags, CUdevice device) {
    return make_context(ctx, device);
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    if (ctx != context_object) {
        return INVALID_CONTEXT;
    }
    if (current == ctx) {
        current = NULL;
    }
    return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice device) {
    CUresult r = ready(ctx, device);
    if (r != SUCCESS) {
        return r;
    }
    *ctx = context_object;
    return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    return device == 0 ? SUCCESS : INVALID_DEVICE;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (ctx != NULL && ctx != context_object) {
        return INVALID_CONTEXT;
    }
    current = ctx;
    return SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
    if (ctx == NULL) {
        return INVALID_VALUE;
    }
    *ctx = current;
    return SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
    if (device == NULL) {
        return INVALID_VALUE;
    }
    if (current == NULL) {
        return INVALID_CONTEXT;
    }
    *device = 0;
    return SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
    return current != NULL ? SUCCESS : INVALID_CONTEXT;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    if (current == NULL) {
        return INVALID_CONTEXT;
    }
    if (dptr == NULL || bytes == 0) {
        return INVALID_VALUE;
    }
    void *p = malloc(bytes);
    if (p == NULL) {
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    *dptr = (CUdeviceptr) (uintptr_t) p;
    return SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    free((void *) (uintptr_t) dptr);
    return SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    if (free_bytes == NULL || total_bytes == NULL) {
        return INVALID_VALUE;
    }
    *total_bytes = (size_t) 80 << 30;
    *free_bytes = (size_t) 79 << 30;
    return SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    memcpy((void *) (uintptr_t) dst, src, bytes);
    return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    memcpy(dst, (const void *) (uintptr_t) src, bytes);
    return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    memmove((void *) (uintptr_t) dst, (const void *) (uintptr_t) src, bytes);
    return SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
    memset((void *) (uintptr_t) dst, value, count);
    return SUCCESS;
}

static int objects;

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
    if (stream == NULL) {
        return INVALID_VALUE;
    }
    *stream = (CUstream) (uintptr_t) (0x1000 + (uintptr_t) __atomic_add_fetch(&objects, 1, __ATOMIC_RELAXED));
    return SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream stream) {
    return SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
    return SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags) {
    return cuStreamCreate((CUstream *) event, flags);
}

EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
    return SUCCESS;
}

EXPORT CUresult cuEventSynchronize(CUevent event) {
    return SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent event) {
    return SUCCESS;
}

static const struct {
    int code;
    const char *name;
    const char *text;
} errors[] = {
    {SUCCESS, "CUDA_SUCCESS", "no error"},
    {INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

EXPORT CUresult cuGetErrorName(CUresult code, const char **name) {
    if (name == NULL) {
        return INVALID_VALUE;
    }
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (errors[i].code == code) {
            *name = errors[i].name;
            return SUCCESS;
        }
    }
    *name = NULL;
    return INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult code, const char **text) {
    if (text == NULL) {
        return INVALID_VALUE;
    }
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (errors[i].code == code) {
            *text = errors[i].text;
            return SUCCESS;
        }
    }
    *text = NULL;
    return INVALID_VALUE;
}

/* By name over this library's own exports: NAME_v2 first (the newest ABI this stand-in has), then NAME. */
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    if (symbol == NULL || pfn == NULL) {
        return INVALID_VALUE;
    }
    char name[256];
    void *self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *fn = NULL;
    if (self != NULL && strlen(symbol) + 4 < sizeof name) {
        static const char *const suffixes[] = {"_v4", "_v2", ""};
        for (size_t i = 0; fn == NULL && i < sizeof suffixes / sizeof suffixes[0]; i++) {
            strcpy(name, symbol);
            strcat(name, suffixes[i]);
            fn = dlsym(self, name);
        }
        dlclose(self);
    }
    *pfn = fn;
    if (status != NULL) {
        *status = fn != NULL ? 1 : 0; /* CU_GET_PROC_ADDRESS_SUCCESS / SYMBOL_NOT_FOUND */
    }
    return fn != NULL ? SUCCESS : NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

EXPORT CUresult cuGetExportTable(const void **table, const void *id) {
    return NOT_SUPPORTED;
}
