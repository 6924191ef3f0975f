// Shared-memory accesses 8 and 16 bytes wide, for checking the bank model against Nsight Compute.
//
// Every thread stores one float2 (float4) of x into shared memory, and after a barrier loads the
// element (t * stride) mod blockDim.x and writes it to y. A warp's 8-byte request moves 256 bytes
// and a 16-byte request 512, while one wavefront moves at most 128: a float2 request is served in
// two halves of 16 lanes, a float4 request in four quarters of 8 lanes, and a bank conflict is two
// different words of one bank within one of those parts. stride = 1 is conflict-free (2 and 4
// wavefronts); stride = 2 spreads a part's lanes over twice as many bytes, two words per bank (4
// and 8 wavefronts). Launch with blockDim.x <= 256 and one block per blockDim.x elements.
#define TILE 256

extern "C" __global__ void shared_float2(const float2* __restrict__ x, float2* __restrict__ y, int stride)
{
    __shared__ float2 s[TILE];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    s[t] = x[i];
    __syncthreads();
    y[i] = s[(t * stride) % blockDim.x];
}

extern "C" __global__ void shared_float4(const float4* __restrict__ x, float4* __restrict__ y, int stride)
{
    __shared__ float4 s[TILE];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    s[t] = x[i];
    __syncthreads();
    y[i] = s[(t * stride) % blockDim.x];
}
