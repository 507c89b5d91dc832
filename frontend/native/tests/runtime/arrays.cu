// CUDA arrays through the runtime API, as texture and surface programs make and fill them: cudart 13
// makes every array (cudaMallocArray too) with cuArray3DCreate and copies with cuMemcpy2D/3D. Every
// shape (1D, 2D, 3D, 1D/2D layered, cubemap, cubemap layered, surface load/store), its description
// (cudaArrayGetInfo), 2D and 3D copies host <-> array <-> device and array <-> array, one layer and one
// cubemap face reached by a 3D copy's z; each result compared with what the CPU wrote.
#include "common.cuh"

static void fill(void *p, size_t n, uint64_t seed) {
    unsigned char *b = (unsigned char *) p;
    for (size_t i = 0; i < n; i++) {
        b[i] = (unsigned char) splitmix64(&seed);
    }
}

static void same(const void *a, const void *b, size_t n, const char *what) {
    if (memcmp(a, b, n) != 0) {
        const unsigned char *x = (const unsigned char *) a, *y = (const unsigned char *) b;
        size_t i = 0;
        while (x[i] == y[i]) {
            i++;
        }
        FAIL("%s: byte %zu differs (%u, expected %u)", what, i, x[i], y[i]);
    }
}

static void describe(const char *name, cudaArray_t a) {
    cudaChannelFormatDesc d;
    cudaExtent e;
    unsigned int flags = 0;
    CK(cudaArrayGetInfo(&d, &e, &flags, a));
    printf("%s: channels %d/%d/%d/%d kind %d extent %zux%zux%zu flags %u\n", name, d.x, d.y, d.z, d.w, (int) d.f,
           e.width, e.height, e.depth, flags);
}

// host (w x h x d elements of `size` bytes, packed) -> array -> device (pitched) -> host, compared
static void round_trip_3d(const char *name, cudaArray_t a, size_t size, size_t w, size_t h, size_t d) {
    size_t bytes = size * w * h * d;
    unsigned char *in = (unsigned char *) malloc(bytes), *out = (unsigned char *) malloc(bytes);
    fill(in, bytes, w * 131 + h * 17 + d);
    cudaMemcpy3DParms p = {0};
    p.srcPtr = make_cudaPitchedPtr(in, w * size, w, h);
    p.dstArray = a;
    p.extent = make_cudaExtent(w, h, d);
    p.kind = cudaMemcpyHostToDevice;
    CK(cudaMemcpy3D(&p));
    cudaPitchedPtr dev;
    CK(cudaMalloc3D(&dev, make_cudaExtent(w * size, h, d)));
    cudaMemcpy3DParms q = {0};
    q.srcArray = a;
    q.dstPtr = dev;
    q.extent = make_cudaExtent(w, h, d);
    q.kind = cudaMemcpyDeviceToDevice;
    CK(cudaMemcpy3D(&q));
    cudaMemcpy3DParms r = {0};
    r.srcPtr = dev;
    r.dstPtr = make_cudaPitchedPtr(out, w * size, w, h);
    r.extent = make_cudaExtent(w * size, h, d);
    r.kind = cudaMemcpyDeviceToHost;
    CK(cudaMemcpy3D(&r));
    same(out, in, bytes, name);
    printf("%s: %zu bytes through the array, fnv %016llx\n", name, bytes, (unsigned long long) fnv1a(out, bytes));
    CK(cudaFree(dev.ptr));
    free(in);
    free(out);
}

