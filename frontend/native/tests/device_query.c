/*
 * device_query: device count, and for each device its name, compute capability, total memory and a
 * few attributes; the driver version; the device and API version of a context on device 0.
 * usage: device_query
 */
#include "common.h"

static const struct {
    CUdevice_attribute attr;
    const char *name;
} ATTRIBUTES[] = {
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessors"},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block"},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "max block dim x"},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, "max block dim y"},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, "max block dim z"},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "max grid dim x"},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "max grid dim y"},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "max grid dim z"},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block"},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size"},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "max threads per multiprocessor"},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "unified addressing"},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, "concurrent kernels"},
};

int main(int argc, char **argv) {
    (void) argv;
    usage_if(argc != 1, "device_query");
    double t0 = now_ms();
    CHECK(cuInit(0));
    fprintf(stderr, "cuInit: %.1f ms\n", now_ms() - t0);

    int version = 0;
    CHECK(cuDriverGetVersion(&version));
    if (version < 12000) {
        fail("driver version %d is below 12000", version);
    }
    printf("driver version: %d (%d.%d)\n", version, version / 1000, version % 1000 / 10);

    int count = 0;
    CHECK(cuDeviceGetCount(&count));
    if (count < 1) {
        fail("cuDeviceGetCount says %d devices", count);
    }
    printf("devices: %d\n", count);

    for (int i = 0; i < count; i++) {
        CUdevice dev;
        CHECK(cuDeviceGet(&dev, i));
        char name[256];
        memset(name, 0x7f, sizeof name);
        CHECK(cuDeviceGetName(name, (int) sizeof name, dev));
        if (memchr(name, 0, sizeof name) == NULL || name[0] == 0) {
            fail("device %d: name is empty or not NUL-terminated", i);
        }
        printf("device %d: %s\n", i, name);

        int major = 0, minor = 0;
        CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
        CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
        printf("  compute capability: %d.%d\n", major, minor);

        size_t total = 0;
        CHECK(cuDeviceTotalMem(&total, dev));
        if (total < ((size_t) 1 << 30)) {
            fail("device %d: total memory %zu is below 1 GiB", i, total);
        }
        printf("  total memory: %zu MiB\n", total >> 20);

        for (size_t k = 0; k < sizeof ATTRIBUTES / sizeof ATTRIBUTES[0]; k++) {
            int v = -1;
            CHECK(cuDeviceGetAttribute(&v, ATTRIBUTES[k].attr, dev));
            printf("  %s: %d\n", ATTRIBUTES[k].name, v);
        }

        CUuuid uuid;
        memset(&uuid, 0, sizeof uuid);
        CHECK(cuDeviceGetUuid(&uuid, dev));
        int nonzero = 0;
        for (size_t k = 0; k < sizeof uuid.bytes; k++) {
            nonzero |= uuid.bytes[k] != 0;
        }
        if (!nonzero) {
            fail("device %d: UUID is all zero", i);
        }
        printf("  uuid: 16 bytes, not all zero\n");
    }

    CUdevice dev;
    CUcontext ctx = use_primary_context(&dev);
    CUcontext current = NULL;
    CHECK(cuCtxGetCurrent(&current));
    if (current != ctx) {
        fail("cuCtxGetCurrent does not return the primary context just made current");
    }
    CUdevice ctxDev = -1;
    CHECK(cuCtxGetDevice(&ctxDev));
    unsigned int api = 0;
    CHECK(cuCtxGetApiVersion(ctx, &api));
    printf("primary context: device %d, api version %u\n", (int) ctxDev, api);
    release_primary_context(dev);
    fprintf(stderr, "device_query: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
