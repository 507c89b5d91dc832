// assert's kernel: check_below asserts v[i] < limit for each element, then copies it to seen[i].
// A failing assert() makes nvcc call the extern __assertfail: the device prints "FILE:LINE:
// FUNCTION: block: [..], thread: [..] Assertion `EXPR` failed." and the launch fails with
// CUDA_ERROR_ASSERT. The #line below names this file "assert.cu" (keeping its line numbers), so the
// message does not depend on the path nvcc was given.
#line 7 "assert.cu"
#include <assert.h>

extern "C" __global__ void check_below(const unsigned int *v, unsigned int limit, unsigned int *seen, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        assert(v[i] < limit);
        seen[i] = v[i];
    }
}
