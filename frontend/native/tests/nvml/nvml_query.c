/*
 * nvml_query: what NCCL, PyTorch and pynvml ask NVML (libnvidia-ml.so.1), asked as they ask it, with
 * checks. It runs against NVIDIA's NVML on a GPU machine and against GPUsockets' on a guest, and
 * prints the same stdout for the same GPU (scripts/gpu-programs compares the two); see
 * frontend/native/tests/README.md, NVML.
 *
 *   nvml_query [--uuid] [--no-total]   the query; ends with PASS, exits 1 on a failed check
 *       --uuid      print each device's UUID itself (the emulated device makes a new one per start,
 *                   so the golden file has only its shape)
 *       --no-total  leave the total memory out of stdout (NVIDIA's NVML counts memory the driver
 *                   sets aside, cuDeviceTotalMem does not: the two differ by design)
 *   nvml_query --init-only           nvmlInit_v2 alone (exit status: its nvmlReturn_t), then
 *                                    nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS)
 *   nvml_query --not-supported       functions GPUsockets' NVML answers NVML_ERROR_NOT_SUPPORTED,
 *                                    each called twice (for our library only)
 *
 * Only facts that NVIDIA's NVML and a remote one give alike go to stdout; lines starting "probe:" on
 * stderr record behaviour nvml.h does not pin down (written bytes, codes for odd inputs), which
 * scripts/gpu-programs shows side by side without failing on them.
 *
 * Built with gcc alone: the declarations below are NVML's ABI as NVIDIA's public nvml.h gives it
 * (API version 13), written out here so that no header or toolkit is needed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned int version, domain, bus, device, pciDeviceId, pciSubSystemId, baseClass, subClass;
    char busId[32];
} nvmlPciInfoExt_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessInfo_v3_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_UNKNOWN 999
#define NVML_INIT_FLAG_NO_GPUS 1u
#define NVML_P2P_CAPS_INDEX_READ 0
#define NVML_P2P_CAPS_INDEX_WRITE 1
#define NVML_P2P_CAPS_INDEX_NVLINK 2
#define NVML_P2P_CAPS_INDEX_ATOMICS 3
#define nvmlMemory_v2 ((unsigned int) (sizeof(nvmlMemory_v2_t) | (2u << 24)))
#define nvmlPciInfoExt_v1 ((unsigned int) (sizeof(nvmlPciInfoExt_t) | (1u << 24)))

nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, void *pci);
nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_t *pci);
nvmlReturn_t nvmlInternalGetExportTable(const void **table, const unsigned char *uuid);
nvmlReturn_t nvmlEventSetCreate(void **set);
nvmlReturn_t nvmlEventSetFree(void *set);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, void *pci);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t d1, nvmlDevice_t d2, int index, int *status);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count, void *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count, void *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_v3_t *infos);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link, int capability, unsigned int *result);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, void *values);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *width);
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *info);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, void *utilization);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp);

static int failures;

static const char *code(nvmlReturn_t r) {
    static char other[32];
    switch (r) {
        case 0: return "NVML_SUCCESS";
        case 1: return "NVML_ERROR_UNINITIALIZED";
        case 2: return "NVML_ERROR_INVALID_ARGUMENT";
        case 3: return "NVML_ERROR_NOT_SUPPORTED";
        case 4: return "NVML_ERROR_NO_PERMISSION";
        case 6: return "NVML_ERROR_NOT_FOUND";
        case 7: return "NVML_ERROR_INSUFFICIENT_SIZE";
        case 9: return "NVML_ERROR_DRIVER_NOT_LOADED";
        case 12: return "NVML_ERROR_LIBRARY_NOT_FOUND";
        case 13: return "NVML_ERROR_FUNCTION_NOT_FOUND";
        case 25: return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
        case 999: return "NVML_ERROR_UNKNOWN";
        default:
            snprintf(other, sizeof other, "nvmlReturn_t %d", r);
            return other;
    }
}

static const char *p2p_status(int s) {
    static const char *names[] = {"OK", "CHIPSET_NOT_SUPPORTED", "GPU_NOT_SUPPORTED", "IOH_TOPOLOGY_NOT_SUPPORTED",
                                  "DISABLED_BY_REGKEY", "NOT_SUPPORTED", "UNKNOWN"};
    return s >= 0 && s < 7 ? names[s] : "?";
}

/* A call that must succeed; exits 1 saying which did not. */
#define MUST(call)                                                                           \
    do {                                                                                     \
        nvmlReturn_t r_ = (call);                                                            \
        if (r_ != NVML_SUCCESS) {                                                            \
            fprintf(stderr, "nvml_query: %s failed: %s (%s)\n", #call, code(r_), nvmlErrorString(r_)); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "nvml_query: check failed: %s\n", what);
        failures++;
    }
}

/* The shape of NVML's UUID text: "GPU-" and lowercase 8-4-4-4-12 hexadecimal. */
static int uuid_well_formed(const char *u) {
    static const char shape[] = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    if (strlen(u) != sizeof shape - 1) {
        return 0;
    }
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        if (shape[i] == 'x' ? !((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f')) : u[i] != shape[i]) {
            return 0;
        }
    }
    return 1;
}

/* ---- --init-only: the error path without a backend ---- */

static int init_only(void) {
    nvmlReturn_t r = nvmlInit_v2();
    printf("nvmlInit_v2: %s\n", code(r));
    if (r == NVML_SUCCESS) {
        nvmlShutdown();
    }
    unsigned int n = 12345;
    nvmlReturn_t f = nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS);
    nvmlReturn_t c = f == NVML_SUCCESS ? nvmlDeviceGetCount_v2(&n) : f;
    printf("nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS): %s", code(f));
    if (f == NVML_SUCCESS) {
        printf(", nvmlDeviceGetCount_v2: %s, devices: %u", code(c), n);
        nvmlShutdown();
    }
    printf("\n");
    return r;
}

/* ---- --not-supported: each twice (the reason goes to stderr once) ---- */

static int not_supported(void) {
    MUST(nvmlInit_v2());
    nvmlDevice_t dev;
    MUST(nvmlDeviceGetHandleByIndex_v2(0, &dev));
    char text[96];
    unsigned char blob[4096];
    unsigned int u;
    int i;
    for (int round = 0; round < 2; round++) {
        printf("nvmlDeviceGetNvLinkState: %s\n", code(nvmlDeviceGetNvLinkState(dev, 0, &i)));
        printf("nvmlDeviceGetNvLinkCapability: %s\n", code(nvmlDeviceGetNvLinkCapability(dev, 0, 0, &u)));
        printf("nvmlDeviceGetFieldValues: %s\n", code(nvmlDeviceGetFieldValues(dev, 1, blob)));
        printf("nvmlDeviceGetCurrPcieLinkWidth: %s\n", code(nvmlDeviceGetCurrPcieLinkWidth(dev, &u)));
        printf("nvmlDeviceGetGpuFabricInfoV: %s\n", code(nvmlDeviceGetGpuFabricInfoV(dev, blob)));
        printf("nvmlDeviceGetUtilizationRates: %s\n", code(nvmlDeviceGetUtilizationRates(dev, blob)));
        printf("nvmlDeviceGetTemperature: %s\n", code(nvmlDeviceGetTemperature(dev, 0, &u)));
        printf("nvmlSystemGetDriverVersion: %s\n", code(nvmlSystemGetDriverVersion(text, sizeof text)));
        printf("nvmlSystemGetNVMLVersion: %s\n", code(nvmlSystemGetNVMLVersion(text, sizeof text)));
        printf("nvmlDeviceGetP2PStatus(NVLINK): %s\n", code(nvmlDeviceGetP2PStatus(dev, dev, NVML_P2P_CAPS_INDEX_NVLINK, &i)));
    }
    MUST(nvmlShutdown());
    printf("PASS\n");
    return 0;
}

/* ---- threads: init, queries and shutdown from 8 threads at once ---- */

#define THREADS 8
#define ROUNDS 20

#define MAX_DEVICES 64

static unsigned int expected_count;
static char expected_uuid[MAX_DEVICES][96];

static void *worker(void *arg) {
    long t = (long) arg;
    long bad = 0;
    for (int round = 0; round < ROUNDS; round++) {
        unsigned int n = 0;
        nvmlDevice_t d, again;
        char uuid[96];
        nvmlMemory_t m;
        if (nvmlInit_v2() != NVML_SUCCESS) {
            bad++;
            continue;
        }
        if (nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS || n != expected_count) {
            bad++;
        } else if (n > 0) {
            unsigned int i = (unsigned int) (t + round) % n;
            if (nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS
                || nvmlDeviceGetUUID(d, uuid, sizeof uuid) != NVML_SUCCESS
                || (i < MAX_DEVICES && strcmp(uuid, expected_uuid[i]) != 0)
                || nvmlDeviceGetHandleByUUID(uuid, &again) != NVML_SUCCESS || again != d
                || nvmlDeviceGetMemoryInfo(d, &m) != NVML_SUCCESS || m.used + m.free != m.total) {
                bad++;
            }
        }
        if (nvmlShutdown() != NVML_SUCCESS) {
            bad++;
        }
    }
    return (void *) bad;
}

/* ---- the query ---- */

int main(int argc, char **argv) {
    int show_uuid = 0, show_total = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--init-only") == 0) {
            return init_only();
        } else if (strcmp(argv[i], "--not-supported") == 0) {
            return not_supported();
        } else if (strcmp(argv[i], "--uuid") == 0) {
            show_uuid = 1;
        } else if (strcmp(argv[i], "--no-total") == 0) {
            show_total = 0;
        } else {
            fprintf(stderr, "usage: nvml_query [--uuid] [--no-total] | --init-only | --not-supported\n");
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* what NCCL (src/misc/nvmlwrap.cc), PyTorch (c10/cuda/driver_api.h, torch/cuda/__init__.py) and
     * pynvml's common calls resolve: NCCL calls some without checking that they were found */
    static const char *const symbols[] = {
        "nvmlInit", "nvmlInit_v2", "nvmlInitWithFlags", "nvmlShutdown", "nvmlErrorString",
        "nvmlDeviceGetCount", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByUUID",
        "nvmlDeviceGetIndex", "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v2",
        "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfoExt", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMinorNumber", "nvmlDeviceGetP2PStatus",
        "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetDriverVersion",
        "nvmlSystemGetNVMLVersion", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemotePciInfo",
        "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetNvLinkCapability",
        "nvmlDeviceGetFieldValues", "nvmlDeviceGetPcieLinkMaxSpeed", "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetPlatformInfo",
        "nvmlSystemGetConfComputeState", "nvmlSystemGetConfComputeSettings", "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo",
    };
    int nsym = (int) (sizeof symbols / sizeof symbols[0]), present = 0;
    for (int i = 0; i < nsym; i++) {
        if (dlsym(RTLD_DEFAULT, symbols[i]) != NULL) {
            present++;
        } else {
            fprintf(stderr, "nvml_query: %s is not exported\n", symbols[i]);
        }
    }
    printf("symbols NCCL, PyTorch and pynvml look up: %d of %d exported\n", present, nsym);
    check(present == nsym, "every symbol exported");

    unsigned int n = 0;
    nvmlDevice_t h = NULL;
    int v = 0;
    printf("before nvmlInit: nvmlDeviceGetCount_v2: %s\n", code(nvmlDeviceGetCount_v2(&n)));
    printf("before nvmlInit: nvmlDeviceGetHandleByIndex_v2: %s\n", code(nvmlDeviceGetHandleByIndex_v2(0, &h)));
    fprintf(stderr, "probe: before nvmlInit: nvmlShutdown: %s\n", code(nvmlShutdown()));
    nvmlReturn_t early = nvmlSystemGetCudaDriverVersion_v2(&v);
    fprintf(stderr, "probe: before nvmlInit: nvmlSystemGetCudaDriverVersion_v2: %s %d\n", code(early), early == NVML_SUCCESS ? v : -1);

    printf("nvmlInit_v2: %s\n", code(nvmlInit_v2()));
    printf("nvmlInit (a second reference): %s\n", code(nvmlInit()));

    int v1 = 0, v2 = 0;
    MUST(nvmlSystemGetCudaDriverVersion(&v1));
    MUST(nvmlSystemGetCudaDriverVersion_v2(&v2));
    printf("CUDA driver version: %d (%d.%d), _v2: %d\n", v1, v1 / 1000, v1 % 1000 / 10, v2);
    char text[96];
    nvmlReturn_t dr = nvmlSystemGetDriverVersion(text, sizeof text);
    fprintf(stderr, "probe: nvmlSystemGetDriverVersion: %s %s\n", code(dr), dr == NVML_SUCCESS ? text : "");
    dr = nvmlSystemGetNVMLVersion(text, sizeof text);
    fprintf(stderr, "probe: nvmlSystemGetNVMLVersion: %s %s\n", code(dr), dr == NVML_SUCCESS ? text : "");

    /* nvidia-smi's first question after nvmlInitWithFlags: without this table it says "Mismatch in
     * versions between nvidia-smi and NVML" and exits 255. The first word is the table's size in bytes. */
    static const unsigned char smi_table_uuid[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                                     0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};
    const void *smi_table = NULL;
    nvmlReturn_t tr = nvmlInternalGetExportTable(&smi_table, smi_table_uuid);
    int sized = tr == NVML_SUCCESS && smi_table != NULL && *(const size_t *) smi_table >= sizeof(size_t);
    printf("nvidia-smi's export table: %s, its size word covers itself: %s\n", code(tr), sized ? "yes" : "no");
    check(tr == NVML_SUCCESS && sized, "nvmlInternalGetExportTable gives nvidia-smi's table, size word first");
    /* nvidia-smi's default table stops with "Internal NVML error" without an event set */
    void *events = NULL;
    nvmlReturn_t er = nvmlEventSetCreate(&events);
    nvmlReturn_t fr = er == NVML_SUCCESS ? nvmlEventSetFree(events) : er;
    printf("event set: create %s, free %s\n", code(er), code(fr));
    check(er == NVML_SUCCESS && fr == NVML_SUCCESS, "an event set can be made and freed");

    MUST(nvmlDeviceGetCount_v2(&n));
    printf("devices: %u\n", n);
    nvmlDevice_t *handles = calloc(n ? n : 1, sizeof *handles);
    nvmlPciInfo_t *pcis = calloc(n ? n : 1, sizeof *pcis);
    for (unsigned int i = 0; i < n; i++) {
        nvmlDevice_t d;
        MUST(nvmlDeviceGetHandleByIndex_v2(i, &d));
        handles[i] = d;
        unsigned int index = 99;
        MUST(nvmlDeviceGetIndex(d, &index));
        check(index == i, "nvmlDeviceGetIndex gives the index the handle came from");

        char name[96];
        MUST(nvmlDeviceGetName(d, name, sizeof name));
        printf("device %u: name \"%s\"\n", i, name);

        char uuid[96];
        MUST(nvmlDeviceGetUUID(d, uuid, sizeof uuid));
        if (i < MAX_DEVICES) {
            snprintf(expected_uuid[i], sizeof expected_uuid[0], "%s", uuid);
        }
        check(uuid_well_formed(uuid), "UUID is GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in lowercase hex");
        if (show_uuid) {
            printf("device %u: uuid %s\n", i, uuid);
        } else {
            printf("device %u: uuid %s\n", i, uuid_well_formed(uuid) ? "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (well formed)" : uuid);
            fprintf(stderr, "nvml_query: device %u uuid %s\n", i, uuid);
        }

        nvmlPciInfo_t pci;
        memset(&pci, 0xA5, sizeof pci);
        MUST(nvmlDeviceGetPciInfo_v3(d, &pci));
        pcis[i] = pci;
        printf("device %u: pci busId %s, busIdLegacy %s, domain 0x%x bus 0x%x device 0x%x, vendor 0x%04x\n", i, pci.busId,
               pci.busIdLegacy, pci.domain, pci.bus, pci.device, pci.pciDeviceId & 0xffff);
        nvmlPciInfoExt_t ext;
        memset(&ext, 0xA5, sizeof ext);
        ext.version = nvmlPciInfoExt_v1;
        MUST(nvmlDeviceGetPciInfoExt(d, &ext));
        int ext_same = ext.domain == pci.domain && ext.bus == pci.bus && ext.device == pci.device
                       && strcmp(ext.busId, pci.busId) == 0;
        printf("device %u: nvmlDeviceGetPciInfoExt gives _v3's domain, bus, device and busId: %s\n", i, ext_same ? "yes" : "no");
        check(ext_same, "nvmlDeviceGetPciInfoExt (nvidia-smi's pci.bus_id) agrees with nvmlDeviceGetPciInfo_v3");
        ext.version = nvmlPciInfoExt_v1 + 1;
        fprintf(stderr, "probe: device %u: nvmlDeviceGetPciInfoExt with version 2: %s\n", i, code(nvmlDeviceGetPciInfoExt(d, &ext)));
        unsigned int mig = 2;
        nvmlReturn_t migr = nvmlDeviceIsMigDeviceHandle(d, &mig);
        printf("device %u: nvmlDeviceIsMigDeviceHandle: %s %u\n", i, code(migr), mig);
        check(migr == NVML_SUCCESS && mig == 0, "a device handle is not a MIG device's");
        char want[32];
        snprintf(want, sizeof want, "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
        check(strcmp(want, pci.busId) == 0, "busId is %08X:%02X:%02X.0 of domain, bus, device");
        snprintf(want, sizeof want, "%04X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
        check(strcmp(want, pci.busIdLegacy) == 0, "busIdLegacy is %04X:%02X:%02X.0 of domain, bus, device");
        /* the pre-v3 entry points, into a v3-sized buffer: the fields both layouts share */
        for (int variant = 1; variant <= 2; variant++) {
            unsigned char raw[sizeof(nvmlPciInfo_t) + 16];
            memset(raw, 0xA5, sizeof raw);
            MUST(variant == 1 ? nvmlDeviceGetPciInfo(d, raw) : nvmlDeviceGetPciInfo_v2(d, raw));
            nvmlPciInfo_t *old = (nvmlPciInfo_t *) raw;
            check(old->domain == pci.domain && old->bus == pci.bus && old->device == pci.device,
                  "nvmlDeviceGetPciInfo(_v2) gives the domain, bus and device of _v3");
            int written = 0;
            for (size_t b = sizeof raw; b > 0; b--) {
                if (raw[b - 1] != 0xA5) {
                    written = (int) b;
                    break;
                }
            }
            fprintf(stderr, "probe: device %u: nvmlDeviceGetPciInfo%s: busId \"%.15s\", wrote up to byte %d\n", i,
                    variant == 1 ? "" : "_v2", old->busIdLegacy, written);
        }

        int major = -1, minor = -1;
        MUST(nvmlDeviceGetCudaComputeCapability(d, &major, &minor));
        printf("device %u: compute capability %d.%d\n", i, major, minor);

        nvmlMemory_t m;
        MUST(nvmlDeviceGetMemoryInfo(d, &m));
        if (show_total) {
            printf("device %u: total memory %llu MiB\n", i, m.total >> 20);
        }
        fprintf(stderr, "nvml_query: device %u memory total %llu free %llu used %llu\n", i, m.total, m.free, m.used);
        check(m.used + m.free == m.total && m.total > 0, "memory: used + free == total > 0");
        nvmlMemory_v2_t m2;
        memset(&m2, 0, sizeof m2);
        m2.version = nvmlMemory_v2;
        MUST(nvmlDeviceGetMemoryInfo_v2(d, &m2));
        check(m2.total == m.total, "nvmlDeviceGetMemoryInfo_v2's total is nvmlDeviceGetMemoryInfo's");
        printf("device %u: memory: used + free == total: %s; _v2 total == total: %s\n", i,
               m.used + m.free == m.total ? "yes" : "no", m2.total == m.total ? "yes" : "no");
        fprintf(stderr, "probe: device %u: memory_v2 reserved + used + free == total: %s, used + free == total: %s\n", i,
                m2.reserved + m2.used + m2.free == m2.total ? "yes" : "no", m2.used + m2.free == m2.total ? "yes" : "no");
        m2.version = 1;
        fprintf(stderr, "probe: device %u: nvmlDeviceGetMemoryInfo_v2 with version 1: %s\n", i,
                code(nvmlDeviceGetMemoryInfo_v2(d, &m2)));

        /* lookups back to this handle: by UUID, by the bus id forms NCCL, PyTorch and nvml.h use */
        nvmlDevice_t back = NULL;
        MUST(nvmlDeviceGetHandleByUUID(uuid, &back));
        check(back == d, "nvmlDeviceGetHandleByUUID gives the same handle");
        char lower[32];
        snprintf(lower, sizeof lower, "%04x:%02x:%02x.0", pci.domain, pci.bus, pci.device);
        char shortform[32];
        snprintf(shortform, sizeof shortform, "%02x:%02x.0", pci.bus, pci.device);
        const char *forms[] = {pci.busId, pci.busIdLegacy, lower, pci.domain == 0 ? shortform : pci.busId};
        int found = 0;
        for (int f = 0; f < 4; f++) {
            back = NULL;
            nvmlReturn_t r = nvmlDeviceGetHandleByPciBusId_v2(forms[f], &back);
            /* a bus id two devices share (devices of two backends) finds the first of them */
            nvmlDevice_t first = d;
            for (unsigned int j = 0; j < i; j++) {
                if (pcis[j].domain == pci.domain && pcis[j].bus == pci.bus && pcis[j].device == pci.device) {
                    first = handles[j];
                    break;
                }
            }
            found += r == NVML_SUCCESS && back == first;
            if (r != NVML_SUCCESS || back != first) {
                fprintf(stderr, "nvml_query: nvmlDeviceGetHandleByPciBusId_v2(\"%s\"): %s\n", forms[f], code(r));
            }
        }
        printf("device %u: found by UUID and by bus id %s, %s, %s and %s: %s\n", i, pci.busId, pci.busIdLegacy, lower,
               pci.domain == 0 ? shortform : "(no short form off domain 0)", found == 4 ? "yes" : "no");
        check(found == 4, "nvmlDeviceGetHandleByPciBusId_v2 finds the device by each form");

        unsigned int minor_number = 0;
        nvmlReturn_t mr = nvmlDeviceGetMinorNumber(d, &minor_number);
        fprintf(stderr, "probe: device %u: nvmlDeviceGetMinorNumber: %s %u\n", i, code(mr), minor_number);

        /* room for every process a GPU host may show (the backend's among them, natively) */
        static nvmlProcessInfo_v3_t procs[256];
        unsigned int np3 = 256, np1 = 256, np2 = 256;
        nvmlReturn_t p3 = nvmlDeviceGetComputeRunningProcesses_v3(d, &np3, procs);
        nvmlReturn_t p1 = nvmlDeviceGetComputeRunningProcesses(d, &np1, procs);
        nvmlReturn_t p2 = nvmlDeviceGetComputeRunningProcesses_v2(d, &np2, procs);
        printf("device %u: compute processes (_v3, unsuffixed, _v2): %s, %s, %s\n", i, code(p3), code(p1), code(p2));
        fprintf(stderr, "nvml_query: device %u: compute processes %u %u %u\n", i, np3, np1, np2);
        unsigned int zero = 0;
        fprintf(stderr, "probe: device %u: compute processes with no array: %s\n", i,
                code(nvmlDeviceGetComputeRunningProcesses_v3(d, &zero, NULL)));
    }

    /* peer access between different devices (a device with itself: a probe) */
    for (unsigned int a = 0; a < n; a++) {
        for (unsigned int b = 0; b < n; b++) {
            int rd = -1, wr = -1, at = -1;
            nvmlReturn_t r1 = nvmlDeviceGetP2PStatus(handles[a], handles[b], NVML_P2P_CAPS_INDEX_READ, &rd);
            nvmlReturn_t r2 = nvmlDeviceGetP2PStatus(handles[a], handles[b], NVML_P2P_CAPS_INDEX_WRITE, &wr);
            nvmlReturn_t r3 = nvmlDeviceGetP2PStatus(handles[a], handles[b], NVML_P2P_CAPS_INDEX_ATOMICS, &at);
            if (a == b) {
                fprintf(stderr, "probe: p2p %u,%u: read %s %s, write %s %s, atomics %s %s\n", a, b, code(r1), p2p_status(rd),
                        code(r2), p2p_status(wr), code(r3), p2p_status(at));
            } else {
                printf("p2p %u,%u: read %s %s, write %s %s\n", a, b, code(r1), r1 == 0 ? p2p_status(rd) : "-", code(r2),
                       r2 == 0 ? p2p_status(wr) : "-");
                fprintf(stderr, "probe: p2p %u,%u: atomics %s %s\n", a, b, code(r3), p2p_status(at));
            }
        }
    }

    /* what nvml.h documents for bad inputs */
    printf("bad inputs:\n");
    nvmlDevice_t d0 = n > 0 ? handles[0] : NULL;
    char small[96];
    nvmlMemory_t m;
    int major;
    printf("  nvmlDeviceGetCount_v2(NULL): %s\n", code(nvmlDeviceGetCount_v2(NULL)));
    printf("  nvmlDeviceGetHandleByIndex_v2(count): %s\n", code(nvmlDeviceGetHandleByIndex_v2(n, &h)));
    printf("  nvmlDeviceGetHandleByIndex_v2(0xffffffff): %s\n", code(nvmlDeviceGetHandleByIndex_v2(0xffffffffu, &h)));
    printf("  nvmlDeviceGetHandleByIndex_v2(0, NULL): %s\n", code(nvmlDeviceGetHandleByIndex_v2(0, NULL)));
    printf("  nvmlDeviceGetHandleByUUID(GPU-00000000-0000-0000-0000-000000000000): %s\n",
           code(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &h)));
    fprintf(stderr, "probe: nvmlDeviceGetHandleByUUID(\"no-uuid\"): %s\n", code(nvmlDeviceGetHandleByUUID("no-uuid", &h)));
    printf("  nvmlDeviceGetHandleByPciBusId_v2(00000000:FF:1F.0): %s\n",
           code(nvmlDeviceGetHandleByPciBusId_v2("00000000:FF:1F.0", &h)));
    fprintf(stderr, "probe: nvmlDeviceGetHandleByPciBusId_v2(\"x\"): %s\n", code(nvmlDeviceGetHandleByPciBusId_v2("x", &h)));
    printf("  nvmlDeviceGetName(NULL handle): %s\n", code(nvmlDeviceGetName(NULL, small, sizeof small)));
    if (d0 != NULL) {
        printf("  nvmlDeviceGetName(length 1): %s\n", code(nvmlDeviceGetName(d0, small, 1)));
        printf("  nvmlDeviceGetName(NULL buffer): %s\n", code(nvmlDeviceGetName(d0, NULL, sizeof small)));
        printf("  nvmlDeviceGetUUID(length 10): %s\n", code(nvmlDeviceGetUUID(d0, small, 10)));
        fprintf(stderr, "probe: nvmlDeviceGetUUID(length 41): %s\n", code(nvmlDeviceGetUUID(d0, small, 41)));
        printf("  nvmlDeviceGetMemoryInfo(NULL): %s\n", code(nvmlDeviceGetMemoryInfo(d0, NULL)));
        printf("  nvmlDeviceGetCudaComputeCapability(major NULL): %s\n",
               code(nvmlDeviceGetCudaComputeCapability(d0, NULL, &major)));
        printf("  nvmlDeviceGetPciInfo_v3(NULL): %s\n", code(nvmlDeviceGetPciInfo_v3(d0, NULL)));
    }
    printf("  nvmlDeviceGetMemoryInfo(NULL handle): %s\n", code(nvmlDeviceGetMemoryInfo(NULL, &m)));

    static const nvmlReturn_t codes[] = {0, 1, 2, 3, 6, 7, 9, 999};
    for (size_t c = 0; c < sizeof codes / sizeof codes[0]; c++) {
        printf("nvmlErrorString(%d): %s\n", codes[c], nvmlErrorString(codes[c]));
    }

    /* init, queries and shutdown from several threads while this thread holds a reference */
    expected_count = n;
    pthread_t threads[THREADS];
    for (long t = 0; t < THREADS; t++) {
        pthread_create(&threads[t], NULL, worker, (void *) t);
    }
    long bad = 0;
    for (int t = 0; t < THREADS; t++) {
        void *b;
        pthread_join(threads[t], &b);
        bad += (long) b;
    }
    printf("threads: %d x %d rounds of init, queries and shutdown: %s\n", THREADS, ROUNDS, bad == 0 ? "consistent" : "INCONSISTENT");
    check(bad == 0, "every thread saw the same devices, UUIDs, handles and memory relations");

    printf("nvmlShutdown: %s\n", code(nvmlShutdown()));
    printf("nvmlShutdown (the second reference): %s\n", code(nvmlShutdown()));
    printf("after nvmlShutdown: nvmlDeviceGetCount_v2: %s\n", code(nvmlDeviceGetCount_v2(&n)));
    unsigned int again = 0;
    nvmlReturn_t ri = nvmlInit_v2();
    nvmlReturn_t rc = nvmlDeviceGetCount_v2(&again);
    printf("nvmlInit_v2 again: %s, devices: %u\n", code(ri), again);
    check(ri == NVML_SUCCESS && rc == NVML_SUCCESS, "NVML initialises again after a shutdown");
    if (ri == NVML_SUCCESS) {
        nvmlShutdown();
    }
    free(handles);
    free(pcis);
    if (failures) {
        fprintf(stderr, "nvml_query: %d check(s) failed\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
