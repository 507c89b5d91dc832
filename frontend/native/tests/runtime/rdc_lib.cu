// The other half of rdc.cu: device code defined in a separate translation unit.
__device__ int lookup_table[16] = {0, 1, 4, 9, 16, 25, 36, 49, 64, 81, 100, 121, 144, 169, 196, 225};

__device__ __noinline__ int polynomial(int x) {
    return x * x * 3 - 7 * x + 11;
}

__device__ __noinline__ int next_collatz(int x) {
    return x % 2 ? 3 * x + 1 : x / 2;
}
