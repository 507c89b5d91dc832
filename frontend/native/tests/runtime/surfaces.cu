// Surface objects as image-processing and simulation programs use them: surf1D/2D/3D and 2D layered
// reads and writes of int, float and uchar4 elements, a kernel writing what another reads, the zero and
// clamp boundary modes at the edges; every result compared with what the CPU computes.
#include "common.cuh"

__global__ void fill2D(cudaSurfaceObject_t s, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) surf2Dwrite(x * 0.5f + y * 100.0f, s, x * (int) sizeof(float), y);
}

// out[y][x] = 4-neighbour sum read with the zero boundary (outside reads 0)
__global__ void stencil2D(cudaSurfaceObject_t s, float *out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float sum = 0;
    sum += surf2Dread<float>(s, (x - 1) * (int) sizeof(float), y, cudaBoundaryModeZero);
    sum += surf2Dread<float>(s, (x + 1) * (int) sizeof(float), y, cudaBoundaryModeZero);
    sum += surf2Dread<float>(s, x * (int) sizeof(float), y - 1, cudaBoundaryModeZero);
    sum += surf2Dread<float>(s, x * (int) sizeof(float), y + 1, cudaBoundaryModeZero);
    out[y * w + x] = sum;
}

// out[y][x] = the element at (x + 3, y - 2) with the clamp boundary
__global__ void clamped2D(cudaSurfaceObject_t s, float *out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) out[y * w + x] = surf2Dread<float>(s, (x + 3) * (int) sizeof(float), y - 2, cudaBoundaryModeClamp);
}

__global__ void scale3D(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w, int h, int d) {
    int x = threadIdx.x, y = threadIdx.y, z = blockIdx.x;
    if (x < w && y < h && z < d) {
        int v = surf3Dread<int>(in, x * (int) sizeof(int), y, z);
        surf3Dwrite(v * 3 - z, out, x * (int) sizeof(int), y, z);
    }
}

__global__ void layers2D(cudaSurfaceObject_t s, int w, int h) {
    int x = threadIdx.x, y = threadIdx.y, layer = blockIdx.x;
    if (x < w && y < h) {
        float v = surf2DLayeredread<float>(s, x * (int) sizeof(float), y, layer);
        surf2DLayeredwrite(v + layer * 1000.0f, s, x * (int) sizeof(float), y, layer);
    }
}

__global__ void invert1D(cudaSurfaceObject_t s, int n) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x < n) {
        uchar4 p = surf1Dread<uchar4>(s, x * (int) sizeof(uchar4));
        surf1Dwrite(make_uchar4(255 - p.x, 255 - p.y, 255 - p.z, p.w), s, x * (int) sizeof(uchar4));
    }
}

static cudaSurfaceObject_t surface_of(cudaArray_t a) {
    cudaResourceDesc r;
    memset(&r, 0, sizeof r);
    r.resType = cudaResourceTypeArray;
    r.res.array.array = a;
    cudaSurfaceObject_t s;
    CK(cudaCreateSurfaceObject(&s, &r));
    cudaResourceDesc back;
    CK(cudaGetSurfaceObjectResourceDesc(&back, s));
    if (back.resType != cudaResourceTypeArray || back.res.array.array != a) FAIL("the surface's resource reads back otherwise");
    return s;
}

