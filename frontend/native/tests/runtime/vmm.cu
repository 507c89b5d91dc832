// The VMM API from a runtime-API program, the way frameworks reach it: the driver entry points come
// from cudaGetDriverEntryPointByVersion (cuGetProcAddress underneath), then cuMemCreate,
// cuMemAddressReserve, cuMemMap and cuMemSetAccess build a range that kernels and cudaMemcpy use;
// unmap, release and free give it back. Results checked against the CPU.
#include "common.cuh"
#include <cuda.h>

typedef CUresult (*granularity_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*free_fn)(CUdeviceptr, size_t);

static void *entry(const char *name) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || fn == NULL) {
        FAIL("%s: not found", name);
    }
    return fn;
}

#define CU(call)                                                        \
    do {                                                                \
        CUresult r_ = (call);                                           \
        if (r_ != CUDA_SUCCESS) {                                       \
            FAIL("%s:%d: %s failed: %d", __FILE__, __LINE__, #call, r_); \
        }                                                               \
    } while (0)

__global__ void fill(unsigned int *p, size_t n, unsigned int v) {
    size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = v ^ (unsigned int) i;
    }
}

int main() {
    CK(cudaFree(0));
    int vmm = 0;
    CK(cudaDeviceGetAttribute(&vmm, (cudaDeviceAttr) CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    printf("virtual memory management: %d\n", vmm);
    granularity_fn granularity = (granularity_fn) entry("cuMemGetAllocationGranularity");
    create_fn create = (create_fn) entry("cuMemCreate");
    reserve_fn reserve = (reserve_fn) entry("cuMemAddressReserve");
    map_fn map = (map_fn) entry("cuMemMap");
    access_fn access = (access_fn) entry("cuMemSetAccess");
    unmap_fn unmap = (unmap_fn) entry("cuMemUnmap");
    release_fn release = (release_fn) entry("cuMemRelease");
    free_fn addressFree = (free_fn) entry("cuMemAddressFree");

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CU(granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    printf("granularity is a power of two: %d\n", gran > 0 && (gran & (gran - 1)) == 0);
    size_t size = 2 * gran;
    CUmemGenericAllocationHandle h1, h2;
    CU(create(&h1, gran, &prop, 0));
    CU(create(&h2, gran, &prop, 0));
    CUdeviceptr base = 0;
    CU(reserve(&base, size, 0, 0, 0));
    CU(map(base, gran, 0, h1, 0));
    CU(map(base + gran, gran, 0, h2, 0));
    CUmemAccessDesc desc;
    desc.location = prop.location;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(access(base, size, &desc, 1));
    // both halves, one kernel per half, and copies that stay within a mapping
    size_t n = gran / sizeof(unsigned int);
    unsigned int *p0 = (unsigned int *) base, *p1 = (unsigned int *) (base + gran);
    fill<<<(unsigned int) ((n + 255) / 256), 256>>>(p0, n, 0x1234u);
    fill<<<(unsigned int) ((n + 255) / 256), 256>>>(p1, n, 0xabcdu);
    CK(cudaGetLastError());
    unsigned int *h = (unsigned int *) malloc(gran);
    int ok = 1;
    CK(cudaMemcpy(h, p0, gran, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        ok &= h[i] == (0x1234u ^ (unsigned int) i);
    }
    CK(cudaMemcpy(h, p1, gran, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        ok &= h[i] == (0xabcdu ^ (unsigned int) i);
    }
    printf("two mappings written by kernels and read back: %d\n", ok);
    CK(cudaMemcpy(p0, p1, 4096, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(h, p0, 4096, cudaMemcpyDeviceToHost));
    printf("device copy between the mappings: %d, checksum %016llx\n", h[5] == (0xabcdu ^ 5u),
           (unsigned long long) fnv1a(h, 4096));
    CU(unmap(base, size));
    CU(release(h1));
    CU(release(h2));
    CU(addressFree(base, size));
    free(h);
    printf("PASS\n");
    return 0;
}
