/*
 * errors: the codes of calls that must fail, each printed by name.
 *   - before cuInit: CUDA_ERROR_NOT_INITIALIZED;
 *   - device ordinals out of range: CUDA_ERROR_INVALID_DEVICE;
 *   - no current context (none made current; the current one destroyed): CUDA_ERROR_INVALID_CONTEXT;
 *   - NULL event and function handles, and streams, events and functions of another context:
 *     CUDA_ERROR_INVALID_HANDLE;
 *   - a freed pointer, a pointer into an allocation, a copy past an allocation's end:
 *     CUDA_ERROR_INVALID_VALUE;
 *   - cuGetErrorName/cuGetErrorString for a few codes (names to stdout, strings to stderr), and
 *     CUDA_ERROR_INVALID_VALUE with a NULL string for an unknown code.
 * With --stale-handles it also uses destroyed and made-up handles (contexts, streams, events,
 * functions, modules). The real driver does not define what those do (it may crash), so the GPU
 * comparison (scripts/gpu-programs) leaves them out; a remote driver must answer them, since the
 * backend checks every handle.
 * Errors of asynchronous calls count whether the call or the next cuCtxSynchronize returns them.
 * usage: errors KERNELS.ptx [--stale-handles]
 */
#include "common.h"

static void error_texts(void) {
    const CUresult codes[] = {CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_NOT_INITIALIZED,
                              CUDA_ERROR_NO_DEVICE, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE,
                              CUDA_ERROR_NOT_FOUND, CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_UNKNOWN};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *name = NULL, *text = NULL;
        CHECK(cuGetErrorName(codes[i], &name));
        CHECK(cuGetErrorString(codes[i], &text));
        if (name == NULL || text == NULL || text[0] == 0) {
            fail("cuGetErrorName/String(%d): missing text", (int) codes[i]);
        }
        printf("cuGetErrorName(%d): %s\n", (int) codes[i], name);
        fprintf(stderr, "cuGetErrorString(%d): %s\n", (int) codes[i], text);
    }
    const char *text = "unchanged";
    EXPECT("cuGetErrorName(12345)", cuGetErrorName((CUresult) 12345, &text), CUDA_ERROR_INVALID_VALUE);
    if (text != NULL) {
        fail("cuGetErrorName(12345) did not set the string to NULL");
    }
    text = "unchanged";
    EXPECT("cuGetErrorString(12345)", cuGetErrorString((CUresult) 12345, &text), CUDA_ERROR_INVALID_VALUE);
    if (text != NULL) {
        fail("cuGetErrorString(12345) did not set the string to NULL");
    }
}

static void no_context(CUdevice dev) {
    CUcontext cur = (CUcontext) 1;
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != NULL) {
        fail("a context is current before any was made current");
    }
    printf("cuCtxGetCurrent before any context: NULL\n");
    CUdeviceptr p;
    CUdevice d;
    EXPECT("cuMemAlloc without a context", cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT("cuCtxSynchronize without a context", cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT("cuCtxGetDevice without a context", cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);

    CUcontext ctx;
    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    CHECK(cuCtxDestroy(ctx)); /* it was current: destroying pops it */
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != NULL) {
        fail("the destroyed context is still current");
    }
    EXPECT("cuMemAlloc after the current context was destroyed", cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
}

/* Handles of another context, and NULL handles, on the primary context. */
static void wrong_handles(CUmodule mod, CUdevice dev, CUcontext primary) {
    CUcontext other;
    CHECK(cuCtxCreate(&other, NULL, 0, dev));
    CUstream otherStream;
    CUevent otherEvent;
    CHECK(cuStreamCreate(&otherStream, CU_STREAM_DEFAULT));
    CHECK(cuEventCreate(&otherEvent, CU_EVENT_DEFAULT));
    CUcontext popped = NULL, cur;
    CHECK(cuCtxPopCurrent(&popped));
    if (popped != other) {
        fail("cuCtxPopCurrent did not return the context cuCtxCreate made current");
    }
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != primary) {
        fail("popping the created context did not restore the primary context");
    }

    CUfunction empty = get_function(mod, "gpus_empty");
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 64));
    EXPECT("cuLaunchKernel on a stream of another context",
           with_sync(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, otherStream, NULL, NULL)), CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuEventRecord of an event of another context", with_sync(cuEventRecord(otherEvent, NULL)),
           CUDA_ERROR_INVALID_HANDLE);

    int v;
    EXPECT("cuEventQuery(NULL)", cuEventQuery(NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuEventSynchronize(NULL)", cuEventSynchronize(NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuEventRecord(NULL)", with_sync(cuEventRecord(NULL, NULL)), CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuFuncGetAttribute of a NULL function", cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, NULL),
           CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuLaunchKernel of a NULL function", with_sync(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)),
           CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuMemFree(p));

    /* The other context's objects are destroyed with it, made current once more. */
    CHECK(cuCtxPushCurrent(other));
    CHECK(cuEventDestroy(otherEvent));
    CHECK(cuStreamDestroy(otherStream));
    CHECK(cuCtxPopCurrent(&popped));
    CHECK(cuCtxDestroy(other));
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != primary) {
        fail("destroying another context changed the current one");
    }
    CHECK(cuCtxSynchronize());
}

