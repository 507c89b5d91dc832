// The shipped kernels, built by scripts/gpu-programs into a cubin and a fatbin for module_cubin:
//   nvcc -arch=sm_90 -cubin  -o kernels.cubin  kernels.cu
//   nvcc -arch=sm_90 -fatbin -o kernels.fatbin kernels.cu
#include "../../../src/main/resources/io/gpusockets/kernels/gpusockets_kernels.cu"
