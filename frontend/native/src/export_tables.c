/*
 * cuGetExportTable: the driver's private tables that the CUDA runtime (cudart, static or shared,
 * and the copies of it inside cuBLAS, cuDNN, ...) asks for by GUID before anything else. They are
 * served here, in the guest, never as a remote call per slot: some slots run on nearly every
 * runtime call. Slots whose meaning is not known answer CUDA_ERROR_NOT_SUPPORTED and say so once
 * on stderr, naming table and slot; GPUSOCKETS_TRACE=1 logs every table asked for and every slot
 * called (and, in procaddress.c, every entry point resolved).
 *
 * What the tables hold was measured with a tracing libcuda on the H200 (procaddress/trace/, the
 * real tables' sizes) and against cudart 13.0 here; the slot meanings and the integrity check's
 * inputs were first documented by the ZLUDA project (dark_api/, github.com/vosen/ZLUDA), whose
 * descriptions this file follows. The code is ours.
 */
#define _GNU_SOURCE
#include "gpusockets.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Driver entry points this file calls: our own exported trampolines (cuda.h ABI). */
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGetUuid_v2(void *uuid, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId);
typedef void *CUstream;
typedef void *CUfunction;
CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId);
CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod);
CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod);
CUresult cuModuleLoadData(CUmodule *module, const void *image);

#define CU_DEVICE_ATTRIBUTE_PCI_BUS_ID 33
#define CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID 34
#define CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID 50
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_INVALID_CONTEXT 201

/* ---- tracing and one-time notices ------------------------------------------------------------ */

int gpus_tracing(void) {
    static int state; /* 0 unknown, 1 off, 2 on */
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (s == 0) {
        const char *v = getenv("GPUSOCKETS_TRACE");
        s = v != NULL && *v && strcmp(v, "0") != 0 ? 2 : 1;
        __atomic_store_n(&state, s, __ATOMIC_RELAXED);
    }
    return s == 2;
}

