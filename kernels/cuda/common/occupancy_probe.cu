// A kernel whose register count is a dial: kernels.occupancy.check_against_cuda compiles it for
// each case with -DNV=<values per thread> and --maxrregcount=<target>, reads the registers and
// static shared memory the compiler produced, and asks the driver how many blocks fit on an SM.
//
// Each thread keeps NV floats live at once (every value feeds later ones, so none is dead code and
// the compiler cannot fold them), which holds the register count near NV + a few. The dynamic
// shared array is declared so that a launch can ask for any amount; the store that touches it
// never runs (n >= 0), but keeps the compiler from removing the declaration.
//
// Launch: any grid and block; out holds grid * block floats, in holds n >= 1 floats.
#ifndef NV
#define NV 24  // the count used when nothing is passed (e.g. when every kernel is compiled as a check)
#endif

extern "C" __global__ void occupancy_probe(const float* __restrict__ in, float* out, int n)
{
    extern __shared__ float dynamic_smem[];
    float v[NV];
    #pragma unroll
    for (int i = 0; i < NV; ++i) v[i] = in[(threadIdx.x + i * 37) % n];
    #pragma unroll
    for (int r = 0; r < 3; ++r) {
        #pragma unroll
        for (int i = 0; i < NV; ++i) v[i] = fmaf(v[i], v[(i + 1) % NV], v[(i + 5) % NV]);
    }
    float s = 0.0f;
    #pragma unroll
    for (int i = 0; i < NV; ++i) s += v[i] * (float)(i + 1);
    if (n < 0) dynamic_smem[threadIdx.x] = s;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
