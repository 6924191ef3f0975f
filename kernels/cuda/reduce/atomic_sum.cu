// The simplest parallel sum: every thread adds its element straight into the result with one
// atomicAdd. Correct (each read-modify-write is indivisible), but every one of the n additions
// targets the same 4-byte word, so the memory system has to apply them one after another; the
// order in which they arrive changes from run to run, and float addition is not associative, so
// the float result changes too.
// *out must hold 0 before the launch. One element per thread: grid = ceil(n / blockDim.x).
extern "C" __global__ void sum_atomic(const float* __restrict__ x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