// one slice (layer or face) `z` of a w x h x d array replaced by a 3D copy; the whole array read back
static void patch_slice(const char *name, cudaArray_t a, size_t size, size_t w, size_t h, size_t d, size_t z) {
    size_t slice = size * w * h, bytes = slice * d;
    unsigned char *all = (unsigned char *) malloc(bytes), *patch = (unsigned char *) malloc(slice),
                  *out = (unsigned char *) malloc(bytes);
    fill(all, bytes, 7 + z);
    fill(patch, slice, 99 + z);
    cudaMemcpy3DParms p = {0};
    p.srcPtr = make_cudaPitchedPtr(all, w * size, w, h);
    p.dstArray = a;
    p.extent = make_cudaExtent(w, h, d);
    p.kind = cudaMemcpyHostToDevice;
    CK(cudaMemcpy3D(&p));
    cudaMemcpy3DParms q = {0};
    q.srcPtr = make_cudaPitchedPtr(patch, w * size, w, h);
    q.dstArray = a;
    q.dstPos = make_cudaPos(0, 0, z);
    q.extent = make_cudaExtent(w, h, 1);
    q.kind = cudaMemcpyHostToDevice;
    CK(cudaMemcpy3D(&q));
    memcpy(all + z * slice, patch, slice);
    cudaMemcpy3DParms r = {0};
    r.srcArray = a;
    r.dstPtr = make_cudaPitchedPtr(out, w * size, w, h);
    r.extent = make_cudaExtent(w, h, d);
    r.kind = cudaMemcpyDeviceToHost;
    CK(cudaMemcpy3D(&r));
    same(out, all, bytes, name);
    printf("%s: slice %zu of %zu replaced, fnv %016llx\n", name, z, d, (unsigned long long) fnv1a(out, bytes));
    free(all);
    free(patch);
    free(out);
}