void gpus_trace(const char *fmt, ...) {
    if (!gpus_tracing()) {
        return;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gpusockets trace: %s\n", line);
}

/* ---- table layouts ---------------------------------------------------------------------------- */

struct table {
    const char *name;
    unsigned char guid[16]; /* in memory order, as the caller passes it */
    int slots;              /* the real table's length in pointers (its byte size / 8) */
    int size_word;          /* slot 0 holds the table's byte size */
    void **fns;
};

static void unknown_slot(int table, int slot);

/* Each table below names only the slots whose meaning is known; the others are filled, before
 * the table is first handed out, with a stub of their own (fill_unknown_slots, at the GUIDs). */

/* ---- CUDART_INTERFACE: primary context, modules from fatbins ---------------------------------- */

enum { T_CUDART, T_HOOKS, T_TLS, T_CLS, T_CHECKS, T_INTEGRITY, T_CONTEXT_IDENTITY, T_MODULE_FUNCTIONS, T_COUNT };

/* [2]: the device's primary context (retained: our backend makes a session's primary context on
 * its first retain; cudart releases it at cudaDeviceReset/exit, where the session ends anyway). */
static CUresult cudart_primary_context(CUcontext *pctx, CUdevice dev) {
    gpus_trace("export table CUDART_INTERFACE[2](primary context, device %d)", dev);
    if (pctx == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return cuDevicePrimaryCtxRetain(pctx, dev);
}

/* [1]: a module from a fatbin wrapper (magic 0x466243b1). */
static CUresult cudart_module_from_wrapper(CUmodule *module, const void *wrapper) {
    gpus_trace("export table CUDART_INTERFACE[1](module from fatbin wrapper %p)", wrapper);
    if (module == NULL || wrapper == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return cuModuleLoadData(module, wrapper);
}

/* [6]: the same with three more arguments; only their empty form is understood. */
static CUresult cudart_module_from_wrapper_ext(CUmodule *module, const void *wrapper, void *a3, void *a4,
                                               unsigned int a5) {
    gpus_trace("export table CUDART_INTERFACE[6](module from fatbin wrapper %p, %p, %p, %u)", wrapper, a3, a4, a5);
    if (a3 != NULL || a4 != NULL || a5 != 0) {
        unknown_slot(T_CUDART, 6);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return cudart_module_from_wrapper(module, wrapper);
}

/* [8]: a module from a fatbin (header magic 0xba55ed50), the module output second. */
static CUresult cudart_module_from_fatbin(const void *fatbin, CUmodule *module, void *a3, void *a4, unsigned int a5) {
    gpus_trace("export table CUDART_INTERFACE[8](module from fatbin %p, %p, %p, %u)", fatbin, a3, a4, a5);
    if (a3 != NULL || a4 != NULL || a5 != 0) {
        unknown_slot(T_CUDART, 8);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (module == NULL || fatbin == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return cuModuleLoadData(module, fatbin);
}

/* [7]: takes one word and returns nothing. */
static void cudart_slot7(size_t arg) {
    gpus_trace("export table CUDART_INTERFACE[7](%zu)", arg);
}

/* [12]: loads the PTX compiler and friends in the real driver; there is nothing to load here. */
static CUresult cudart_load_compilers(void) {
    gpus_trace("export table CUDART_INTERFACE[12](load compilers)");
    return CUDA_SUCCESS;
}


static void *cudart_fns[13] = {
    [0] = (void *) (uintptr_t) (13 * sizeof(void *)),
    [1] = (void *) cudart_module_from_wrapper,
    [2] = (void *) cudart_primary_context,
    [6] = (void *) cudart_module_from_wrapper_ext,
    [7] = (void *) cudart_slot7,
    [8] = (void *) cudart_module_from_fatbin,
    [12] = (void *) cudart_load_compilers,
};

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS: two buffers the runtime writes into ------------------------- */

static uint32_t hook_buffer1[1024];
static uint32_t hook_buffer2[14];

static void hooks_buffer1(void **ptr, size_t *size) {
    gpus_trace("export table TOOLS_RUNTIME_CALLBACK_HOOKS[2](buffer of 1024)");
    *ptr = hook_buffer1;
    *size = sizeof hook_buffer1 / sizeof hook_buffer1[0];
}

static void hooks_buffer2(void **ptr, size_t *size) {
    gpus_trace("export table TOOLS_RUNTIME_CALLBACK_HOOKS[6](buffer of 14)");
    *ptr = hook_buffer2;
    *size = sizeof hook_buffer2 / sizeof hook_buffer2[0];
}


static void *hooks_fns[7] = {
    [0] = (void *) (uintptr_t) (7 * sizeof(void *)),
    [2] = (void *) hooks_buffer1,
    [6] = (void *) hooks_buffer2,
};

/* ---- TOOLS_TLS: asked for by every cudart (a refusal crashes it); [2] called by cuBLAS/cuBLASLt --- */

/* [2]: the calling thread's current context. cuBLAS and cuBLASLt (13.x) call it at handle creation
 * with further arguments (a key, a pointer) the answer does not depend on; on driver 580 it gave
 * the context cuCtxGetCurrent gives (calltrace on the H200, 2026-12-03), and refusing it makes
 * cublasCreate fail with CUBLAS_STATUS_INTERNAL_ERROR. */
static CUresult tls_current_context(CUcontext *ctx) {
    CUresult r = ctx == NULL ? CUDA_ERROR_INVALID_VALUE : cuCtxGetCurrent(ctx);
    gpus_trace("export table TOOLS_TLS[2](current context) -> %d, %p", r, ctx != NULL ? *ctx : NULL);
    return r;
}


static void *tls_fns[3] = {
    [0] = (void *) (uintptr_t) (3 * sizeof(void *)),
    [2] = (void *) tls_current_context,
};

/* ---- CONTEXT_LOCAL_STORAGE: (context, key) -> value, with a destructor ------------------------- */

typedef void (*cls_dtor)(CUcontext ctx, void *key, void *value);

struct cls_entry {
    CUcontext ctx;
    void *key;
    void *value;
    cls_dtor dtor;
};

static pthread_rwlock_t cls_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct cls_entry *cls_entries;
static size_t cls_count, cls_capacity;

static CUresult cls_context(CUcontext *ctx) {
    if (*ctx != NULL) {
        return CUDA_SUCCESS;
    }
    CUresult r = cuCtxGetCurrent(ctx);
    if (r == CUDA_SUCCESS && *ctx == NULL) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    }
    return r;
}

static CUresult cls_put(CUcontext ctx, void *key, void *value, cls_dtor dtor) {
    CUresult r = cls_context(&ctx);
    gpus_trace("export table CONTEXT_LOCAL_STORAGE[0](put, ctx %p, key %p) -> %d", ctx, key, r);
    if (r != CUDA_SUCCESS) {
        return r;
    }
    pthread_rwlock_wrlock(&cls_lock);
    for (size_t i = 0; i < cls_count; i++) {
        if (cls_entries[i].ctx == ctx && cls_entries[i].key == key) {
            cls_entries[i].value = value;
            cls_entries[i].dtor = dtor;
            pthread_rwlock_unlock(&cls_lock);
            return CUDA_SUCCESS;
        }
    }
    if (cls_count == cls_capacity) {
        size_t capacity = cls_capacity ? cls_capacity * 2 : 16;
        struct cls_entry *grown = realloc(cls_entries, capacity * sizeof *grown);
        if (grown == NULL) {
            pthread_rwlock_unlock(&cls_lock);
            return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
        }
        cls_entries = grown;
        cls_capacity = capacity;
    }
    cls_entries[cls_count++] = (struct cls_entry) {ctx, key, value, dtor};
    pthread_rwlock_unlock(&cls_lock);
    return CUDA_SUCCESS;
}

static CUresult cls_delete(CUcontext ctx, void *key) {
    CUresult r = cls_context(&ctx);
    gpus_trace("export table CONTEXT_LOCAL_STORAGE[1](delete, ctx %p, key %p) -> %d", ctx, key, r);
    if (r != CUDA_SUCCESS) {
        return r;
    }
    pthread_rwlock_wrlock(&cls_lock);
    for (size_t i = 0; i < cls_count; i++) {
        if (cls_entries[i].ctx == ctx && cls_entries[i].key == key) {
            cls_entries[i] = cls_entries[--cls_count];
            break;
        }
    }
    pthread_rwlock_unlock(&cls_lock);
    return CUDA_SUCCESS;
}

static CUresult cls_get(void **value, CUcontext ctx, void *key) {
    CUresult r = cls_context(&ctx);
    if (r == CUDA_SUCCESS) {
        r = CUDA_ERROR_INVALID_HANDLE; /* what the driver answers for a key never put */
        pthread_rwlock_rdlock(&cls_lock);
        for (size_t i = 0; i < cls_count; i++) {
            if (cls_entries[i].ctx == ctx && cls_entries[i].key == key) {
                *value = cls_entries[i].value;
                r = CUDA_SUCCESS;
                break;
            }
        }
        pthread_rwlock_unlock(&cls_lock);
    }
    gpus_trace("export table CONTEXT_LOCAL_STORAGE[2](get, ctx %p, key %p) -> %d", ctx, key, r);
    return r;
}


/* No size word in this table. */
static void *cls_fns[4] = {
    [0] = (void *) cls_put,
    [1] = (void *) cls_delete,
    [2] = (void *) cls_get,
};

void gpus_cls_context_gone(const void *ctx) {
    if (ctx == NULL) {
        return;
    }
    /* Each destructor runs outside the lock (it may call the driver, or this table), while the
     * context still exists: the caller runs this before destroying or resetting it. */
    for (;;) {
        struct cls_entry e = {0};
        pthread_rwlock_wrlock(&cls_lock);
        for (size_t i = 0; i < cls_count; i++) {
            if (cls_entries[i].ctx == ctx) {
                e = cls_entries[i];
                cls_entries[i] = cls_entries[--cls_count];
                break;
            }
        }
        pthread_rwlock_unlock(&cls_lock);
        if (e.ctx == NULL) {
            return;
        }
        gpus_trace("context %p ends: context-local storage destructor for key %p", e.ctx, e.key);
        if (e.dtor != NULL) {
            e.dtor(e.ctx, e.key, e.value);
        }
    }
}

void gpus_cls_primary_reset(int dev) {
    pthread_rwlock_rdlock(&cls_lock);
    size_t n = cls_count;
    pthread_rwlock_unlock(&cls_lock);
    if (n == 0) {
        return; /* nothing stored: no need to ask which context is primary */
    }
    CUcontext ctx = NULL;
    if (cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS) {
        gpus_cls_context_gone(ctx);
        cuDevicePrimaryCtxRelease_v2(dev);
    }
}

/* ---- CONTEXT_CHECKS --------------------------------------------------------------------------- */

static CUresult checks_context(CUcontext ctx, uint32_t *result, void **unused) {
    gpus_trace("export table CONTEXT_CHECKS[2](ctx %p)", ctx);
    if (result != NULL) {
        *result = 0;
    }
    return CUDA_SUCCESS;
}

static uint32_t checks_slot3(void) {
    gpus_trace("export table CONTEXT_CHECKS[3]()");
    return 0;
}


/* The real table is 15 pointers long (120 bytes, seen on driver 580); only [2] and [3] are known. */
static void *checks_fns[15] = {
    [0] = (void *) (uintptr_t) (15 * sizeof(void *)),
    [2] = (void *) checks_context,
    [3] = (void *) checks_slot3,
};

/* ---- CONTEXT_IDENTITY (21318c60...): asked for by cuBLAS, cuBLASLt and cuFFT, 93 slots ----------- */

/* [4](ctx, u64 *id): the context's unique id, as cuCtxGetId (NULL: the current context). cuBLASLt
 * keys its kernel registry by it; on driver 580 it gave cuCtxGetId's value. */
static CUresult context_identity_id(CUcontext ctx, unsigned long long *id) {
    CUresult r = id == NULL ? CUDA_ERROR_INVALID_VALUE : cuCtxGetId(ctx, id);
    gpus_trace("export table CONTEXT_IDENTITY[4](ctx %p) -> %d, id %llu", ctx, r, id != NULL && r == 0 ? *id : 0ull);
    return r;
}

/* [51](ctx, stream, void **object) and [39](ctx, object, u64 *id): cublasCreate asks [51] for an
 * object standing for a stream (the NULL stream), hands it to [39], which gave 7 for it on driver
 * 580, then queries and records an event on that stream: the pattern of a workspace kept per
 * stream and keyed by the stream's unique id. Our reading, not a documented one: [51] gives a
 * record of the stream and [39] that stream's cuStreamGetId (calltrace, H200, 2026-12-03). The
 * driver's object began with the word 1; ours does too, in case a caller looks. Records are kept
 * for the life of the process, one per stream handle asked about, at most STREAM_OBJECTS. */
struct stream_object {
    uint64_t one;
    CUstream stream;
};
#define STREAM_OBJECTS 1024
static struct stream_object stream_objects[STREAM_OBJECTS];
static int stream_object_count;
static pthread_mutex_t stream_objects_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult context_identity_stream_object(CUcontext ctx, CUstream stream, void **object) {
    if (object == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&stream_objects_lock);
    struct stream_object *o = NULL;
    for (int i = 0; i < stream_object_count && o == NULL; i++) {
        if (stream_objects[i].stream == stream) {
            o = &stream_objects[i];
        }
    }
    if (o == NULL && stream_object_count < STREAM_OBJECTS) {
        o = &stream_objects[stream_object_count++];
        o->one = 1;
        o->stream = stream;
    }
    pthread_mutex_unlock(&stream_objects_lock);
    if (o == NULL) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    *object = o;
    gpus_trace("export table CONTEXT_IDENTITY[51](ctx %p, stream %p) -> %d, %p", ctx, stream, r, (void *) o);
    return r;
}

static CUresult context_identity_stream_id(CUcontext ctx, const struct stream_object *object, unsigned long long *id) {
    CUresult r;
    if (object == NULL || id == NULL || object < stream_objects || object >= stream_objects + STREAM_OBJECTS) {
        r = CUDA_ERROR_INVALID_VALUE; /* not one of ours */
    } else {
        r = cuStreamGetId(object->stream, id);
    }
    gpus_trace("export table CONTEXT_IDENTITY[39](ctx %p, %p) -> %d, id %llu", ctx, (const void *) object, r,
               id != NULL && r == 0 ? *id : 0ull);
    return r;
}


/* The real table is 744 bytes (93 pointers) on driver 580 (procaddress/trace/h200-driver580). */
static void *context_identity_fns[93] = {
    [0] = (void *) (uintptr_t) (93 * sizeof(void *)),
    [4] = (void *) context_identity_id,
    [39] = (void *) context_identity_stream_id,
    [51] = (void *) context_identity_stream_object,
};

/* ---- MODULE_FUNCTIONS (6e163fbe...): asked for by cuFFT, 99 slots ------------------------------- */

/* [7](ctx, module, callback, user, ...): cuFFT calls it right after loading each of its modules,
 * with a callback that stores its second argument through its first, and then takes the word at
 * `user` as a CUfunction (its attributes, occupancy, launches). On driver 580 it returned 1 for
 * modules of one kernel and left that kernel's function there. Our reading (calltrace, H200,
 * 2026-12-03; not documented): call callback(user, f) for every function of the module, in the
 * driver's order, and return how many there were (0 when they cannot be listed). */
typedef void (*module_function_visitor)(void *user, CUfunction function);
#define MODULE_FUNCTIONS_MAX 4096

static unsigned int module_functions_visit(CUcontext ctx, CUmodule module, module_function_visitor visit, void *user) {
    unsigned int count = 0;
    CUresult r = visit == NULL ? CUDA_ERROR_INVALID_VALUE : cuModuleGetFunctionCount(&count, module);
    CUfunction *functions = NULL;
    if (r == CUDA_SUCCESS && count > 0) {
        functions = count <= MODULE_FUNCTIONS_MAX ? calloc(count, sizeof *functions) : NULL;
        r = functions == NULL ? CUDA_ERROR_OUT_OF_MEMORY : cuModuleEnumerateFunctions(functions, count, module);
    }
    if (r != CUDA_SUCCESS) {
        count = 0;
    }
    for (unsigned int i = 0; i < count; i++) {
        visit(user, functions[i]);
    }
    free(functions);
    gpus_trace("export table MODULE_FUNCTIONS[7](ctx %p, module %p) -> %u functions (%d)", ctx, module, count, r);
    return count;
}


/* The real table is 792 bytes (99 pointers) on driver 580 (calltrace, H200). */
static void *module_functions_fns[99] = {
    [0] = (void *) (uintptr_t) (99 * sizeof(void *)),
    [7] = (void *) module_functions_visit,
};

/* ---- INTEGRITY_CHECK -------------------------------------------------------------------------- */

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2]);

static void *integrity_fns[3] = {
    [0] = (void *) (uintptr_t) (3 * sizeof(void *)),
    [1] = (void *) integrity_check,
};

/*
 * MD2 (RFC 1319), written from the RFC: the runtime checks the driver with HMAC-MD2 (RFC 2104,
 * block and digest 16 bytes) under a fixed key, over the facts below. That the check is this HMAC,
 * its key and the order of the inputs were found by the ZLUDA project (dark_api's integrity_check).
 */
static const uint8_t md2_s[256] = {
    41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19, 98, 167, 5, 243, 192, 199, 115, 140,
    152, 147, 43, 217, 188, 76, 130, 202, 30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18,
    190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122, 169, 104, 121, 145, 21, 178, 7, 63,
    148, 194, 16, 137, 11, 34, 95, 33, 128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3,
    255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198, 79, 184, 56, 210, 150, 164, 125, 182,
    118, 252, 107, 226, 156, 116, 4, 241, 69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2,
    27, 96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15, 85, 71, 163, 35, 221, 81, 175, 58,
    195, 92, 249, 206, 186, 197, 234, 38, 44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82,
    106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74, 120, 136, 149, 139, 227, 99, 232, 109,
    233, 203, 213, 254, 59, 0, 29, 57, 242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10,
    49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20,
};

struct md2 {
    uint8_t x[48];
    uint8_t checksum[16];
    uint8_t block[16];
    size_t used;
};

static void md2_block(struct md2 *m) {
    uint8_t l = m->checksum[15];
    for (int i = 0; i < 16; i++) {
        l = m->checksum[i] ^= md2_s[m->block[i] ^ l];
        m->x[16 + i] = m->block[i];
        m->x[32 + i] = m->x[16 + i] ^ m->x[i];
    }
    uint8_t t = 0;
    for (int round = 0; round < 18; round++) {
        for (int k = 0; k < 48; k++) {
            t = m->x[k] ^= md2_s[t];
        }
        t = (uint8_t) (t + round);
    }
}

static void md2_init(struct md2 *m) {
    memset(m, 0, sizeof *m);
}

static void md2_update(struct md2 *m, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        m->block[m->used++] = p[i];
        if (m->used == 16) {
            md2_block(m);
            m->used = 0;
        }
    }
}

static void md2_final(struct md2 *m, uint8_t digest[16]) {
    uint8_t pad = (uint8_t) (16 - m->used); /* 1 to 16 bytes, each of that value */
    for (int i = 0; i < pad; i++) {
        md2_update(m, &pad, 1);
    }
    uint8_t checksum[16];
    memcpy(checksum, m->checksum, 16);
    md2_update(m, checksum, 16);
    memcpy(digest, m->x, 16);
}

/* For the tests (check.c): MD2 of a buffer. */
void gpus_md2(const void *data, size_t n, uint8_t digest[16]) {
    struct md2 m;
    md2_init(&m);
    md2_update(&m, data, n);
    md2_final(&m, digest);
}

static const uint8_t integrity_key[16] = {
    0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
};

/* What the check covers besides the caller's: per device, exactly the UUID and PCI location this
 * library reports through cuDeviceGetUuid/cuDeviceGetAttribute (the runtime hashes what it sees). */
struct device_facts {
    uint8_t uuid[16];
    int32_t pci_domain, pci_bus, pci_device;
};

struct integrity_facts {
    int ready;
    int driver_version;
    int devices;
    struct device_facts *device;
};

static pthread_once_t facts_once = PTHREAD_ONCE_INIT;
static struct integrity_facts facts;
static CUresult facts_result;

/* Asked once: devices do not change while a program runs. */
static void load_facts(void) {
    CUresult r = cuDriverGetVersion(&facts.driver_version);
    if (r == CUDA_SUCCESS) {
        r = cuDeviceGetCount(&facts.devices);
    }
    if (r == CUDA_SUCCESS && facts.devices > 0) {
        facts.device = calloc((size_t) facts.devices, sizeof *facts.device);
        if (facts.device == NULL) {
            r = 2;
        }
    }
    for (int d = 0; r == CUDA_SUCCESS && d < facts.devices; d++) {
        struct device_facts *f = &facts.device[d];
        r = cuDeviceGetUuid_v2(f->uuid, d);
        if (r == CUDA_SUCCESS) {
            r = cuDeviceGetAttribute(&f->pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d);
        }
        if (r == CUDA_SUCCESS) {
            r = cuDeviceGetAttribute(&f->pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d);
        }
        if (r == CUDA_SUCCESS) {
            r = cuDeviceGetAttribute(&f->pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d);
        }
    }
    facts_result = r;
}

/* The answer for `version` (13000, 13001, 13002 from cudart 13.0) and the caller's clock. */
void gpus_integrity_hash(uint32_t version, uint64_t unix_seconds, int driver_version, uint32_t pid, uint32_t thread,
                         const void *cudart_table, const void *integrity_table, const void *fn,
                         int devices, const void *device_facts, uint64_t result[2]) {
    if (version % 10 == 0) {
        result[0] = 0x3341181c03cb675cULL;
        result[1] = 0x8ed383aa1f4cd1e8ULL;
        return;
    }
    if (version % 10 == 1) {
        result[0] = 0x1841181c03cb675cULL;
        result[1] = 0x8ed383aa1f4cd1e8ULL;
        return;
    }
    uint8_t pad[16], inner[16];
    struct md2 m;
    md2_init(&m);
    for (int i = 0; i < 16; i++) {
        pad[i] = integrity_key[i] ^ 0x36;
    }
    md2_update(&m, pad, 16);
    /* the message: a packed record, then each device */
    uint32_t head[4] = {(uint32_t) driver_version, version, pid, thread};
    md2_update(&m, head, sizeof head);
    const void *addresses[3] = {cudart_table, integrity_table, fn};
    md2_update(&m, addresses, sizeof addresses);
    md2_update(&m, &unix_seconds, sizeof unix_seconds);
    const struct device_facts *dev = device_facts;
    for (int d = 0; d < devices; d++) {
        md2_update(&m, dev[d].uuid, 16);
        md2_update(&m, &dev[d].pci_domain, 4);
        md2_update(&m, &dev[d].pci_bus, 4);
        md2_update(&m, &dev[d].pci_device, 4);
    }
    md2_final(&m, inner);
    md2_init(&m);
    for (int i = 0; i < 16; i++) {
        pad[i] = integrity_key[i] ^ 0x5c;
    }
    md2_update(&m, pad, 16);
    md2_update(&m, inner, 16);
    uint8_t digest[16];
    md2_final(&m, digest);
    memcpy(result, digest, 16);
}

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2]) {
    if (result == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (version % 10 >= 2) {
        pthread_once(&facts_once, load_facts);
        if (facts_result != CUDA_SUCCESS) {
            gpus_trace("export table INTEGRITY_CHECK[1](%u): the device facts failed: %d", version, facts_result);
            return facts_result;
        }
    }
    gpus_integrity_hash(version, unix_seconds, facts.driver_version, (uint32_t) getpid(), (uint32_t) pthread_self(),
                        cudart_fns, integrity_fns, integrity_fns[1], facts.devices, facts.device, result);
    gpus_trace("export table INTEGRITY_CHECK[1](version %u, time %llu)", version, (unsigned long long) unix_seconds);
    return CUDA_SUCCESS;
}

/* ---- slots nobody has described ---------------------------------------------------------------- */

/* One function per table and slot, so the notice can name both. Called with the caller's
 * arguments, which they ignore (harmless in the x86-64 and AArch64 calling conventions). */
#define MAX_SLOTS 100 /* the longest table, MODULE_FUNCTIONS, has 99 */
#define SLOT_STUB(t, s) \
    static CUresult stub_##t##_##s(void) { unknown_slot(t, s); return CUDA_ERROR_NOT_SUPPORTED; }
#define SLOT_STUBS10(t, tens)                                                                       \
    SLOT_STUB(t, tens##0) SLOT_STUB(t, tens##1) SLOT_STUB(t, tens##2) SLOT_STUB(t, tens##3)       \
    SLOT_STUB(t, tens##4) SLOT_STUB(t, tens##5) SLOT_STUB(t, tens##6) SLOT_STUB(t, tens##7)       \
    SLOT_STUB(t, tens##8) SLOT_STUB(t, tens##9)
#define SLOT_STUBS100(t)                                                                            \
    SLOT_STUBS10(t, ) SLOT_STUBS10(t, 1) SLOT_STUBS10(t, 2) SLOT_STUBS10(t, 3) SLOT_STUBS10(t, 4)  \
    SLOT_STUBS10(t, 5) SLOT_STUBS10(t, 6) SLOT_STUBS10(t, 7) SLOT_STUBS10(t, 8) SLOT_STUBS10(t, 9)
#define SLOT_ENTRIES10(t, tens)                                                                     \
    (void *) stub_##t##_##tens##0, (void *) stub_##t##_##tens##1, (void *) stub_##t##_##tens##2,   \
    (void *) stub_##t##_##tens##3, (void *) stub_##t##_##tens##4, (void *) stub_##t##_##tens##5,   \
    (void *) stub_##t##_##tens##6, (void *) stub_##t##_##tens##7, (void *) stub_##t##_##tens##8,   \
    (void *) stub_##t##_##tens##9
#define SLOT_ENTRIES100(t)                                                                          \
    {SLOT_ENTRIES10(t, ), SLOT_ENTRIES10(t, 1), SLOT_ENTRIES10(t, 2), SLOT_ENTRIES10(t, 3),         \
     SLOT_ENTRIES10(t, 4), SLOT_ENTRIES10(t, 5), SLOT_ENTRIES10(t, 6), SLOT_ENTRIES10(t, 7),        \
     SLOT_ENTRIES10(t, 8), SLOT_ENTRIES10(t, 9)}

SLOT_STUBS100(T_CUDART)
SLOT_STUBS100(T_HOOKS)
SLOT_STUBS100(T_TLS)
SLOT_STUBS100(T_CLS)
SLOT_STUBS100(T_CHECKS)
SLOT_STUBS100(T_INTEGRITY)
SLOT_STUBS100(T_CONTEXT_IDENTITY)
SLOT_STUBS100(T_MODULE_FUNCTIONS)

static void *const slot_stubs[T_COUNT][MAX_SLOTS] = {
    [T_CUDART] = SLOT_ENTRIES100(T_CUDART),
    [T_HOOKS] = SLOT_ENTRIES100(T_HOOKS),
    [T_TLS] = SLOT_ENTRIES100(T_TLS),
    [T_CLS] = SLOT_ENTRIES100(T_CLS),
    [T_CHECKS] = SLOT_ENTRIES100(T_CHECKS),
    [T_INTEGRITY] = SLOT_ENTRIES100(T_INTEGRITY),
    [T_CONTEXT_IDENTITY] = SLOT_ENTRIES100(T_CONTEXT_IDENTITY),
    [T_MODULE_FUNCTIONS] = SLOT_ENTRIES100(T_MODULE_FUNCTIONS),
};

/* ---- the GUIDs -------------------------------------------------------------------------------- */

static const struct table tables[T_COUNT] = {
    [T_CUDART] = {"CUDART_INTERFACE",
                  {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9},
                  13, 1, cudart_fns},
    [T_HOOKS] = {"TOOLS_RUNTIME_CALLBACK_HOOKS",
                 {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66},
                 7, 1, hooks_fns},
    [T_TLS] = {"TOOLS_TLS",
               {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc},
               3, 1, tls_fns},
    [T_CLS] = {"CONTEXT_LOCAL_STORAGE",
               {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93},
               4, 0, cls_fns},
    [T_CHECKS] = {"CONTEXT_CHECKS",
                  {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e},
                  15, 1, checks_fns},
    [T_INTEGRITY] = {"INTEGRITY_CHECK",
                     {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2},
                     3, 1, integrity_fns},
    [T_CONTEXT_IDENTITY] = {"CONTEXT_IDENTITY",
                            {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2},
                            93, 1, context_identity_fns},
    [T_MODULE_FUNCTIONS] = {"MODULE_FUNCTIONS",
                            {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e},
                            99, 1, module_functions_fns},
};

/* Tables the runtime asks for and copes without (measured with cudart 13.0): declined quietly. */
static const unsigned char declined[][16] = {
    /* asked first, before cuInit; cudart 13.0 goes on when refused */
    {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9},
};

static void guid_text(const unsigned char *g, char out[33]) {
    for (int i = 0; i < 16; i++) {
        snprintf(out + 2 * i, 3, "%02x", g[i]);
    }
}

static void unknown_slot(int table, int slot) {
    static unsigned char said[T_COUNT][MAX_SLOTS];
    if (!__atomic_exchange_n(&said[table][slot], 1, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "gpusockets: slot %d of the driver's private table %s was called; GPUsockets does not "
                        "implement it (CUDA_ERROR_NOT_SUPPORTED)\n", slot, tables[table].name);
    }
}

/* Every slot a table leaves empty gets its stub (tables longer than MAX_SLOTS would keep NULLs:
 * ExportTablesUnitTest checks that every slot of every table is filled). */
static void fill_unknown_slots(void) {
    for (int t = 0; t < T_COUNT; t++) {
        for (int s = tables[t].size_word ? 1 : 0; s < tables[t].slots && s < MAX_SLOTS; s++) {
            if (tables[t].fns[s] == NULL) {
                tables[t].fns[s] = slot_stubs[t][s];
            }
        }
    }
}

GPUS_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const void *pExportTableId) {
    static pthread_once_t filled = PTHREAD_ONCE_INIT;
    pthread_once(&filled, fill_unknown_slots);
    if (ppExportTable == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *ppExportTable = NULL;
    if (pExportTableId == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    char text[33];
    guid_text(pExportTableId, text);
    for (int t = 0; t < T_COUNT; t++) {
        if (memcmp(tables[t].guid, pExportTableId, 16) == 0) {
            gpus_trace("cuGetExportTable(%s) -> %s, %d slots", text, tables[t].name, tables[t].slots);
            *ppExportTable = tables[t].fns;
            return CUDA_SUCCESS;
        }
    }
    int quiet = 0;
    for (size_t i = 0; i < sizeof declined / sizeof declined[0]; i++) {
        quiet |= memcmp(declined[i], pExportTableId, 16) == 0;
    }
    gpus_trace("cuGetExportTable(%s) -> not provided", text);
    if (!quiet) {
        /* one line per GUID (the first 16 distinct ones), so tracing what a library needs is easy */
        static unsigned char seen[16][16];
        static int seen_count;
        static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&seen_lock);
        int known = 0;
        for (int i = 0; i < seen_count; i++) {
            known |= memcmp(seen[i], pExportTableId, 16) == 0;
        }
        if (!known && seen_count < 16) {
            memcpy(seen[seen_count++], pExportTableId, 16);
            fprintf(stderr, "gpusockets: the driver's private table %s is not provided "
                            "(CUDA_ERROR_NOT_SUPPORTED); a library asked for it\n", text);
        }
        pthread_mutex_unlock(&seen_lock);
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}
