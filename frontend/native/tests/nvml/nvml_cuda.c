/*
 * nvml_cuda: NVML and the CUDA driver API in one program, as NCCL and PyTorch use them together.
 * Against NVIDIA's libcuda.so.1 and libnvidia-ml.so.1 on a GPU machine, and against ours (NVML
 * answered through our libcuda.so.1) on a guest, it checks that the two agree and prints the same
 * stdout (scripts/gpu-programs compares them; NvmlTest compares with expected/nvml_cuda.out):
 *
 *   - each CUDA device is found in NVML by its UUID (cuDeviceGetUuid's bytes as GPU-... text) and by
 *     its bus id in the lowercase form NCCL passes, and NVML's name, bus id and compute capability
 *     are the driver's;
 *   - NVML's used memory grows by a 64 MiB cuMemAlloc in the program's primary context and shrinks
 *     when it is freed (one of three tries: other processes or tenants may allocate meanwhile);
 *   - NVML calls leave the thread's current context alone;
 *   - after cuDevicePrimaryCtxReset (what cudaDeviceReset does), NVML still answers.
 *
 * Built with gcc: cuda.h for the driver API; NVML's few declarations are written out below (after
 * NVIDIA's public nvml.h), so no NVML header is needed.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);

#define CU(call)                                                                                 \
    do {                                                                                         \
        CUresult r_ = (call);                                                                    \
        if (r_ != CUDA_SUCCESS) {                                                                \
            const char *n_ = NULL;                                                               \
            cuGetErrorName(r_, &n_);                                                             \
            fprintf(stderr, "nvml_cuda: %s failed: %s (%d)\n", #call, n_ ? n_ : "?", (int) r_);  \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

#define NVML(call)                                                                               \
    do {                                                                                         \
        nvmlReturn_t r_ = (call);                                                                \
        if (r_ != 0) {                                                                           \
            fprintf(stderr, "nvml_cuda: %s failed: %d (%s)\n", #call, r_, nvmlErrorString(r_));  \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "nvml_cuda: check failed: %s\n", what);
        failures++;
    }
}

static const char *yes(int ok) {
    return ok ? "yes" : "no";
}

/* used memory by NVML, for the device the handle names */
static unsigned long long used(nvmlDevice_t d) {
    nvmlMemory_t m;
    NVML(nvmlDeviceGetMemoryInfo(d, &m));
    return m.used;
}