int main() {
    // 2D float 40 x 24: written by one kernel, read by two others (zero and clamp boundaries)
    const int W = 40, H = 24;
    cudaChannelFormatDesc f1 = cudaCreateChannelDesc<float>();
    cudaArray_t a;
    CK(cudaMallocArray(&a, &f1, W, H, cudaArraySurfaceLoadStore));
    cudaSurfaceObject_t s = surface_of(a);
    dim3 block(16, 8), grid((W + 15) / 16, (H + 7) / 8);
    fill2D<<<grid, block>>>(s, W, H);
    CK(cudaGetLastError());
    static float img[H][W], got[H][W];
    CK(cudaMemcpy2DFromArray(img, W * sizeof(float), a, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            if (img[y][x] != x * 0.5f + y * 100.0f) FAIL("surf2Dwrite: (%d, %d) is %g", x, y, img[y][x]);
    printf("surf2Dwrite: %dx%d floats as the CPU computes them\n", W, H);
    float *d_out;
    CK(cudaMalloc(&d_out, sizeof got));
    stencil2D<<<grid, block>>>(s, d_out, W, H);
    CK(cudaGetLastError());
    CK(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            float want = 0;
            want += x > 0 ? img[y][x - 1] : 0;
            want += x < W - 1 ? img[y][x + 1] : 0;
            want += y > 0 ? img[y - 1][x] : 0;
            want += y < H - 1 ? img[y + 1][x] : 0;
            if (got[y][x] != want) FAIL("stencil (zero boundary): (%d, %d) is %g, expected %g", x, y, got[y][x], want);
        }
    printf("surf2Dread zero boundary: stencil of %d points as the CPU computes it, fnv %016llx\n", W * H,
           (unsigned long long) fnv1a(got, sizeof got));
    clamped2D<<<grid, block>>>(s, d_out, W, H);
    CK(cudaGetLastError());
    CK(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int cx = x + 3 < W ? x + 3 : W - 1, cy = y - 2 >= 0 ? y - 2 : 0;
            if (got[y][x] != img[cy][cx]) FAIL("clamp boundary: (%d, %d) is %g, expected %g", x, y, got[y][x], img[cy][cx]);
        }
    printf("surf2Dread clamp boundary: %d points as the CPU clamps them\n", W * H);
    CK(cudaDestroySurfaceObject(s));
    CK(cudaFreeArray(a));

    // 3D int 8 x 4 x 5: in -> out through two surfaces
    {
        const int X = 8, Y = 4, Z = 5;
        int v[Z][Y][X], back[Z][Y][X];
        uint64_t seed = 5;
        for (int z = 0; z < Z; z++)
            for (int y = 0; y < Y; y++)
                for (int x = 0; x < X; x++) v[z][y][x] = (int) (splitmix64(&seed) % 20000) - 10000;
        cudaChannelFormatDesc i1 = cudaCreateChannelDesc<int>();
        cudaArray_t in, out;
        CK(cudaMalloc3DArray(&in, &i1, make_cudaExtent(X, Y, Z), cudaArraySurfaceLoadStore));
        CK(cudaMalloc3DArray(&out, &i1, make_cudaExtent(X, Y, Z), cudaArraySurfaceLoadStore));
        cudaMemcpy3DParms p = {0};
        p.srcPtr = make_cudaPitchedPtr(v, X * sizeof(int), X, Y);
        p.dstArray = in;
        p.extent = make_cudaExtent(X, Y, Z);
        p.kind = cudaMemcpyHostToDevice;
        CK(cudaMemcpy3D(&p));
        cudaSurfaceObject_t si = surface_of(in), so = surface_of(out);
        scale3D<<<Z, dim3(X, Y)>>>(si, so, X, Y, Z);
        CK(cudaGetLastError());
        cudaMemcpy3DParms q = {0};
        q.srcArray = out;
        q.dstPtr = make_cudaPitchedPtr(back, X * sizeof(int), X, Y);
        q.extent = make_cudaExtent(X, Y, Z);
        q.kind = cudaMemcpyDeviceToHost;
        CK(cudaMemcpy3D(&q));
        for (int z = 0; z < Z; z++)
            for (int y = 0; y < Y; y++)
                for (int x = 0; x < X; x++)
                    if (back[z][y][x] != v[z][y][x] * 3 - z) FAIL("surf3D: (%d, %d, %d) is %d", x, y, z, back[z][y][x]);
        printf("surf3Dread/write: %d ints as the CPU computes them, fnv %016llx\n", X * Y * Z, (unsigned long long) fnv1a(back, sizeof back));
        CK(cudaDestroySurfaceObject(si));
        CK(cudaDestroySurfaceObject(so));
        CK(cudaFreeArray(in));
        CK(cudaFreeArray(out));
    }

    // 2D layered float 16 x 8 x 3, updated in place
    {
        const int X = 16, Y = 8, L = 3;
        float v[L][Y][X], back[L][Y][X];
        for (int l = 0; l < L; l++)
            for (int y = 0; y < Y; y++)
                for (int x = 0; x < X; x++) v[l][y][x] = x + y * 0.125f;
        cudaArray_t la;
        CK(cudaMalloc3DArray(&la, &f1, make_cudaExtent(X, Y, L), cudaArrayLayered | cudaArraySurfaceLoadStore));
        cudaMemcpy3DParms p = {0};
        p.srcPtr = make_cudaPitchedPtr(v, X * sizeof(float), X, Y);
        p.dstArray = la;
        p.extent = make_cudaExtent(X, Y, L);
        p.kind = cudaMemcpyHostToDevice;
        CK(cudaMemcpy3D(&p));
        cudaSurfaceObject_t sl = surface_of(la);
        layers2D<<<L, dim3(X, Y)>>>(sl, X, Y);
        CK(cudaGetLastError());
        cudaMemcpy3DParms q = {0};
        q.srcArray = la;
        q.dstPtr = make_cudaPitchedPtr(back, X * sizeof(float), X, Y);
        q.extent = make_cudaExtent(X, Y, L);
        q.kind = cudaMemcpyDeviceToHost;
        CK(cudaMemcpy3D(&q));
        for (int l = 0; l < L; l++)
            for (int y = 0; y < Y; y++)
                for (int x = 0; x < X; x++)
                    if (back[l][y][x] != v[l][y][x] + l * 1000.0f) FAIL("surf2DLayered: (%d, %d, %d) is %g", x, y, l, back[l][y][x]);
        printf("surf2DLayeredread/write: %d floats in %d layers as the CPU computes them\n", X * Y * L, L);
        CK(cudaDestroySurfaceObject(sl));
        CK(cudaFreeArray(la));
    }

    // 1D uchar4 of 300, inverted in place
    {
        const int n = 300;
        uchar4 px[n], back[n];
        uint64_t seed = 9;
        for (int i = 0; i < n; i++) {
            uint64_t r = splitmix64(&seed);
            px[i] = make_uchar4(r, r >> 8, r >> 16, r >> 24);
        }
        cudaChannelFormatDesc c4 = cudaCreateChannelDesc<uchar4>();
        cudaArray_t la;
        CK(cudaMallocArray(&la, &c4, n, 0, cudaArraySurfaceLoadStore));
        CK(cudaMemcpy2DToArray(la, 0, 0, px, sizeof px, sizeof px, 1, cudaMemcpyHostToDevice));
        cudaSurfaceObject_t s1 = surface_of(la);
        invert1D<<<(n + 127) / 128, 128>>>(s1, n);
        CK(cudaGetLastError());
        CK(cudaMemcpy2DFromArray(back, sizeof back, la, 0, 0, sizeof back, 1, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            if (back[i].x != 255 - px[i].x || back[i].y != 255 - px[i].y || back[i].z != 255 - px[i].z || back[i].w != px[i].w)
                FAIL("surf1D: pixel %d", i);
        printf("surf1Dread/write: %d uchar4 pixels inverted as the CPU inverts them\n", n);
        CK(cudaDestroySurfaceObject(s1));
        CK(cudaFreeArray(la));
    }

    // the driver makes a surface on an array made without cudaArraySurfaceLoadStore too (an H100, 580.159.04)
    {
        cudaArray_t plain;
        CK(cudaMallocArray(&plain, &f1, 8, 8));
        cudaResourceDesc r;
        memset(&r, 0, sizeof r);
        r.resType = cudaResourceTypeArray;
        r.res.array.array = plain;
        cudaSurfaceObject_t none;
        EXPECT("a surface on an array without cudaArraySurfaceLoadStore", cudaCreateSurfaceObject(&none, &r), cudaSuccess);
        CK(cudaDestroySurfaceObject(none));
        CK(cudaFreeArray(plain));
    }
    CK(cudaFree(d_out));
    printf("PASS\n");
    return 0;
}
