/*
 * GPUsockets libcuda.so.1: shared declarations of the hand-written parts (bootstrap.c,
 * procaddress.c, export_tables.c, driver_symbols.c) and the generated trampolines
 * (gpusockets_exports.c). Built without a CUDA toolkit: the few CUDA types the library needs are
 * declared here with their ABI.
 */
#ifndef GPUSOCKETS_H
#define GPUSOCKETS_H

#include <stddef.h>
#include <stdint.h>

#define CUDAAPI
#define GPUS_EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef uint64_t cuuint64_t;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_SUPPORTED 801

/* CUstream value meaning the calling thread's per-thread default stream. */
#define GPUS_STREAM_PER_THREAD ((void *) 0x2)

/* cuGetProcAddress flags and results (cuda.h: CUdriverProcAddress_flags, CUdriverProcAddressQueryResult). */
#define GPUS_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 0x2
#define GPUS_PROC_ADDRESS_SUCCESS 0
#define GPUS_PROC_ADDRESS_SYMBOL_NOT_FOUND 1
#define GPUS_PROC_ADDRESS_VERSION_NOT_SUFFICIENT 2

/* One exported symbol, for cuGetProcAddress: the cuda.h name it serves, the CUDA version it
 * answers from, whether it is the per-thread-default-stream variant, and its address. */
struct gpus_symbol {
    const char *name;
    const char *symbol;
    int since;
    int per_thread;
    void *address;
};

/* generated */
extern const int gpus_function_count;
extern const char *const gpus_function_names[];
extern const struct gpus_symbol gpus_symbols[];

/* profiler.c: the profiler calls of cudaProfiler.h, answered in the guest (NULL-terminated). */
extern const struct gpus_symbol gpus_profiler_symbols[];

/* bootstrap.c: the upcall stub of table entry `index`, starting the embedded JVM on first use;
 * NULL when it could not start (the reason was printed once on stderr). */
void *gpus_entry(int index);

/* What a call returns when the JVM could not start: cuInit says there is no device. */
CUresult gpus_unavailable(int index);

/* generated: the functions not forwarded (not-forwarded.api), and procaddress.c's answer for them:
 * the entry's error, with one line on stderr the first time each is called. */
struct gpus_not_forwarded_entry {
    const char *name;
    int error;
    const char *reason;
};
extern const int gpus_not_forwarded_count;
extern const struct gpus_not_forwarded_entry gpus_not_forwarded_entries[];
CUresult gpus_not_forwarded(int index);

/* export_tables.c: GPUSOCKETS_TRACE=1 logging; context-local storage destructors, run (by the
 * generated cuCtxDestroy and cuDevicePrimaryCtxReset) before a context goes away. */
int gpus_tracing(void);
void gpus_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gpus_cls_context_gone(const void *ctx);
void gpus_cls_primary_reset(int dev);

#endif