int main(void) {
    CU(cuInit(0));
    NVML(nvmlInit_v2());
    int count = 0;
    unsigned int nvml_count = 0;
    CU(cuDeviceGetCount(&count));
    NVML(nvmlDeviceGetCount_v2(&nvml_count));
    printf("CUDA devices: %d; NVML devices: at least as many: %s\n", count, yes(nvml_count >= (unsigned int) count));
    check(nvml_count >= (unsigned int) count, "NVML shows every CUDA device");

    for (int i = 0; i < count; i++) {
        CUdevice dev;
        CU(cuDeviceGet(&dev, i));
        CUuuid u;
        CU(cuDeviceGetUuid(&u, dev));
        const unsigned char *b = (const unsigned char *) u.bytes;
        char uuid[48];
        snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        nvmlDevice_t h;
        nvmlReturn_t by_uuid = nvmlDeviceGetHandleByUUID(uuid, &h);
        printf("device %d: found in NVML by cuDeviceGetUuid's UUID: %s\n", i, yes(by_uuid == 0));
        check(by_uuid == 0, "NVML knows the CUDA device's UUID");
        if (by_uuid != 0) {
            continue;
        }

        /* the bus id as NCCL makes it of cudaDeviceGetPCIBusId's: domain:bus:device.function, lowercase */
        char cuda_bus_id[64];
        CU(cuDeviceGetPCIBusId(cuda_bus_id, sizeof cuda_bus_id, dev));
        char lower[64];
        for (size_t c = 0; c < sizeof lower; c++) {
            lower[c] = (char) (cuda_bus_id[c] >= 'A' && cuda_bus_id[c] <= 'F' ? cuda_bus_id[c] - 'A' + 'a' : cuda_bus_id[c]);
            if (cuda_bus_id[c] == '\0') {
                break;
            }
        }
        nvmlDevice_t by_bus = NULL;
        nvmlReturn_t rb = nvmlDeviceGetHandleByPciBusId_v2(lower, &by_bus);
        nvmlPciInfo_t pci;
        NVML(nvmlDeviceGetPciInfo_v3(h, &pci));
        int pci_same = strcasecmp(pci.busIdLegacy, cuda_bus_id) == 0;
        printf("device %d: found by its bus id in lowercase: %s; NVML's busIdLegacy is cuDeviceGetPCIBusId's: %s\n", i,
               yes(rb == 0 && by_bus == h), yes(pci_same));
        check(rb == 0 && by_bus == h, "nvmlDeviceGetHandleByPciBusId_v2 of the lowercase CUDA bus id");
        check(pci_same, "busIdLegacy equals cuDeviceGetPCIBusId (ignoring case)");
        if (!pci_same) {
            fprintf(stderr, "nvml_cuda: NVML %s, CUDA %s\n", pci.busIdLegacy, cuda_bus_id);
        }

        char name[96], cuda_name[256];
        NVML(nvmlDeviceGetName(h, name, sizeof name));
        CU(cuDeviceGetName(cuda_name, sizeof cuda_name, dev));
        int major = -1, minor = -1, cmajor = -2, cminor = -2;
        NVML(nvmlDeviceGetCudaComputeCapability(h, &major, &minor));
        CU(cuDeviceGetAttribute(&cmajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
        CU(cuDeviceGetAttribute(&cminor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
        printf("device %d: NVML's name and compute capability are the driver's: %s, %s\n", i, yes(strcmp(name, cuda_name) == 0),
               yes(major == cmajor && minor == cminor));
        check(strcmp(name, cuda_name) == 0, "names agree");
        check(major == cmajor && minor == cminor, "compute capabilities agree");

        /* the program's own allocation in its primary context shows in NVML's used memory */
        CUcontext ctx, current;
        CU(cuDevicePrimaryCtxRetain(&ctx, dev));
        CU(cuCtxSetCurrent(ctx));
        const size_t size = 64u << 20;
        int grew = 0, shrank = 0;
        for (int attempt = 0; attempt < 3 && !(grew && shrank); attempt++) {
            unsigned long long before = used(h);
            CUdeviceptr p;
            CU(cuMemAlloc(&p, size));
            unsigned long long during = used(h);
            CU(cuMemFree(p));
            unsigned long long after = used(h);
            grew = during >= before + size;
            shrank = after + size <= during;
            fprintf(stderr, "nvml_cuda: device %d used %llu, with 64 MiB allocated %llu, freed %llu\n", i, before, during, after);
        }
        CU(cuCtxGetCurrent(&current));
        printf("device %d: a 64 MiB cuMemAlloc shows in NVML's used memory: %s, and its cuMemFree: %s; current context kept: %s\n", i,
               yes(grew), yes(shrank), yes(current == ctx));
        check(grew && shrank, "NVML's used memory follows the program's allocation");
        check(current == ctx, "NVML calls leave the current context alone");

        /* what cudaDeviceReset does; NVML still answers afterwards */
        CU(cuCtxSetCurrent(NULL));
        CU(cuDevicePrimaryCtxRelease(dev));
        CU(cuDevicePrimaryCtxReset(dev));
        nvmlMemory_t m;
        nvmlReturn_t after_reset = nvmlDeviceGetMemoryInfo(h, &m);
        printf("device %d: nvmlDeviceGetMemoryInfo after cuDevicePrimaryCtxReset: %s\n", i, after_reset == 0 ? "NVML_SUCCESS" : nvmlErrorString(after_reset));
        check(after_reset == 0, "NVML answers after a primary context reset");
    }
    NVML(nvmlShutdown());
    if (failures) {
        fprintf(stderr, "nvml_cuda: %d check(s) failed\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