int main() {
    // 2D, float2: pitched host rows in and out with cudaMemcpy2DToArray / FromArray, a block moved to another array
    cudaChannelFormatDesc f2 = cudaCreateChannelDesc<float2>();
    cudaArray_t a2, b2;
    const size_t W = 64, H = 32, PITCH = W * sizeof(float2) + 40;
    CK(cudaMallocArray(&a2, &f2, W, H));
    CK(cudaMallocArray(&b2, &f2, W, H));
    describe("2D float2", a2);
    unsigned char *host = (unsigned char *) malloc(PITCH * H), *back = (unsigned char *) calloc(PITCH, H);
    fill(host, PITCH * H, 1);
    CK(cudaMemcpy2DToArray(a2, 0, 0, host, PITCH, W * sizeof(float2), H, cudaMemcpyHostToDevice));
    CK(cudaMemcpy2DFromArray(back, PITCH, a2, 0, 0, W * sizeof(float2), H, cudaMemcpyDeviceToHost));
    for (size_t y = 0; y < H; y++) {
        same(back + y * PITCH, host + y * PITCH, W * sizeof(float2), "2D rows");
    }
    // a 16 x 8 block from (8, 4) of a2 to (0, 0) of b2, read back by an async copy
    CK(cudaMemcpy2DArrayToArray(b2, 0, 0, a2, 8 * sizeof(float2), 4, 16 * sizeof(float2), 8, cudaMemcpyDeviceToDevice));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    float2 block[8][16];
    CK(cudaMemcpy2DFromArrayAsync(block, sizeof block[0], b2, 0, 0, sizeof block[0], 8, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    for (int y = 0; y < 8; y++) {
        same(block[y], host + (y + 4) * PITCH + 8 * sizeof(float2), sizeof block[0], "2D array to array");
    }
    printf("2D float2: rows and a block between arrays, fnv %016llx\n", (unsigned long long) fnv1a(block, sizeof block));

    // 1D, ushort: one row
    cudaChannelFormatDesc u16 = cudaCreateChannelDesc<unsigned short>();
    cudaArray_t a1;
    CK(cudaMallocArray(&a1, &u16, 1000));
    describe("1D ushort", a1);
    unsigned short line[1000], line_back[1000];
    fill(line, sizeof line, 2);
    CK(cudaMemcpy2DToArrayAsync(a1, 0, 0, line, sizeof line, sizeof line, 1, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpy2DFromArrayAsync(line_back, sizeof line, a1, 0, 0, sizeof line, 1, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    same(line_back, line, sizeof line, "1D");
    printf("1D ushort: fnv %016llx\n", (unsigned long long) fnv1a(line_back, sizeof line_back));

    // 3D, uchar4
    cudaChannelFormatDesc c4 = cudaCreateChannelDesc<uchar4>();
    cudaArray_t a3;
    CK(cudaMalloc3DArray(&a3, &c4, make_cudaExtent(16, 8, 4)));
    describe("3D uchar4", a3);
    round_trip_3d("3D uchar4", a3, 4, 16, 8, 4);

    // 2D layered, float: 3 layers, layer 1 replaced
    cudaChannelFormatDesc f1 = cudaCreateChannelDesc<float>();
    cudaArray_t l2;
    CK(cudaMalloc3DArray(&l2, &f1, make_cudaExtent(16, 16, 3), cudaArrayLayered));
    describe("2D layered float", l2);
    patch_slice("2D layered float", l2, 4, 16, 16, 3, 1);

    // 1D layered, int: 5 layers of 32 (a layer is one row)
    cudaChannelFormatDesc i1 = cudaCreateChannelDesc<int>();
    cudaArray_t l1;
    CK(cudaMalloc3DArray(&l1, &i1, make_cudaExtent(32, 0, 5), cudaArrayLayered));
    describe("1D layered int", l1);
    patch_slice("1D layered int", l1, 4, 32, 1, 5, 3);

    // cubemap, short2: face 4 replaced; cubemap layered, uchar: 2 layers of 6 faces, face 9 replaced
    cudaChannelFormatDesc s2 = cudaCreateChannelDesc<short2>();
    cudaArray_t cube, cubes;
    CK(cudaMalloc3DArray(&cube, &s2, make_cudaExtent(8, 8, 6), cudaArrayCubemap));
    describe("cubemap short2", cube);
    patch_slice("cubemap short2", cube, 4, 8, 8, 6, 4);
    cudaChannelFormatDesc u8 = cudaCreateChannelDesc<unsigned char>();
    CK(cudaMalloc3DArray(&cubes, &u8, make_cudaExtent(8, 8, 12), cudaArrayCubemap | cudaArrayLayered));
    describe("cubemap layered uchar", cubes);
    patch_slice("cubemap layered uchar", cubes, 1, 8, 8, 12, 9);

    // surface load/store: the flag is kept
    cudaArray_t surf;
    CK(cudaMalloc3DArray(&surf, &f1, make_cudaExtent(32, 16, 0), cudaArraySurfaceLoadStore));
    describe("2D float surface", surf);

    // 3D array to 3D array (a 3D copy between two arrays)
    cudaArray_t b3;
    CK(cudaMalloc3DArray(&b3, &c4, make_cudaExtent(16, 8, 4)));
    cudaMemcpy3DParms aa = {0};
    aa.srcArray = a3;
    aa.dstArray = b3;
    aa.extent = make_cudaExtent(16, 8, 4);
    aa.kind = cudaMemcpyDeviceToDevice;
    CK(cudaMemcpy3D(&aa));
    unsigned char vol[4][8][16][4], vol_b[4][8][16][4];
    cudaMemcpy3DParms ra = {0};
    ra.srcArray = a3;
    ra.dstPtr = make_cudaPitchedPtr(vol, 16 * 4, 16, 8);
    ra.extent = make_cudaExtent(16, 8, 4);
    ra.kind = cudaMemcpyDeviceToHost;
    CK(cudaMemcpy3D(&ra));
    ra.srcArray = b3;
    ra.dstPtr = make_cudaPitchedPtr(vol_b, 16 * 4, 16, 8);
    CK(cudaMemcpy3D(&ra));
    same(vol_b, vol, sizeof vol, "3D array to array");
    printf("3D array to array: fnv %016llx\n", (unsigned long long) fnv1a(vol_b, sizeof vol_b));

    // refusals: a block past the array, a cubemap that is not square
    EXPECT("a 2D copy past the array's width",
           cudaMemcpy2DToArray(a2, 8 * sizeof(float2), 0, host, PITCH, W * sizeof(float2), H, cudaMemcpyHostToDevice),
           cudaErrorInvalidValue);
    cudaArray_t bad = NULL;
    EXPECT("a cubemap of 8x4 faces", cudaMalloc3DArray(&bad, &f1, make_cudaExtent(8, 4, 6), cudaArrayCubemap),
           cudaErrorInvalidValue);
    cudaGetLastError();   // the refusals above are not sticky: clear the last error

    cudaArray_t all[] = {a2, b2, a1, a3, b3, l2, l1, cube, cubes, surf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        CK(cudaFreeArray(all[i]));
    }
    CK(cudaStreamDestroy(s));
    free(host);
    free(back);
    printf("PASS\n");
    return 0;
}