static void bad_pointers(void) {
    CUdeviceptr p;
    unsigned char host[256];
    memset(host, 0, sizeof host);
    CHECK(cuMemAlloc(&p, 4096));
    EXPECT("cuMemFree of a pointer into an allocation", cuMemFree(p + 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT("cuMemcpyHtoD past the end of an allocation", cuMemcpyHtoD(p + 4000, host, 200), CUDA_ERROR_INVALID_VALUE);
    EXPECT("cuMemcpyDtoH past the end of an allocation", cuMemcpyDtoH(host, p + 4095, 2), CUDA_ERROR_INVALID_VALUE);
    EXPECT("cuMemsetD32 past the end of an allocation", cuMemsetD32(p + 4, 0, 1024), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemcpyHtoD(p + 3896, host, 200)); /* up to the last byte is fine */
    CHECK(cuMemFree(p));
    EXPECT("cuMemFree of a freed pointer", cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuCtxSynchronize());
}

/* Undefined on the real driver: destroyed and made-up handles. */
static void stale_handles(CUmodule *mod, const char *ptx, CUdevice dev, CUcontext primary) {
    int v;
    CUfunction empty = get_function(*mod, "gpus_empty");
    CHECK(cuModuleUnload(*mod));
    EXPECT("cuFuncGetAttribute of a function of an unloaded module",
           cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, empty), CUDA_ERROR_INVALID_HANDLE);
    CUfunction f;
    EXPECT("cuModuleGetFunction of an unloaded module", cuModuleGetFunction(&f, *mod, "gpus_empty"),
           CUDA_ERROR_INVALID_HANDLE);
    *mod = load_ptx_module(ptx);

    CUstream s;
    CUevent e;
    CHECK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    CHECK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    CHECK(cuStreamDestroy(s));
    CHECK(cuEventDestroy(e));
    EXPECT("cuStreamSynchronize of a destroyed stream", cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuStreamQuery of a destroyed stream", cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuEventQuery of a destroyed event", cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuEventRecord of a destroyed event", with_sync(cuEventRecord(e, NULL)), CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuStreamSynchronize of a made-up stream", cuStreamSynchronize((CUstream) (uintptr_t) 0x5eed0001),
           CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuEventSynchronize of a made-up event", cuEventSynchronize((CUevent) (uintptr_t) 0x5eed0002),
           CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuFuncGetAttribute of a made-up function",
           cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction) (uintptr_t) 0x5eed0003), CUDA_ERROR_INVALID_HANDLE);

    CUcontext ctx, cur;
    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    CHECK(cuCtxDestroy(ctx));
    EXPECT("cuCtxPushCurrent of a destroyed context", cuCtxPushCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT("cuCtxSetCurrent of a made-up context", cuCtxSetCurrent((CUcontext) (uintptr_t) 0x5eed0004),
           CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cuCtxSetCurrent(primary));
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != primary) {
        fail("the primary context is not current after cuCtxSetCurrent");
    }
}

int main(int argc, char **argv) {
    usage_if(argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--stale-handles") != 0),
             "errors KERNELS.ptx [--stale-handles]");
    int stale = argc == 3;
    double t0 = now_ms();
    int count;
    EXPECT("cuDeviceGetCount before cuInit", cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
    error_texts(); /* answered before cuInit, too */
    CHECK(cuInit(0));
    CHECK(cuDeviceGetCount(&count));
    CUdevice dev;
    EXPECT("cuDeviceGet(device count)", cuDeviceGet(&dev, count), CUDA_ERROR_INVALID_DEVICE);
    EXPECT("cuDeviceGet(-1)", cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);
    CHECK(cuDeviceGet(&dev, 0));
    no_context(dev);

    CUcontext primary;
    CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CHECK(cuCtxSetCurrent(primary));
    CUmodule mod = load_ptx_module(argv[1]);
    wrong_handles(mod, dev, primary);
    bad_pointers();
    if (stale) {
        stale_handles(&mod, argv[1], dev, primary);
    }
    /* After all these errors the context still works. */
    CUdeviceptr p;
    uint32_t word = 0;
    CHECK(cuMemAlloc(&p, 4));
    CHECK(cuMemsetD32(p, 0x0BADC0DEu, 1));
    CHECK(cuMemcpyDtoH(&word, p, 4));
    if (word != 0x0BADC0DEu) {
        fail("the context no longer works after the errors: read 0x%08x", word);
    }
    CHECK(cuMemFree(p));
    printf("the context still works after the errors\n");
    CHECK(cuModuleUnload(mod));
    release_primary_context(dev);
    fprintf(stderr, "errors: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
