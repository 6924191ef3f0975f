// Kernels that only benchmarks/bench_cpu_backend.py runs: what the CPU backend costs around a
// kernel's work rather than the work itself. The course's own kernels it times are loaded from
// kernels/cuda/ (reduce/tree.cu, gemm/smem_tiled.cu, gpu_architecture/vector_add.cu).

// vector_add (gpu_architecture/vector_add.cu) with one barrier that changes nothing: what a kernel
// pays for a __syncthreads() that the CPU backend must honour by switching between threads.
// Launch: 1-D, one thread per element.
extern "C" __global__ void vector_add_with_barrier(const float* x, const float* y, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] + y[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = v;
}

// One thread that does nothing: the cost of a launch (fork, wait, checks).
extern "C" __global__ void nothing() {}
