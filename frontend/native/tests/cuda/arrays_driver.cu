// Kernels of arrays_driver.c: a texture fetch per thread into an output buffer, and a surface write.
extern "C" __global__ void sample_layers(cudaTextureObject_t t, float* out, int w, int h, int layers) {
    int x = threadIdx.x, y = threadIdx.y, l = blockIdx.x;
    if (x < w && y < h && l < layers) out[(l * h + y) * w + x] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, l);
}

extern "C" __global__ void write_surface(cudaSurfaceObject_t s, int w, int h, int layers) {
    int x = threadIdx.x, y = threadIdx.y, l = blockIdx.x;
    if (x < w && y < h && l < layers) surf2DLayeredwrite(1000.0f * l + 10.0f * y + x, s, x * 4, y, l);
}
