// cudaMemcpy3DBatchAsync (CUDA 12.8+, the CUDA 13 form) on a stream of its own: one batch uploads a
// pitched host box into a 3D float array at an offset and a second pitched host box into device memory;
// a second batch copies the array's box into device memory and both device boxes back to the host, one
// of them into a wider host layout. Every element equals the CPU's copy of the boxes, and the bytes of
// the host layout the copies do not touch keep their value. The NULL stream, flags other than 0, a zero
// extent and an unknown operand type are refused (cudaErrorInvalidValue).
#include "common.cuh"

static cudaMemcpy3DBatchOp op(cudaMemcpy3DOperand src, cudaMemcpy3DOperand dst, size_t w, size_t h, size_t d) {
    cudaMemcpy3DBatchOp o;
    memset(&o, 0, sizeof o);
    o.src = src;
    o.dst = dst;
    o.extent = make_cudaExtent(w, h, d);
    o.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    return o;
}

static cudaMemcpy3DOperand pointer(void *p, size_t rowLength, size_t layerHeight) {
    cudaMemcpy3DOperand o;
    memset(&o, 0, sizeof o);
    o.type = cudaMemcpyOperandTypePointer;
    o.op.ptr.ptr = p;
    o.op.ptr.rowLength = rowLength;
    o.op.ptr.layerHeight = layerHeight;
    return o;
}

static cudaMemcpy3DOperand array(cudaArray_t a, size_t x, size_t y, size_t z) {
    cudaMemcpy3DOperand o;
    memset(&o, 0, sizeof o);
    o.type = cudaMemcpyOperandTypeArray;
    o.op.array.array = a;
    o.op.array.offset.x = x;
    o.op.array.offset.y = y;
    o.op.array.offset.z = z;
    return o;
}

int main() {
    const int AW = 32, AH = 16, AD = 6;      // the array, in floats
    const int W = 9, H = 5, D = 3;           // the box
    const int RL = 13, LH = 7;               // the host source's row length and layer height, in floats
    const int OX = 4, OY = 3, OZ = 2;        // where the box lies in the array
    cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CK(cudaMalloc3DArray(&arr, &f, make_cudaExtent(AW, AH, AD)));
    size_t srcCount = (size_t) RL * LH * D;
    float *src = (float *) malloc(srcCount * sizeof(float));
    unsigned int *src2 = (unsigned int *) malloc((size_t) W * H * D * 4);
    uint64_t seed = 21;
    for (size_t i = 0; i < srcCount; i++) {
        src[i] = (float) (splitmix64(&seed) % 100000) / 16.0f;
    }
    for (int i = 0; i < W * H * D; i++) {
        src2[i] = (unsigned int) splitmix64(&seed);
    }
    float *dev;
    unsigned int *dev2;
    CK(cudaMalloc(&dev, (size_t) W * H * D * sizeof(float)));
    CK(cudaMalloc(&dev2, (size_t) W * H * D * 4));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    cudaMemcpy3DBatchOp up[2] = {
        op(pointer(src, RL, LH), array(arr, OX, OY, OZ), W, H, D),
        op(pointer(src2, 0, 0), pointer(dev2, 0, 0), W * 4, H, D),   // pointer to pointer: bytes
    };
    CK(cudaMemcpy3DBatchAsync(2, up, 0, s));

    const int BR = 12;                        // the host destination's row length, in floats
    float *back = (float *) malloc((size_t) BR * H * D * sizeof(float));
    unsigned int *back2 = (unsigned int *) malloc((size_t) W * H * D * 4);
    for (int i = 0; i < BR * H * D; i++) {
        back[i] = -1.0f;
    }
    cudaMemcpy3DBatchOp across[1] = {op(array(arr, OX, OY, OZ), pointer(dev, 0, 0), W, H, D)};
    CK(cudaMemcpy3DBatchAsync(1, across, 0, s));
    cudaMemcpy3DBatchOp down[2] = {
        op(pointer(dev, 0, 0), pointer(back, BR * 4, 0), W * 4, H, D),
        op(pointer(dev2, 0, 0), pointer(back2, 0, 0), W * 4, H, D),
    };
    CK(cudaMemcpy3DBatchAsync(2, down, 0, s));
    CK(cudaStreamSynchronize(s));

    double sum = 0;
    for (int z = 0; z < D; z++) {
        for (int y = 0; y < H; y++) {
            for (int x = 0; x < BR; x++) {
                float want = x < W ? src[(size_t) z * RL * LH + (size_t) y * RL + x] : -1.0f;
                float got = back[(size_t) z * BR * H + (size_t) y * BR + x];
                if (got != want) {
                    FAIL("box element (%d,%d,%d): %g, expected %g\n", x, y, z, got, want);
                }
                sum += x < W ? got : 0;
            }
        }
    }
    for (int i = 0; i < W * H * D; i++) {
        if (back2[i] != src2[i]) {
            FAIL("pointer-to-pointer element %d: %u, expected %u\n", i, back2[i], src2[i]);
        }
    }
    printf("host -> array -> device -> host box %dx%dx%d at (%d,%d,%d): sum %.4f\n", W, H, D, OX, OY, OZ, sum);
    printf("host -> device -> host %d bytes: equal\n", W * H * D * 4);

    EXPECT("a batch on the NULL stream", cudaMemcpy3DBatchAsync(1, across, 0, 0), cudaErrorInvalidValue);
    EXPECT("flags other than 0", cudaMemcpy3DBatchAsync(1, across, 1, s), cudaErrorInvalidValue);
    cudaMemcpy3DBatchOp bad = op(array(arr, 0, 0, 0), pointer(dev, 0, 0), W, H, 0);
    EXPECT("a zero depth", cudaMemcpy3DBatchAsync(1, &bad, 0, s), cudaErrorInvalidValue);
    bad = op(array(arr, 0, 0, 0), pointer(dev, 0, 0), W, H, D);
    bad.dst.type = (cudaMemcpy3DOperandType) 3;
    EXPECT("an unknown operand type", cudaMemcpy3DBatchAsync(1, &bad, 0, s), cudaErrorInvalidValue);

    CK(cudaStreamDestroy(s));
    CK(cudaFreeArray(arr));
    CK(cudaFree(dev));
    CK(cudaFree(dev2));
    printf("PASS\n");
    return 0;
}
