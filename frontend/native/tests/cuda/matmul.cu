// matmul's kernel: C = A * B for n x n row-major matrices (n a multiple of TILE), one TILE x TILE
// block per TILE x TILE tile of C, the tiles of A and B staged through shared memory.
#define TILE 16

extern "C" __global__ void matmul_tiled(const float *a, const float *b, float *c, int n) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        as[ty][tx] = a[row * n + t + tx];
        bs[ty][tx] = b[(t + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++) {
            sum += as[ty][k] * bs[k][tx];
        }
        __syncthreads();
    }
    c[row * n + col] = sum;
}
