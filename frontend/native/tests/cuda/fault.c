/*
 * fault: a kernel that stores out of bounds (to address 16, in the first page, which no allocation
 * holds: store_far of fault.cu). The launch itself may succeed; the next synchronizing call must return
 * CUDA_ERROR_ILLEGAL_ADDRESS, as on a GPU, and the error is sticky: the following
 * cuCtxSynchronize returns it again. A well-behaved kernel (fill_one) runs and is checked first.
 * The program prints what it got and exits 0 without using the broken context any more.
 * usage: fault FAULT.fatbin
 */
#include "../common.h"

int main(int argc, char **argv) {
    usage_if(argc != 2, "fault FAULT.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod;
    CHECK(cuModuleLoad(&mod, argv[1]));
    CUfunction fill_one = get_function(mod, "fill_one");
    CUfunction store_far = get_function(mod, "store_far");

    const unsigned int n = 1024;
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, sizeof(unsigned int) * n));
    unsigned int count = n;
    void *p1[] = {&p, &count};
    CHECK(cuLaunchKernel(fill_one, n / 256, 1, 1, 256, 1, 1, 0, NULL, p1, NULL));
    unsigned int host[1024];
    CHECK(cuMemcpyDtoH(host, p, sizeof host));
    for (unsigned int i = 0; i < n; i++) {
        if (host[i] != 1) {
            fail("fill_one: p[%u] = %u, expected 1", i, host[i]);
        }
    }
    printf("fill_one n=%u ok\n", n);

    CUdeviceptr null_page = 0;
    unsigned long long offset = 4; /* address 16: the first page, which no allocation holds */
    void *p2[] = {&null_page, &offset};
    CUresult launch = cuLaunchKernel(store_far, 1, 1, 1, 32, 1, 1, 0, NULL, p2, NULL);
    CUresult sync = launch == CUDA_SUCCESS ? cuCtxSynchronize() : launch;
    fprintf(stderr, "store_far: launch %s, then cuCtxSynchronize %s\n", err_name(launch), err_name(sync));
    expect_result(sync, CUDA_ERROR_ILLEGAL_ADDRESS, "the out-of-bounds store (launch, then cuCtxSynchronize)",
                  __FILE__, __LINE__);
    printf("out-of-bounds store, next synchronizing call: %s\n", err_name(sync));
    EXPECT("cuCtxSynchronize again (sticky)", cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    fprintf(stderr, "fault: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
